// The matrix-unit attention kernel for f16 (attention_mma.cuh), in a translation unit of its own
// so that the two half dtypes compile in parallel.
#include "gpu/nn/attention_mma.cuh"

namespace wick::gpu::nn {

template bool launch_attention_mma<f16>(const AttentionGeom& g, GpuBackend& backend, const RopeWriteGeom* rope);

}  // namespace wick::gpu::nn
