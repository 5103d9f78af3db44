// The optional kernel interface of the nn wing: the fused transformer ops a backend implements
// (Backend::nn()). The front end (src/nn) has checked every argument, as for Backend methods, and
// calls a kernel only where supports() says it exists; elsewhere it composes the op from Backend
// methods. Inputs are strided Views; results are new contiguous storage.
#pragma once

#include <utility>

#include "backend/backend.h"
#include "backend/op.h"

namespace wick {

// How rope pairs the features of a head: the two halves (x[i], x[i + d/2]), as GPT-NeoX and
// Llama's Hugging Face checkpoints, or neighbours (x[2i], x[2i + 1]), as the original RoPE.
enum class RopePairs : uint8_t { Halves, Interleaved };

// Attention's options after the front end's checks: scale > 0 and finite; window 0 (none) or the
// number of positions a query sees, its own included.
// The largest head dim a backend's paged_attention kernel takes; the front end composes larger.
inline constexpr int64_t kPagedMaxHeadDim = 512;

struct AttentionArgs {
  double scale;
  bool causal;
  int64_t window;
  bool library = true;  // nn::AttentionOptions::library
  double softcap = 0;   // scores s (scaled) become softcap * tanh(s / softcap); 0: none
};

class NnKernels {
 public:
  virtual ~NnKernels() = default;

  // Whether the fused kernel of `op` exists for `dtype` (never beyond op_defined).
  virtual bool supports(NnOp op, DType dtype) const = 0;

  // softmax of x along dim, or log_softmax when `log`; x's shape, computed in the dtype's math
  // type (f32 for halves) from the maximum of each slice.
  virtual StoragePtr softmax(const View& x, int dim, bool log) const = 0;
  // x (..., d) / sqrt(mean(x^2) + eps) * weight, over the last dim; weight (d), or (m, d) for x
  // (..., m, d): x's rows in row-major order take the weight's rows in turn (row r its row r % m).
  virtual StoragePtr rms_norm(const View& x, const View& weight, double eps) const = 0;
  // sum = x + residual, rounded to x's dtype, and rms_norm(sum, weight, eps): a transformer's
  // residual add and the norm after it, in one pass. x and residual of one shape.
  virtual std::pair<StoragePtr, StoragePtr> add_rms_norm(const View& x, const View& residual, const View& weight,
                                                         double eps) const = 0;
  // (x - mean) / sqrt(var + eps) * weight + bias over the last dim (biased variance); weight and
  // bias (d); bias null: none.
  virtual StoragePtr layer_norm(const View& x, const View& weight, const View* bias, double eps) const = 0;

  // Rotary embedding of x (b, h, t, d), or (b, t, h, d) when `thd`, by cos and sin (t, d/2):
  // each pair (a, b) of a head's features at position t becomes (a cos - b sin, a sin + b cos)
  // with the pair's angle. x's shape.
  virtual StoragePtr rope(const View& x, const View& cos, const View& sin, RopePairs pairs, bool thd) const;

  // A decoding step's rope and KV-cache write in one pass: q (b, h, t, d) and k (b, h_kv, t, d)
  // turned as rope() turns them (not thd), then k's turned rows and v's rows (b, h_kv, t, d)
  // written into k_cache and v_cache (b, h_kv, capacity, d; features contiguous, the other dims
  // any strides: a KvCache's, or a paged pool's slots as dim 2; aliasing none of the inputs) at the
  // positions `at` (t distinct i64 values) along dim 2. `paged`: the caches are a paged pool's
  // slots, and a slot out of range is named as nn::paged_rope_write's. As scatter_set: a position
  // equal to i64's maximum is skipped, and one outside [0, capacity) is an IndexError (raised when
  // the device is next waited for where the backend queues work) with nothing written. Returns q
  // turned, (b, h, t, d) contiguous.
  virtual StoragePtr rope_write_at(const View& q, const View& k, const View& v, const View& cos, const View& sin,
                                   RopePairs pairs, const View& at, const MutView& k_cache, const MutView& v_cache,
                                   bool paged) const;
  // A decoding step's rope, KV-cache write and attention in one pass: rope_write_at's call (paged
  // false) for one new position (t = 1), then attention() of the turned q over the caches' first
  // `length` positions (1 <= length <= capacity) with `mask` (null or a view broadcast to (b, h, 1,
  // length)) and `args`; returns attention()'s result, with the bits and the cache writes of those
  // two calls. null (the default): the backend's kernels do not fuse this call, nothing was done,
  // and the front end makes the two calls.
  virtual StoragePtr rope_write_attention(const View& q, const View& k, const View& v, const View& cos, const View& sin,
                                          RopePairs pairs, const View& at, const MutView& k_cache,
                                          const MutView& v_cache, int64_t length, const View* mask,
                                          const AttentionArgs& args) const;
  // An IndexError naming KvCache::write_at (KvCache::rope_write_at where `rope`) for a position of
  // `at` (i64, t values) outside [0, capacity) that is not i64's maximum, raised when the device
  // is next waited for. The front end checks positions on the host itself: a backend whose memory
  // is the host's does nothing here (the default).
  virtual void check_positions(const View& at, int64_t capacity, bool rope) const;

