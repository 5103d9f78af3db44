// The block formats' kernels for x in f16 (qmatmul.cuh), in a translation unit of their own so
// that the three dtypes of x compile in parallel.
#include "gpu/quant/qmatmul.cuh"

namespace wick::gpu::qmm {

template void launch_dequantize<f16>(const GpuBackend&, QType, const uint8_t*, int64_t, int64_t, f16*);
template void launch_dot_rows<f16>(GpuBackend&, QType, const uint8_t*, int64_t, int64_t, const f16*, int, f16*, int);

template void launch_dot_rows_grouped<f16>(GpuBackend&, QType, const uint8_t*, int64_t, int64_t, const f16*, int64_t,
                                           bool, const int64_t*, int64_t, int64_t, int, f16*);

}  // namespace wick::gpu::qmm
