// The vendor layer for the build at hand: CUDA under nvcc, HIP under hipcc.
#pragma once

#if defined(__HIPCC__) || defined(WICK_BACKEND_HIP)
#include "gpu/vendor/hip.h"
#else
#include "gpu/vendor/cuda.h"
#endif
