// The matrix-unit kernels of the block formats for x in f16 (qmatmul_tiles.cuh), in a translation
// unit of their own so that the two dtypes of x compile in parallel.
#include "gpu/quant/qmatmul_tiles.cuh"

namespace wick::gpu::qmm {

template StoragePtr launch_tile_rows<f16>(GpuBackend&, QType, const uint8_t*, int64_t, int64_t, const f16*, int);

}  // namespace wick::gpu::qmm
