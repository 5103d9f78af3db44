// What the GPU attention kernels share: the problem as the host lays it out for them, the
// launcher of the matrix-unit kernel (attention_mma.cuh), one translation unit per half dtype, and
// the vendor library's fused attention.
#pragma once

#include <cstdint>

#include "wick/dtype.h"

namespace wick::gpu {

class GpuBackend;

namespace nn {

// q (b, h, t_q, d), k and v (b, h_kv, t_kv, d), mask (b, h, t_q, t_kv): element pointers at each
// view's offset and strides in elements (mask null: none). out: contiguous (b, h, t_q, d).
struct AttentionGeom {
  const void* q;
  const void* k;
  const void* v;
  const void* mask;
  void* out;
  int64_t q_stride[4], k_stride[4], v_stride[4], mask_stride[4];
  int64_t batch, heads, kv_heads, t_q, t_kv, d;
  int64_t group;  // heads / kv_heads: query heads per key head
  int64_t window;
  double scale;
  bool causal;
  // Rows of q, k, v (and out) can be read in 16-byte packs: d a whole number of packs, features
  // contiguous, every row 16-byte aligned.
  bool vec_q, vec_k, vec_v, vec_out;
};

// Queues the matrix-unit kernel for T = f16 or bf16 when d fits one of its head-dim tiles and the
// device gives the shared memory; false (nothing queued) otherwise.
template <typename T>
bool launch_attention_mma(const AttentionGeom& g, GpuBackend& backend);

// Queues cuDNN's fused flash attention (attention_cudnn.cu) on the backend's stream and returns
// true, or returns false with nothing queued when it does not serve the call: it serves f16 and
// bf16 with d a multiple of 8 up to 256, no mask, no window, causal only with t_q <= t_kv,
// contiguous features, 16-byte aligned rows, and what cuDNN accepts of the rest. ROCm: always false.
bool launch_attention_cudnn(const AttentionGeom& g, DType dt, GpuBackend& backend);

}  // namespace nn
}  // namespace wick::gpu
