// paged_attention and paged_write: the checks, then the backend's fused kernel, or the composition
// that is its oracle: each sequence's keys gathered from the pool by slot, then the composed
// attention of nn/attention.cpp with a mask of the positions each query sees.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "nn/nn_ops.h"
#include "wick/nn.h"
#include "wick/ops.h"
#include "wick/quant.h"

namespace wick::nn {

namespace {

constexpr const char* kOp = "paged_attention";

bool is_q8_0_pool(const Tensor& pool) { return pool.defined() && pool.dtype() == DType::U8; }

// A Q8_0 pool's rows hold d values: d a multiple of 32, paged_q8_0_row_bytes(d) bytes a row.
void check_q8_0_row(const char* op, int64_t d, const Tensor& pool) {
  WICK_CHECK(d % 32 == 0 && pool.dim(3) == paged_q8_0_row_bytes(d), ShapeError, op, "a Q8_0 pool ", ops::describe(pool),
             " holds rows of a head dim that is a multiple of 32 in d / 32 * 34 bytes, not ", d, " values");
}

void check_index_operand(const char* what, const Tensor& t, const Tensor& q, int64_t rank) {
  ops::check_defined(kOp, t);
  ops::check_same_device(kOp, {&q, &t});
  WICK_CHECK(t.dtype() == DType::I32, DTypeError, kOp, what, " ", ops::describe(t), " must be i32");
  WICK_CHECK(t.rank() == rank, ShapeError, kOp, what, " ", ops::describe(t), " must have rank ", rank);
}

void check_arguments(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const Tensor& tables,
                     const Tensor& seqs, const Tensor& positions, const PagedAttentionOptions& o) {
  detail::check_input(kOp, NnOp::PagedAttention, q);
  ops::check_defined(kOp, k_pool);
  ops::check_defined(kOp, v_pool);
  ops::check_same_device(kOp, {&q, &k_pool, &v_pool});
  const bool q8 = is_q8_0_pool(k_pool);
  for (const Tensor* t : {&k_pool, &v_pool})
    WICK_CHECK(t->dtype() == (q8 ? DType::U8 : q.dtype()), DTypeError, kOp, t == &k_pool ? "k_pool " : "v_pool ",
               ops::describe(*t), q8 ? " must be u8 as k_pool is (Q8_0 pools)" : " must have the dtype of q ",
               ops::describe(q));
  WICK_CHECK(q.rank() == 3 && k_pool.rank() == 4, ShapeError, kOp,
             "needs q (t, h, d) and pools (blocks, block_size, h_kv, d), got q ", ops::describe(q), ", k_pool ",
             ops::describe(k_pool));
  WICK_CHECK(k_pool.shape() == v_pool.shape(), ShapeError, kOp, "k_pool ", ops::describe(k_pool), " and v_pool ",
             ops::describe(v_pool), " must have one shape");
  const int64_t h = q.dim(1), h_kv = k_pool.dim(2);
  if (q8)
    check_q8_0_row(kOp, q.dim(2), k_pool);
  else
    WICK_CHECK(q.dim(2) == k_pool.dim(3), ShapeError, kOp, "q ", ops::describe(q), " and k_pool ",
               ops::describe(k_pool), " differ in the head dim d");
  WICK_CHECK(h_kv > 0 ? h % h_kv == 0 : h == 0, ShapeError, kOp, "the query heads of q ", ops::describe(q),
             " must be a multiple of the key and value heads of k_pool ", ops::describe(k_pool));
  check_index_operand("tables", tables, q, 2);
  check_index_operand("seqs", seqs, q, 1);
  check_index_operand("positions", positions, q, 1);
  WICK_CHECK(seqs.dim(0) == q.dim(0) && positions.dim(0) == q.dim(0), ShapeError, kOp, "seqs ", ops::describe(seqs),
             " and positions ", ops::describe(positions), " must name one sequence and position per token of q ",
             ops::describe(q));
  if (o.scale)
    WICK_CHECK(std::isfinite(*o.scale) && *o.scale > 0, ShapeError, kOp, "scale must be finite and above 0, got ",
               *o.scale, " (q ", ops::describe(q), ")");
  WICK_CHECK(o.window >= 0, ShapeError, kOp, "window must be at least 0 (0: none), got ", o.window);
  WICK_CHECK(std::isfinite(o.softcap) && o.softcap >= 0, ShapeError, kOp,
             "softcap must be finite and at least 0 (0: none), got ", o.softcap);
}

// The values of a Q8_0 pool (blocks, block_size, h_kv, d) as `dtype`, quant::dequantize's.
Tensor dequantized(const Tensor& pool, int64_t d, DType dtype) {
  const int64_t rows = pool.dim(0) * pool.dim(1) * pool.dim(2);
  const DType wide = dtype == DType::F64 ? DType::F32 : dtype;  // exact: the values are f32's
  const Tensor v = quant::dequantize(quant::QTensor(quant::QType::Q8_0, rows, d, pool), wide);
  return v.to_dtype(dtype).reshape({pool.dim(0), pool.dim(1), pool.dim(2), d});
}

// The first position query i sees.
int64_t first_seen(int64_t position, int64_t window) {
  return window > 0 ? std::max<int64_t>(0, position - window + 1) : 0;
}

// Indices in host memory, checked as the kernels read them: every block a query reads.
void check_indices(const std::vector<int32_t>& table, int64_t s, int64_t max_blocks, const std::vector<int32_t>& seq,
                   const std::vector<int32_t>& pos, int64_t blocks, int64_t block_size, int64_t window) {
  for (size_t i = 0; i < seq.size(); ++i) {
    WICK_CHECK(seq[i] >= 0 && seq[i] < s, IndexError, kOp, "token ", i, ": sequence ", seq[i], " is outside the ", s,
               " rows of tables");
    WICK_CHECK(pos[i] >= 0 && pos[i] < max_blocks * block_size, IndexError, kOp, "token ", i, ": position ", pos[i],
               " is outside the ", max_blocks, " blocks of ", block_size, " positions a table row holds");
    for (int64_t j = first_seen(pos[i], window) / block_size; j <= pos[i] / block_size; ++j) {
      const int32_t b = table[static_cast<size_t>(seq[i] * max_blocks + j)];
      WICK_CHECK(b >= 0 && b < blocks, IndexError, kOp, "token ", i, ": block ", b, " (entry ", j, " of sequence ",
                 seq[i], "'s table) is outside the pool of ", blocks, " blocks");
    }
  }
}

// The composition: per sequence, its keys 0 .. the last position its queries see, gathered by slot
// into (1, h_kv, n, d), and the composed attention with a mask of what each query sees.
Tensor paged_composed(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const std::vector<int32_t>& table,
                      int64_t max_blocks, const std::vector<int32_t>& seq, const std::vector<int32_t>& pos,
                      const AttentionArgs& args) {
  const Device dev = q.device();
  const int64_t t = q.dim(0), d = q.dim(2);
  const int64_t blocks = k_pool.dim(0), block_size = k_pool.dim(1), h_kv = k_pool.dim(2);
  const Tensor k_rows = k_pool.reshape({blocks * block_size, h_kv, d});
  const Tensor v_rows = v_pool.reshape({blocks * block_size, h_kv, d});
  std::map<int32_t, std::vector<int64_t>> tokens_of;  // sequence -> its tokens, in order
  for (int64_t i = 0; i < t; ++i) tokens_of[seq[static_cast<size_t>(i)]].push_back(i);
  std::vector<Tensor> parts;
  std::vector<int64_t> order;  // the token of each row of the concatenated parts
  constexpr double kInf = std::numeric_limits<double>::infinity();
  for (const auto& [s, tokens] : tokens_of) {
    int64_t n = 0;
    for (int64_t i : tokens) n = std::max<int64_t>(n, pos[static_cast<size_t>(i)] + 1);
    std::vector<int64_t> slots(static_cast<size_t>(n));
    for (int64_t p = 0; p < n; ++p) {
      // Blocks no query reads may hold anything: slot 0 stands in, hidden by the mask.
      const int32_t b = table[static_cast<size_t>(s * max_blocks + p / block_size)];
      slots[static_cast<size_t>(p)] = b >= 0 && b < blocks ? b * block_size + p % block_size : 0;
    }
    const auto m = static_cast<int64_t>(tokens.size());
    std::vector<float> mask(static_cast<size_t>(m * n), static_cast<float>(-kInf));
    for (int64_t r = 0; r < m; ++r) {
      const int32_t p = pos[static_cast<size_t>(tokens[static_cast<size_t>(r)])];
      for (int64_t j = first_seen(p, args.window); j <= p; ++j) mask[static_cast<size_t>(r * n + j)] = 0;
    }
    const Tensor ids = Tensor::from_vector(slots, {n}, dev);
    const Tensor keys = k_rows.index_select(ids, 0).permute({1, 0, 2}).unsqueeze(0);
    const Tensor values = v_rows.index_select(ids, 0).permute({1, 0, 2}).unsqueeze(0);
    const Tensor rows = Tensor::from_vector(tokens, {m}, dev);
    const Tensor queries = q.index_select(rows, 0).permute({1, 0, 2}).unsqueeze(0);
    const Tensor bias = Tensor::from_vector(mask, {1, 1, m, n}, dev).to_dtype(q.dtype());
    const AttentionArgs plain{args.scale, false, 0, true, args.softcap};
    parts.push_back(detail::attention_composed(queries, keys, values, bias, plain).squeeze(0).permute({1, 0, 2}));
    order.insert(order.end(), tokens.begin(), tokens.end());
  }
  // Rows back in the tokens' order.
  std::vector<int64_t> row_of(static_cast<size_t>(t));
  for (size_t r = 0; r < order.size(); ++r) row_of[static_cast<size_t>(order[r])] = static_cast<int64_t>(r);
  return wick::cat(parts, 0).index_select(Tensor::from_vector(row_of, {t}, dev), 0).contiguous();
}

}  // namespace

Tensor paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const Tensor& tables,
                       const Tensor& seqs, const Tensor& positions, const PagedAttentionOptions& options) {
  check_arguments(q, k_pool, v_pool, tables, seqs, positions, options);
  const int64_t t = q.dim(0), h = q.dim(1), d = q.dim(2);
  const Shape out = {t, h, d};
  ops::check_output(kOp, out, q.dtype(), {&q, &k_pool, &v_pool});
  if (q.numel() == 0) return Tensor::zeros(out, q.dtype(), q.device());
  const int64_t blocks = k_pool.dim(0), block_size = k_pool.dim(1), s = tables.dim(0), max_blocks = tables.dim(1);
  WICK_CHECK(blocks > 0 && block_size > 0 && s > 0 && max_blocks > 0, IndexError, kOp, "tokens ", ops::describe(q),
             " read an empty pool ", ops::describe(k_pool), " or tables ", ops::describe(tables));
  const AttentionArgs args{options.scale.value_or(1 / std::sqrt(static_cast<double>(d))), true, options.window, true,
                           options.softcap};
  const Tensor table = tables.contiguous(), seq = seqs.contiguous(), pos = positions.contiguous();
  const NnKernels* kernels = d <= kPagedMaxHeadDim ? detail::fused(NnOp::PagedAttention, q) : nullptr;
  const bool host = q.device().is_cpu();
  std::vector<int32_t> table_h, seq_h, pos_h;
  if (host || kernels == nullptr) {
    table_h = table.to_device(Device::cpu()).to_vector<int32_t>();
    seq_h = seq.to_device(Device::cpu()).to_vector<int32_t>();
    pos_h = pos.to_device(Device::cpu()).to_vector<int32_t>();
    check_indices(table_h, s, max_blocks, seq_h, pos_h, blocks, block_size, options.window);
  }
  if (kernels != nullptr)
    return ops::wrap(
        kernels->paged_attention(ops::view_of(q), ops::view_of(k_pool.contiguous()), ops::view_of(v_pool.contiguous()),
                                 ops::view_of(table), ops::view_of(seq), ops::view_of(pos), args),
        out, q.dtype());
  if (is_q8_0_pool(k_pool))
    return paged_composed(q, dequantized(k_pool, d, q.dtype()), dequantized(v_pool, d, q.dtype()), table_h, max_blocks,
                          seq_h, pos_h, args);
  return paged_composed(q, k_pool, v_pool, table_h, max_blocks, seq_h, pos_h, args);
}

