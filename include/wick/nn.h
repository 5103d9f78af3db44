// The nn wing: fused transformer ops as free functions (as Candle's candle-nn and MLX's fast).
// Every op runs on every backend: through the backend's fused kernel where it has one (`wick ops`
// lists them), else composed from wick's other ops, with the same results within the float
// tolerance of docs/numerics.md. Inputs may be any strided view; results are new contiguous
// tensors of the input's dtype. Halves (f16, bf16) are computed in f32.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "wick/tensor.h"

namespace wick::nn {

// exp(x - max) / sum(exp(x - max)) along dim (negative counts from the end): stable for any
// magnitude. A slice holding NaN, or only -inf, gives NaN (as PyTorch). f64, f32, f16, bf16.
Tensor softmax(const Tensor& x, int64_t dim);
// (x - max) - log(sum(exp(x - max))) along dim.
Tensor log_softmax(const Tensor& x, int64_t dim);

// x / sqrt(mean(x^2) + eps) * weight over the last dim; weight of shape (d), d = x's last dim, or
// of x's last two dims (m, d): row i of it weighs the rows x[..., i, :] (several heads' norms in one
// call, each head's row normed as a call of its own would norm it: the same bits).
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps);
// A transformer's residual add and the norm after it in one pass: sum = x + residual, rounded to
// x's dtype as `x + residual` is, and normed = rms_norm(sum, weight, eps), the same bits as those
// two calls give. x and residual of one shape (no broadcasting), dtype and device; weight of
// shape (d) only. f64, f32, f16, bf16. Errors: ShapeError for shapes that differ or a weight not (d);
// DTypeError for another dtype or operands of different dtypes; DeviceError for operands on two
// devices.
struct AddRmsNorm {
  Tensor sum;
  Tensor normed;
};
AddRmsNorm add_rms_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, double eps);
// (x - mean) / sqrt(var + eps) * weight + bias over the last dim, var the biased variance;
// weight and bias of shape (d). Without bias: the same with bias 0.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);
Tensor layer_norm(const Tensor& x, const Tensor& weight, double eps);

// silu(gate) * up = gate / (1 + exp(-gate)) * up, computed in f32 for halves and rounded once:
// the gated unit of a SwiGLU feed-forward layer (Llama, Mistral, Qwen2), one pass over gate and
// up where `gate.silu() * up` makes two. gate and up of one shape, dtype and device, any strided
// views (the two halves of one stacked product, say). f64, f32, f16, bf16. Errors as add_rms_norm.
Tensor silu_mul(const Tensor& gate, const Tensor& up);

// ---- mixtures of experts ----------------------------------------------------------------------
// A mixture-of-experts layer (Mixtral, Qwen3-MoE) as three ops that never wait for the host where
// the device has their kernels (a GPU's): moe_route picks each token's experts and lays the n * k
// (token, expert) pairs out in the experts' order; every chosen expert multiplies its rows at once
// (quant::qmatmul_grouped for block-format experts, matmul_grouped below for dense ones,
// x.index_select(routing.tokens) as the input); moe_combine sums each token's outputs, weighted.
// Decoding reads only the chosen experts' weights, in a fixed number of launches whatever the
// choices, so the steps can be recorded.
struct MoeRouting {
  Tensor ids;      // (n, k) i64: each token's experts, in ascending order
  Tensor weights;  // (n, k) f32: their weights, in the same order
  Tensor tokens;   // (n * k) i64: the token of each row of the grouped products
  Tensor slots;    // (n * k) i64: the row of token i's j-th expert, at i * k + j
  // (min(experts, n * k), 3) i64: [expert, first row, end row) of each chosen expert, in ascending
  // order of the experts, then [0, n * k, n * k) (none) to the end. Rows run expert by expert and,
  // within an expert, token by token.
  Tensor groups;
};
// The routing of the tokens whose router scores are `scores` (n, experts), f32, f16 or bf16: each
// token's softmax over its scores; its k highest-scoring experts (the lower index first among equal
// scores; a NaN score counts as the least); each chosen expert's probability as its weight, over
// the chosen ones' sum where `renormalize` (Mixtral, Qwen3-MoE), else over all. Results on scores'
// device. Errors: ShapeError for scores not of rank 2 or k outside [1, experts]; DTypeError for
// another dtype.
MoeRouting moe_route(const Tensor& scores, int64_t k, bool renormalize);
// The mixture's output (n, d) from y (n * k, d), the rows of a grouped product in the routing's
// order: token i's sum over j = 0 .. k-1 of weights[i, j] * y[slots[i * k + j]], in that order and
// in f32 for halves, rounded once to y's dtype (a token's bits do not depend on the other tokens).
// f32, f16, bf16. Errors: ShapeError for y not (n * k, d), DeviceError for a routing on another
// device, DTypeError for another dtype.
Tensor moe_combine(const Tensor& y, const MoeRouting& routing);
// The dense counterpart of quant::qmatmul_grouped: the products of `experts` weights of one shape
// stacked in w ((experts * rows, cols), x's dtype and device: expert e's weight is rows e * rows ..
// (e + 1) * rows - 1), each over its own rows of x (p, cols): for each [expert, first, end) of
// `groups` (g, 3) i64 on x's device (MoeRouting::groups), rows first .. end - 1 of x times that
// expert's weight transposed, summed in f32 for halves; rows of x no group names give zeros. Result
// (p, rows), x's dtype. `max_rows`: at most this many rows in any group (the routing's tokens, n):
// up to 64 (any count while a graph is recorded, or in batch-invariant mode), a GPU computes every
// group in one launch without reading the groups on the host (a group past it is still computed
// whole); past it, and on the CPU, each group is a matmul of its own. f64, f32, f16, bf16.
// Errors: ShapeError for x not (p, cols), groups not (g, 3) or w's rows not a multiple of
// `experts`; DTypeError for another dtype or w's differing from x's; DeviceError for operands on
// different devices; IndexError for an expert outside [0, experts) or rows outside [0, p) (at the
// next wait, on a GPU, those groups left out).
Tensor matmul_grouped(const Tensor& x, const Tensor& w, int64_t experts, const Tensor& groups, int64_t max_rows);

