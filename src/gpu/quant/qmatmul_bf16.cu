// The block formats' kernels for x in bf16 (qmatmul.cuh), in a translation unit of their own so
// that the three dtypes of x compile in parallel.
#include "gpu/quant/qmatmul.cuh"

namespace wick::gpu::qmm {

template void launch_dequantize<bf16>(const GpuBackend&, QType, const uint8_t*, int64_t, int64_t, bf16*);
template void launch_dot_rows<bf16>(GpuBackend&, QType, const uint8_t*, int64_t, int64_t, const bf16*, int, bf16*, int);

template void launch_dot_rows_grouped<bf16>(GpuBackend&, QType, const uint8_t*, int64_t, int64_t, const bf16*, int64_t,
                                            bool, const int64_t*, int64_t, int64_t, int, bf16*);

}  // namespace wick::gpu::qmm
