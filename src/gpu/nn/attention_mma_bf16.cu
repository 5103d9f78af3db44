// The matrix-unit attention kernel for bf16 (attention_mma.cuh), in a translation unit of its own
// so that the two half dtypes compile in parallel.
#include "gpu/nn/attention_mma.cuh"

namespace wick::gpu::nn {

template bool launch_attention_mma<bf16>(const AttentionGeom& g, GpuBackend& backend, const RopeWriteGeom* rope);

}  // namespace wick::gpu::nn