// ---- rotary position embeddings ----------------------------------------------------------------
// Each pair (a, b) of a head's features at position t turns by the angle whose cosine and sine are
// cos[t, i] and sin[t, i]: (a cos - b sin, a sin + b cos). cos and sin have shape (t, d/2) and
// x's dtype and device, d even. As Candle's candle-nn rotary_emb:
//   rope      x (b, h, t, d), pair i is (x[i], x[i + d/2]) (GPT-NeoX, Llama checkpoints);
//   rope_i    x (b, h, t, d), pair i is (x[2i], x[2i + 1]) (interleaved, as the RoPE paper);
//   rope_thd  x (b, t, h, d), pairs as rope.
// x, cos and sin may be any views: a model's (b, t, h, d) transposed to (b, h, t, d), rows of a
// longer table. f64, f32, f16, bf16 (halves computed in f32); the result is x's shape, contiguous,
// the same bits on every backend (docs/numerics.md). Errors: ShapeError for x not of rank 4, an
// odd d, tables not (t, d/2); DTypeError for a dtype not listed or tables of another dtype;
// DeviceError for tables on another device.
Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin);
Tensor rope_i(const Tensor& x, const Tensor& cos, const Tensor& sin);
Tensor rope_thd(const Tensor& x, const Tensor& cos, const Tensor& sin);

// Llama 3.1's "llama3" frequency scaling (rope_scaling in a checkpoint's config.json): wavelengths
// longer than original_max_position / low_freq_factor are divided by `factor`, those shorter than
// original_max_position / high_freq_factor kept, those between blended smoothly.
struct RopeScaling {
  double factor = 8;
  double low_freq_factor = 1;
  double high_freq_factor = 4;
  int64_t original_max_position = 8192;
};

// The tables of rope for positions offset .. offset + t - 1 (offset: the tokens already in a KV
// cache when decoding): cos and sin of p * theta^(-2i / head_dim), i < head_dim / 2, computed in
// f64 and stored as `dtype` on `device`, each of shape (t, head_dim / 2); the tables from offset k
// are rows k.. of a longer table, bit for bit. ShapeError unless head_dim is even and positive,
// t and offset at least 0, theta finite and positive, and llama3's factor finite and positive,
// 0 < low_freq_factor < high_freq_factor (finite) and original_max_position positive; DTypeError
// for a dtype rope does not take.
struct RopeTables {
  Tensor cos;
  Tensor sin;
};
RopeTables rope_tables(int64_t head_dim, int64_t t, double theta, int64_t offset = 0, DType dtype = DType::F32,
                       Device device = Device::cpu(), const std::optional<RopeScaling>& llama3 = std::nullopt);