namespace {

// x (t, h_kv, d) rounded to Q8_0 rows: (t, h_kv, d / 32 * 34) u8, quant::quantize's bytes, by the
// backend's kernel where it has one.
Tensor q8_0_rows(const Tensor& x) {
  const int64_t n = x.dim(0) * x.dim(1), d = x.dim(2);
  const Shape out = {x.dim(0), x.dim(1), paged_q8_0_row_bytes(d)};
  const Tensor flat = (x.dtype() == DType::F64 ? x.to_dtype(DType::F32) : x).reshape({n, d}).contiguous();
  const NnKernels* kernels = ops::backend_of(flat).nn();
  if (StoragePtr bytes = kernels != nullptr ? kernels->quantize_q8_0(ops::view_of(flat)) : nullptr)
    return ops::wrap(std::move(bytes), out, DType::U8);
  return quant::quantize(flat.to_dtype(DType::F32), quant::QType::Q8_0).bytes().reshape(out);
}

// paged_write's operands checked for `op`; whether the pools are Q8_0's.
bool check_write(const char* op, const Tensor& k_pool, const Tensor& v_pool, const Tensor& k, const Tensor& v,
                 const Tensor& slots) {
  for (const Tensor* x : {static_cast<const Tensor*>(&k_pool), static_cast<const Tensor*>(&v_pool), &k, &v, &slots})
    ops::check_defined(op, *x);
  ops::check_same_device(op, {&k_pool, &v_pool, &k, &v, &slots});
  WICK_CHECK(k_pool.rank() == 4 && k_pool.shape() == v_pool.shape(), ShapeError, op,
             "needs pools (blocks, block_size, h_kv, d) of one shape, got k_pool ", ops::describe(k_pool), ", v_pool ",
             ops::describe(v_pool));
  const bool q8 = is_q8_0_pool(k_pool);
  const int64_t h_kv = k_pool.dim(2), row = k_pool.dim(3);
  const int64_t d = q8 && k.rank() == 3 ? k.dim(2) : row;
  WICK_CHECK(k.rank() == 3 && k.shape() == v.shape() && k.dim(1) == h_kv && k.dim(2) == d, ShapeError, op, "k ",
             ops::describe(k), " and v ", ops::describe(v), " must be (t, ", h_kv, ", ", q8 ? "d" : std::to_string(d),
             ") for pools ", ops::describe(k_pool));
  if (q8) check_q8_0_row(op, d, k_pool);
  WICK_CHECK(slots.dtype() == DType::I64 && slots.rank() == 1 && slots.dim(0) == k.dim(0), ShapeError, op, "slots ",
             ops::describe(slots), " must be i64 (", k.dim(0), "): one per row of k ", ops::describe(k));
  if (q8) {
    WICK_CHECK(v_pool.dtype() == DType::U8, DTypeError, op, "v_pool ", ops::describe(v_pool),
               " must be u8 as k_pool is (Q8_0 pools)");
    for (const Tensor* x : {&k, &v})
      WICK_CHECK(is_float(x->dtype()) && x->dtype() != DType::F8E4M3 && x->dtype() == k.dtype(), DTypeError, op,
                 ops::describe(*x), " must be f64, f32, f16 or bf16, the dtype of k, to be rounded to Q8_0");
  } else {
    for (const Tensor* x : {static_cast<const Tensor*>(&v_pool), &k, &v})
      WICK_CHECK(x->dtype() == k_pool.dtype(), DTypeError, op, ops::describe(*x), " must have the dtype of k_pool ",
                 ops::describe(k_pool));
  }
  WICK_CHECK(k.dim(0) == 0 || (k_pool.is_contiguous() && v_pool.is_contiguous()), ShapeError, op,
             "pools must be contiguous, got ", ops::describe(k_pool));
  return q8;
}

}  // namespace

