// CUB (CUDA) or hipCUB (ROCm) for the device-wide sorts: a heavy header, included only where a
// sort is done. wick::gpu::gpucub names whichever is built.
#pragma once

#if defined(__HIPCC__) || defined(WICK_BACKEND_HIP)
#include <hipcub/hipcub.hpp>
namespace wick::gpu {
namespace gpucub = ::hipcub;
}
#else
#include <cub/cub.cuh>
namespace wick::gpu {
namespace gpucub = ::cub;
}
#endif