// ---- attention ----------------------------------------------------------------------------------
struct AttentionOptions {
  // Query i of t_q sits at position t_kv - t_q + i (the last t_q positions, so that a decode step
  // with a KV cache needs no offset) and sees keys at positions up to its own.
  bool causal = false;
  // The factor of q k^T; default 1 / sqrt(d).
  std::optional<double> scale;
  // Added to the scaled scores: q's dtype, broadcastable to (b, h, t_q, t_kv); -inf hides a key.
  // Undefined: none.
  Tensor mask;
  // Sliding window (Mistral): a query at position p sees only keys at positions above p - window.
  // 0: no window.
  int64_t window = 0;
  // Gemma 2's soft-capping: each scaled score s becomes softcap * tanh(s / softcap) before the
  // mask is added; 0: none. wick's kernels cap in place; the vendor libraries' are not used then.
  double softcap = 0;
  // Whether a vendor library's fused attention (cuDNN) may serve the call, where it serves the
  // shape. It plans each new shape on its first call (tens of milliseconds) and keeps the plan:
  // false for calls whose shapes change from call to call (an engine's prompt chunks), which then
  // take wick's own kernels.
  bool library = true;
};

// softmax(q k^T * scale + mask) v, without a (t_q, t_kv) score tensor in memory on the backends
// with a fused kernel. q (b, h, t_q, d); k and v (b, h_kv, t_kv, d) with h a multiple of h_kv:
// query head i reads key and value head i / (h / h_kv) (grouped-query attention). q, k and v may
// be strided views, such as (b, t, h, d) tensors transposed to (b, h, t, d). A query that sees
// no key (every score -inf, or none left by causal or window) gives zeros, where PyTorch gives
// NaN. f64, f32, f16, bf16 (halves accumulate in f32). Result (b, h, t_q, d).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options = {});

// One layer's keys and values for decoding: (b, h_kv, capacity, d) of each, allocated once on a
// device; append() writes new positions in place and returns views of the filled part, so that a
// token costs no copy of the cache.
class KvCache {
 public:
  KvCache(int64_t batch, int64_t kv_heads, int64_t capacity, int64_t head_dim, DType dtype, Device device);

  // Writes k and v (b, h_kv, t_new, d; any strided view) at positions size() .. size() + t_new - 1
  // and returns (keys, values) of the filled part, (b, h_kv, size(), d) views of the cache. Past
  // the capacity: a ShapeError, and the cache is unchanged.
  std::pair<Tensor, Tensor> append(const Tensor& k, const Tensor& v);
  // Views of the filled part.
  Tensor keys() const;
  Tensor values() const;
  int64_t size() const { return size_; }
  int64_t capacity() const { return capacity_; }
  // Forgets positions from `size` on (0: all); size at most size().
  void truncate(int64_t size);

  // For a step recorded as a wick::Graph, whose positions cannot be host values fixed at
  // recording: writes k and v (b, h_kv, t_new, d) at the positions held in `at` (t_new of them,
  // i64, on the cache's device, each below the capacity: one out of range is an IndexError when the
  // device is next waited for) and returns views of the first `length` positions (length at most
  // the capacity). size() does not change: set_size() says how many positions hold values.
  std::pair<Tensor, Tensor> write_at(const Tensor& k, const Tensor& v, const Tensor& at, int64_t length);
  // write_at with the step's rotary embedding: q (b, h, t_new, d) and k are turned as rope
  // (rope_i when `interleaved`) turns them by cos and sin (t_new, d/2), then the turned k and v are
  // written as write_at writes them. Returns the turned q (contiguous) and write_at's views: the
  // same bits as rope(q), then write_at(rope(k), v, at, length), with those calls' errors and
  // write_at's skip of i64's maximum as a position; q has k's batch, positions and d. A decoding
  // step's one position runs in one pass on a GPU, where rope and write_at take three launches.
  struct Rotated {
    Tensor q;
    Tensor keys;
    Tensor values;
  };
  Rotated rope_write_at(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cos, const Tensor& sin,
                        bool interleaved, const Tensor& at, int64_t length);
  // A decoding step's attention: rope_write_at(q, k, v, cos, sin, interleaved, at, length), then
  // scaled_dot_product_attention(turned q, keys, values, options); returns the attention's result
  // (b, h, t_new, d), the same bits as those two calls, with the same writes into the cache. Every
  // argument is checked before anything is written; a position out of range on a device is
  // rope_write_at's IndexError, at the next wait. One kernel on a GPU where its matrix-unit
  // attention decodes: f16 or bf16, one new position, at most 16 query heads per key head.
  Tensor rope_write_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cos, const Tensor& sin,
                              bool interleaved, const Tensor& at, int64_t length, const AttentionOptions& options);
  // Declares positions 0 .. size - 1 filled (size at most the capacity).
  void set_size(int64_t size);

 private:
  // The checks of new keys and values k and v.
  void check_new(const char* op, const Tensor& k, const Tensor& v) const;
  // write_at's checks of the positions `at` of k's t_new new ones and of the views' length.
  void check_at(const char* op, const Tensor& k, const Tensor& at, int64_t length) const;
  // rope_write_at's checks.
  void check_rope_write(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cos,
                        const Tensor& sin, const Tensor& at, int64_t length) const;
  // write_at's writes, checked: positions on a device are checked there, the error named for
  // rope_write_at where `rope`.
  std::pair<Tensor, Tensor> scatter_rows(const Tensor& k, const Tensor& v, const Tensor& at, int64_t length, bool rope);

  Tensor k_, v_;  // (b, h_kv, capacity, d)
  int64_t capacity_ = 0;
  int64_t size_ = 0;
};