void paged_write(Tensor& k_pool, Tensor& v_pool, const Tensor& k, const Tensor& v, const Tensor& slots) {
  const bool q8 = check_write("paged_write", k_pool, v_pool, k, v, slots);
  if (k.dim(0) == 0) return;
  // The pools as rows of (h_kv, row): a view of their storage, so that the scatter writes there.
  const int64_t rows = k_pool.dim(0) * k_pool.dim(1), h_kv = k_pool.dim(2), row = k_pool.dim(3);
  Tensor k_rows = k_pool.reshape({rows, h_kv, row}), v_rows = v_pool.reshape({rows, h_kv, row});
  const Tensor ids = slots.reshape({k.dim(0), 1, 1}).broadcast_as({k.dim(0), h_kv, row});
  k_rows.scatter_set(ids, q8 ? q8_0_rows(k) : k, 0);
  v_rows.scatter_set(ids, q8 ? q8_0_rows(v) : v, 0);
}

Tensor paged_rope_write(Tensor& k_pool, Tensor& v_pool, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& cos, const Tensor& sin, bool interleaved, const Tensor& slots) {
  constexpr const char* op = "paged_rope_write";
  const bool q8 = check_write(op, k_pool, v_pool, k, v, slots);
  ops::check_defined(op, q);
  ops::check_same_device(op, {&k, &q});
  WICK_CHECK(q.rank() == 3 && q.dim(0) == k.dim(0) && q.dim(2) == k.dim(2), ShapeError, op, "q ", ops::describe(q),
             " must be (t, h, d) with k's t and d, k ", ops::describe(k));
  WICK_CHECK(q.dtype() == k.dtype(), DTypeError, op, "q ", ops::describe(q), " must have the dtype of k ",
             ops::describe(k));
  // (1, heads, t, d) views, as rope() and the kernel take them.
  const Tensor q4 = q.transpose(0, 1).unsqueeze(0), k4 = k.transpose(0, 1).unsqueeze(0),
               v4 = v.transpose(0, 1).unsqueeze(0);
  detail::check_rope(op, NnOp::RopeWriteAt, q4, cos, sin, false, "q");
  detail::check_rope(op, NnOp::RopeWriteAt, k4, cos, sin, false, "k");
  auto back = [](const Tensor& x) { return x.squeeze(0).transpose(0, 1); };
  const NnKernels* kernels = q8 ? nullptr : detail::fused(NnOp::RopeWriteAt, k4);
  if (kernels == nullptr || q.numel() == 0 || k.numel() == 0) {
    const Tensor turned_q = interleaved ? rope_i(q4, cos, sin) : rope(q4, cos, sin);
    paged_write(k_pool, v_pool, back(interleaved ? rope_i(k4, cos, sin) : rope(k4, cos, sin)), v, slots);
    return back(turned_q);
  }
  // The pools as caches (1, h_kv, slots, d): views of their storage, where the kernel writes.
  const int64_t rows = k_pool.dim(0) * k_pool.dim(1), h_kv = k_pool.dim(2), d = k_pool.dim(3);
  const Tensor k_cache = k_pool.reshape({rows, h_kv, d}).permute({1, 0, 2}).unsqueeze(0);
  const Tensor v_cache = v_pool.reshape({rows, h_kv, d}).permute({1, 0, 2}).unsqueeze(0);
  // The kernel writes the pools while it reads q, k and v: none may lie in them.
  auto apart = [&](const Tensor& x) { return ops::unaliased(ops::unaliased(x, k_pool), v_pool); };
  StoragePtr turned = kernels->rope_write_at(
      ops::view_of(apart(q4)), ops::view_of(apart(k4)), ops::view_of(apart(v4)), ops::view_of(cos), ops::view_of(sin),
      interleaved ? RopePairs::Interleaved : RopePairs::Halves, ops::view_of(slots), ops::mut_view_of(k_cache),
      ops::mut_view_of(v_cache), true);
  return back(ops::wrap(std::move(turned), q4.shape(), q.dtype()));
}

}  // namespace wick::nn
