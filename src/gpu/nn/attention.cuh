// What the GPU attention kernels share: the problem as the host lays it out for them, the
// launcher of the matrix-unit kernel (attention_mma.cuh), one translation unit per half dtype, and
// the vendor library's fused attention.
#pragma once

#include <cstdint>

#include "kernels/numeric.h"
#include "wick/dtype.h"

namespace wick::gpu {

class GpuBackend;
struct KernelError;

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
  double softcap;  // scaled scores s become softcap * tanh(s / softcap); 0: none
  bool causal;
  bool library;  // cuDNN may serve it (nn::AttentionOptions::library)
  // Rows of q, k, v (and out) can be read in 16-byte packs: d a whole number of packs, features
  // contiguous, every row 16-byte aligned.
  bool vec_q, vec_k, vec_v, vec_out;
};

// A decoding step fused into the attention (NnKernels::rope_write_attention): q's rows, as
// AttentionGeom's q gives them, are turned by the step's rope in the kernel, and the new key
// (turned) and value are written into the caches (whose first t_kv positions are AttentionGeom's k
// and v) at position *at by the one block whose key range holds it, which also puts them into the
// tiles it copied from the caches (no block reads that position from memory in this launch).
struct RopeWriteGeom {
  const void* k;  // the new key and value, (b, h_kv, 1, d): element pointers, strides in elements
  const void* v;
  int64_t k_stride[4], v_stride[4];
  void* k_cache;  // the caches, (b, h_kv, capacity, d) with AttentionGeom's k and v strides
  void* v_cache;
  const void* cos;  // the step's rows of the tables: d / 2 values each, `stride` apart
  const void* sin;
  int64_t cos_stride, sin_stride;
  const int64_t* at;  // the new position: i64's maximum writes nothing, one out of range neither
  int64_t capacity;
  bool interleaved;    // pairs (x[2i], x[2i + 1]), else (x[i], x[i + d/2])
  int position_error;  // how a position out of range is named (runtime.h's report_position_error)
  KernelError* err;
};

// The number of key ranges to split each of `blocks` blocks of rows into, so that `capacity`
// resident blocks finish soonest: the fewest rounds, each range costing its keys plus a block's
// fixed work, ranges of at least min_keys keys. Splitting pays when the blocks of rows alone
// would leave the device idle (decoding).
int64_t attention_splits(int64_t blocks, int64_t t_kv, int64_t capacity, int64_t min_keys);

// Queues the merge of `splits` key ranges of each of `rows` output rows (flash decoding):
// part_o (splits, rows, d) unnormalised outputs, part_ml (splits, rows, 2) each range's maximum
// and sum, maxima in base 2 when base2 (else natural); out (rows, d) = sum of outputs over sum of
// sums, each range scaled to the common maximum.
template <typename T>
void launch_attention_combine(const kernels::opmath_t<T>* part_o, const kernels::opmath_t<T>* part_ml, T* out,
                              int64_t rows, int64_t d, int64_t splits, bool base2, GpuBackend& backend);

// Queues the matrix-unit kernel for T = f16 or bf16 when d fits one of its head-dim tiles and the
// device gives the shared memory; false (nothing queued) otherwise. Any t_q: decoding splits the
// keys across blocks and merges them with launch_attention_combine. With `rope` (t_q 1, d even),
// the kernel first runs the step it describes; only the decoding tiles (g.group <= 16) take it.
template <typename T>
bool launch_attention_mma(const AttentionGeom& g, GpuBackend& backend, const RopeWriteGeom* rope = nullptr);

// Queues cuDNN's fused flash attention (dnn_attention_cuda.cu) on the backend's stream and returns
// true, or returns false with nothing queued when it does not serve the call: it serves f16 and
// bf16 with d a multiple of 8 up to 256, no mask, no window, causal only with t_q <= t_kv,
// contiguous features, 16-byte aligned rows, and what cuDNN accepts of the rest. ROCm: always false.
bool launch_attention_cudnn(const AttentionGeom& g, DType dt, GpuBackend& backend);

}  // namespace nn
}  // namespace wick::gpu
