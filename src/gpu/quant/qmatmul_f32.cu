// The block formats' kernels for x in f32 (qmatmul.cuh), in a translation unit of their own so
// that the three dtypes of x compile in parallel.
#include "gpu/quant/qmatmul.cuh"

namespace wick::gpu::qmm {

template void launch_dequantize<float>(const GpuBackend&, QType, const uint8_t*, int64_t, int64_t, float*);
template void launch_dot_rows<float>(GpuBackend&, QType, const uint8_t*, int64_t, int64_t, const float*, int, float*,
                                     int);

template void launch_dot_rows_grouped<float>(GpuBackend&, QType, const uint8_t*, int64_t, int64_t, const float*,
                                             int64_t, bool, const int64_t*, int64_t, int64_t, int, float*);

}  // namespace wick::gpu::qmm