// ---- paged attention ---------------------------------------------------------------------------
// A paged KV cache keeps each layer's keys and values in one pool of fixed-size blocks,
// (blocks, block_size, h_kv, d) each, shared by every sequence: a sequence's position p lies in
// block tables[s, p / block_size] at slot p % block_size (models::KvBlocks keeps the tables). The
// calls below take packed query tokens of many sequences at once (a batch of decode steps and
// prompt chunks), each token with its sequence and position.
//
// A pool may instead hold its rows in Q8_0, GGUF's 8-bit block format, at a bit over half the
// bytes of bf16: a u8 pool (blocks, block_size, h_kv, paged_q8_0_row_bytes(d)) whose every head row
// is d / 32 blocks of an f16 scale and 32 int8 values (d a multiple of 32). paged_write rounds the
// rows as quant::quantize does (the same bytes); paged_attention reads the values as
// quant::dequantize gives them.
constexpr int64_t paged_q8_0_row_bytes(int64_t d) { return d / 32 * 34; }

struct PagedAttentionOptions {
  std::optional<double> scale;  // the factor of q k^T; default 1 / sqrt(d)
  int64_t window = 0;           // a query at position p sees keys above p - window; 0: no window
  double softcap = 0;           // as AttentionOptions::softcap (the kernels cap in place)
};

// Attention of query tokens q (t, h, d) over their sequences' keys and values in the pools k_pool
// and v_pool (blocks, block_size, h_kv, d), or both Q8_0 pools (above), h a multiple of h_kv
// (grouped-query attention, as scaled_dot_product_attention). tables (s, max_blocks) i32 lists each sequence's blocks;
// seqs (t) i32 names each token's sequence and positions (t) i32 its position. Query i sees the keys at positions 0 ..
// positions[i] of sequence seqs[i] (causal: its own key, written by paged_write before this call, included), or the
// last `window` of them. Only the table entries of the blocks a query reads are looked at (the rest may be anything, -1
// say). Result (t, h, d), q's dtype; f64, f32, f16, bf16 (halves accumulate in f32). Errors: ShapeError, DTypeError and
// DeviceError for operands that do not fit; IndexError naming the token for a sequence outside [0, s), a position
// outside [0, max_blocks * block_size), or a block outside [0, blocks): at once where the indices
// lie in host memory, else when the device is next waited for (the token's result is then zeros).
Tensor paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const Tensor& tables,
                       const Tensor& seqs, const Tensor& positions, const PagedAttentionOptions& options = {});

// Writes keys k and values v (t, h_kv, d; any strided views) into the pools (blocks, block_size,
// h_kv, d) at slots (t) i64, slot = block * block_size + position % block_size; a slot equal to
// i64's maximum is skipped. Into Q8_0 pools, k and v (f32, f16, bf16 or f64) are rounded to Q8_0
// first. Errors as Tensor::scatter_set's: an IndexError for a slot outside the pool (at the next
// wait on a device), and ShapeError or DTypeError for operands that do not fit.
void paged_write(Tensor& k_pool, Tensor& v_pool, const Tensor& k, const Tensor& v, const Tensor& slots);

// A step's rope and paged_write in one pass where the backend has the kernel (a GPU's, the one
// KvCache::rope_write_at runs): q (t, h, d) and k (t, h_kv, d) turned as rope() turns them (rope_i
// where interleaved) with cos and sin (t, d / 2, a row per token), then k's turned rows and v's
// written at slots as paged_write writes them. Returns q turned, (t, h, d). The same values as
// rope() and paged_write() apart (Q8_0 pools, and backends without the kernel, run those);
// their errors, named paged_rope_write.
Tensor paged_rope_write(Tensor& k_pool, Tensor& v_pool, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& cos, const Tensor& sin, bool interleaved, const Tensor& slots);

}  // namespace wick::nn