  // softmax(q k^T * scale + mask) v for q (b, h, t_q, d), k and v (b, h_kv, t_kv, d), h a multiple
  // of h_kv (query head i reads key head i / (h / h_kv)); mask null or a view broadcast to
  // (b, h, t_q, t_kv); causal and window as nn::AttentionOptions says. A row with no key left
  // gives zeros. Result (b, h, t_q, d), contiguous.
  virtual StoragePtr attention(const View& q, const View& k, const View& v, const View* mask,
                               const AttentionArgs& args) const;

  // nn::paged_attention: q (t, h, d); k_pool and v_pool (blocks, block_size, h_kv, d) contiguous,
  // or both u8 Q8_0 pools (blocks, block_size, h_kv, d / 32 * 34; nn.h) whose values are read as
  // quant::dequantize gives them; tables (s, max_blocks), seqs (t) and positions (t) i32
  // contiguous. Query i reads the keys at positions lo .. positions[i] (lo = 0, or positions[i] -
  // window + 1 with a window) of sequence seqs[i] through its table. The front end has checked the
  // indices where they lie in host memory; a backend whose memory is the device's checks them as
  // it reads them, and reports one out of range as an IndexError at the next wait (that token's
  // result zeros). Result (t, h, d), contiguous.
  virtual StoragePtr paged_attention(const View& q, const View& k_pool, const View& v_pool, const View& tables,
                                     const View& seqs, const View& positions, const AttentionArgs& args) const;
  // Rows of values (x contiguous (n, d), f32, f16 or bf16, d a multiple of 32) rounded to Q8_0 as
  // kernels/quant.h's quantize_q8_0 rounds them: new contiguous u8 storage (n, d / 32 * 34), the
  // bytes of quant::quantize. nullptr (the default): no kernel, the front end runs quant::quantize.
  virtual StoragePtr quantize_q8_0(const View& x) const;

  // silu(gate) * up, computed in the math type and rounded once: the gated unit of a SwiGLU
  // feed-forward layer. gate and up of one shape.
  virtual StoragePtr silu_mul(const View& gate, const View& up) const = 0;

  // nn::moe_route for scores (n, experts) contiguous, n >= 1, 1 <= k <= experts: its five results
  // (nn::MoeRouting's ids, weights, tokens, slots, groups) as new contiguous storage; all null (the
  // default) where the backend has no kernel for this shape, and the front end routes on the host.
  struct MoeRouteStorage {
    StoragePtr ids, weights, tokens, slots, groups;
  };
  virtual MoeRouteStorage moe_route(const View& scores, int64_t k, bool renormalize) const;
  // nn::moe_combine for y (n * k, d) contiguous, weights (n, k) f32 and slots (n * k) i64
  // contiguous: new contiguous storage (n, d) of y's dtype; null (the default): the front end
  // composes it. A backend whose memory is the device's checks each slot as it reads it (an
  // IndexError at the next wait; that token's output zeros).
  virtual StoragePtr moe_combine(const View& y, const View& weights, const View& slots, int64_t k) const;
  // nn::matmul_grouped for x (p, cols) and w (experts * rows, cols) contiguous, groups (g, 3) i64
  // contiguous: new contiguous storage (p, rows) of x's dtype, zeros where no group names a row;
  // null (the default, and a GPU's choice for groups past 64 rows): the front end composes it. A
  // backend whose memory is the device's checks each entry as it reads it (an IndexError at the
  // next wait; that group left out).
  virtual StoragePtr matmul_grouped(const View& x, const View& w, int64_t experts, const View& groups,
                                    int64_t max_rows) const;
};

// The kernels above as one list of declarations, for a backend that implements all of them.
#define WICK_NN_KERNEL_OVERRIDES                                                                                      \
  StoragePtr softmax(const View& x, int dim, bool log) const override;                                                \
  StoragePtr rms_norm(const View& x, const View& weight, double eps) const override;                                  \
  std::pair<StoragePtr, StoragePtr> add_rms_norm(const View& x, const View& residual, const View& weight, double eps) \
      const override;                                                                                                 \
  StoragePtr layer_norm(const View& x, const View& weight, const View* bias, double eps) const override;              \
  StoragePtr rope(const View& x, const View& cos, const View& sin, RopePairs pairs, bool thd) const override;         \
  StoragePtr attention(const View& q, const View& k, const View& v, const View* mask, const AttentionArgs& args)      \
      const override;                                                                                                 \
  StoragePtr paged_attention(const View& q, const View& k_pool, const View& v_pool, const View& tables,               \
                             const View& seqs, const View& positions, const AttentionArgs& args) const override;      \
  StoragePtr quantize_q8_0(const View& x) const override;                                                             \
  StoragePtr silu_mul(const View& gate, const View& up) const override;

}  // namespace wick
