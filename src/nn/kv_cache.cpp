// KvCache: keys and values of a layer, allocated once; appends write into the cache in place.
#include <limits>
#include <optional>

#include "nn/nn_ops.h"
#include "wick/nn.h"

namespace wick::nn {

namespace {

std::string describe_cache(const Tensor& k, int64_t size) {
  return wick::detail::str_cat("KvCache ", k.shape(), " ", k.dtype(), " on ", k.device(), " holding ", size,
                               " positions");
}

}  // namespace

KvCache::KvCache(int64_t batch, int64_t kv_heads, int64_t capacity, int64_t head_dim, DType dtype, Device device) {
  constexpr const char* op = "KvCache";
  WICK_CHECK(batch >= 0 && kv_heads >= 0 && capacity >= 0 && head_dim >= 0, ShapeError, op,
             "sizes must be at least 0, got batch ", batch, ", kv_heads ", kv_heads, ", capacity ", capacity,
             ", head_dim ", head_dim);
  WICK_CHECK(op_defined(NnOp::Attention, {&dtype, 1}), DTypeError, op,
             "holds the keys and values of attention: f64, f32, f16 or bf16, got ", dtype);
  const Shape shape = {batch, kv_heads, capacity, head_dim};
  k_ = Tensor::zeros(shape, dtype, device);
  v_ = Tensor::zeros(shape, dtype, device);
  capacity_ = capacity;
}

void KvCache::check_new(const char* op, const Tensor& k, const Tensor& v) const {
  ops::check_defined(op, k);
  ops::check_defined(op, v);
  ops::check_same_device(op, {&k_, &k, &v});
  for (const Tensor* t : {&k, &v}) {
    WICK_CHECK(t->dtype() == k_.dtype(), DTypeError, op, t == &k ? "k " : "v ", ops::describe(*t),
               " must have the dtype of the ", describe_cache(k_, size_));
    WICK_CHECK(t->rank() == 4 && t->dim(0) == k_.dim(0) && t->dim(1) == k_.dim(1) && t->dim(3) == k_.dim(3), ShapeError,
               op, t == &k ? "k " : "v ", ops::describe(*t), " must have shape (b, h_kv, t_new, d) = (", k_.dim(0),
               ", ", k_.dim(1), ", t_new, ", k_.dim(3), ") for the ", describe_cache(k_, size_));
  }
  WICK_CHECK(k.dim(2) == v.dim(2), ShapeError, op, "k ", ops::describe(k), " and v ", ops::describe(v),
             " must hold as many positions");
}

std::pair<Tensor, Tensor> KvCache::append(const Tensor& k, const Tensor& v) {
  constexpr const char* op = "KvCache::append";
  check_new(op, k, v);
  const int64_t t_new = k.dim(2);
  WICK_CHECK(t_new <= capacity_ - size_, ShapeError, op, "cannot add ", t_new, " positions to the ",
             describe_cache(k_, size_), " of capacity ", capacity_);
  // In place: a strided copy into the positions size_ .. size_ + t_new - 1 of the cache.
  k_.slice_set(k, 2, size_);
  v_.slice_set(v, 2, size_);
  size_ += t_new;
  return {keys(), values()};
}

Tensor KvCache::keys() const { return k_.narrow(2, 0, size_); }
Tensor KvCache::values() const { return v_.narrow(2, 0, size_); }

void KvCache::check_at(const char* op, const Tensor& k, const Tensor& at, int64_t length) const {
  ops::check_defined(op, at);
  ops::check_same_device(op, {&k_, &at});
  const int64_t t_new = k.dim(2);
  WICK_CHECK(at.dtype() == DType::I64 && at.numel() == t_new, ShapeError, op, "positions ", ops::describe(at),
             " must be ", t_new, " i64 values, one per new position of k ", ops::describe(k));
  WICK_CHECK(length >= 0 && length <= capacity_, ShapeError, op, "length ", length, " is outside [0, ", capacity_,
             "] for the ", describe_cache(k_, size_));
  // Positions on the host are checked here, so that the error names this op (on a GPU the fused
  // kernel names it; the composed path's scatter names itself).
  if (at.device().is_cpu() && t_new > 0) {
    constexpr int64_t kSkip = std::numeric_limits<int64_t>::max();
    for (const int64_t p : at.reshape({t_new}).to_vector<int64_t>())
      WICK_CHECK(p == kSkip || (p >= 0 && p < capacity_), IndexError, op, "position ", p,
                 " is outside the cache's capacity of ", capacity_, " (", describe_cache(k_, size_), ")");
  }
}

std::pair<Tensor, Tensor> KvCache::write_at(const Tensor& k, const Tensor& v, const Tensor& at, int64_t length) {
  constexpr const char* op = "KvCache::write_at";
  check_new(op, k, v);
  check_at(op, k, at, length);
  return scatter_rows(k, v, at, length, false);
}

std::pair<Tensor, Tensor> KvCache::scatter_rows(const Tensor& k, const Tensor& v, const Tensor& at, int64_t length,
                                                bool rope) {
  // Positions on a device: the backend checks them there, so that the error (at the next wait)
  // names this op rather than the scatter below.
  if (!at.device().is_cpu() && k.dim(2) > 0)
    if (const NnKernels* kernels = detail::fused(NnOp::RopeWriteAt, k_))
      kernels->check_positions(ops::view_of(at.reshape({k.dim(2)})), capacity_, rope);
  // Each element of k and v goes to the position its column names along dim 2.
  const Tensor ids = at.reshape({1, 1, k.dim(2), 1}).broadcast_as(k.shape());
  k_.scatter_set(ids, k, 2);
  v_.scatter_set(ids, v, 2);
  return {k_.narrow(2, 0, length), v_.narrow(2, 0, length)};
}

void KvCache::check_rope_write(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cos,
                               const Tensor& sin, const Tensor& at, int64_t length) const {
  check_new(op, k, v);
  check_at(op, k, at, length);
  ops::check_defined(op, q);
  ops::check_same_device(op, {&k_, &q});
  WICK_CHECK(q.dtype() == k_.dtype(), DTypeError, op, "q ", ops::describe(q), " must have the dtype of the ",
             describe_cache(k_, size_));
  WICK_CHECK(q.rank() == 4 && q.dim(0) == k.dim(0) && q.dim(2) == k.dim(2) && q.dim(3) == k.dim(3), ShapeError, op,
             "q ", ops::describe(q), " must have shape (b, h, t_new, d) with k's b, t_new and d, k ", ops::describe(k));
  detail::check_rope(op, NnOp::RopeWriteAt, q, cos, sin, false, "q");
}

KvCache::Rotated KvCache::rope_write_at(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cos,
                                        const Tensor& sin, bool interleaved, const Tensor& at, int64_t length) {
  check_rope_write("KvCache::rope_write_at", q, k, v, cos, sin, at, length);
  // The kernel takes one position a step (a decoding step's): positions that may repeat are the
  // scatter's, whose last one wins.
  const NnKernels* kernels = detail::fused(NnOp::RopeWriteAt, k);
  if (kernels == nullptr || k.dim(2) != 1 || q.numel() == 0 || k.numel() == 0) {
    const Tensor turned_k = interleaved ? rope_i(k, cos, sin) : rope(k, cos, sin);
    Tensor turned_q = interleaved ? rope_i(q, cos, sin) : rope(q, cos, sin);
    auto [keys, values] = scatter_rows(turned_k, v, at, length, true);
    return {std::move(turned_q), std::move(keys), std::move(values)};
  }
  // The kernel writes the cache while it reads q, k and v: none may lie in it.
  const Tensor q_in = ops::unaliased(ops::unaliased(q, k_), v_), k_in = ops::unaliased(ops::unaliased(k, k_), v_),
               v_in = ops::unaliased(ops::unaliased(v, k_), v_);
  StoragePtr turned =
      kernels->rope_write_at(ops::view_of(q_in), ops::view_of(k_in), ops::view_of(v_in), ops::view_of(cos),
                             ops::view_of(sin), interleaved ? RopePairs::Interleaved : RopePairs::Halves,
                             ops::view_of(at.reshape({k.dim(2)})), ops::mut_view_of(k_), ops::mut_view_of(v_), false);
  return {ops::wrap(std::move(turned), q.shape(), q.dtype()), k_.narrow(2, 0, length), v_.narrow(2, 0, length)};
}

Tensor KvCache::rope_write_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cos,
                                     const Tensor& sin, bool interleaved, const Tensor& at, int64_t length,
                                     const AttentionOptions& options) {
  check_rope_write("KvCache::rope_write_attention", q, k, v, cos, sin, at, length);
  // The attention's checks, on q as it will be turned (its shape and dtype), before any write.
  const Tensor keys = k_.narrow(2, 0, length), values = v_.narrow(2, 0, length);
  const detail::AttentionCall call = detail::attention_call(q, keys, values, options);
  const NnKernels* kernels = detail::fused(NnOp::RopeWriteAt, k);
  if (kernels != nullptr && detail::fused(NnOp::Attention, q) != nullptr && k.dim(2) == 1 && length > 0 &&
      q.numel() > 0 && k.numel() > 0) {
    // The kernel writes the cache while it reads q, k and v: none may lie in it.
    const Tensor q_in = ops::unaliased(ops::unaliased(q, k_), v_), k_in = ops::unaliased(ops::unaliased(k, k_), v_),
                 v_in = ops::unaliased(ops::unaliased(v, k_), v_);
    std::optional<View> mask;
    if (call.mask.defined()) mask.emplace(ops::view_of(call.mask));
    StoragePtr out = kernels->rope_write_attention(
        ops::view_of(q_in), ops::view_of(k_in), ops::view_of(v_in), ops::view_of(cos), ops::view_of(sin),
        interleaved ? RopePairs::Interleaved : RopePairs::Halves, ops::view_of(at.reshape({1})), ops::mut_view_of(k_),
        ops::mut_view_of(v_), length, mask ? &*mask : nullptr, call.args);
    if (out) return ops::wrap(std::move(out), call.out, q.dtype());
  }
  const Rotated r = rope_write_at(q, k, v, cos, sin, interleaved, at, length);
  return scaled_dot_product_attention(r.q, r.keys, r.values, options);
}

void KvCache::set_size(int64_t size) {
  WICK_CHECK(size >= 0 && size <= capacity_, ShapeError, "KvCache::set_size", "size must be in [0, ", capacity_,
             "], got ", size, " (", describe_cache(k_, size_), ")");
  size_ = size;
}

void KvCache::truncate(int64_t size) {
  WICK_CHECK(size >= 0 && size <= size_, ShapeError, "KvCache::truncate", "size must be in [0, ", size_, "], got ",
             size, " (", describe_cache(k_, size_), ")");
  size_ = size;
}

}  // namespace wick::nn
