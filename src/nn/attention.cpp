// scaled_dot_product_attention: the checks, then the backend's fused kernel, or the composition of
// wick ops that is its oracle (it holds the (t_q, t_kv) scores in memory, the kernels do not).
#include <cmath>
#include <limits>
#include <optional>

#include "nn/nn_ops.h"
#include "wick/nn.h"

namespace wick::nn {

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

void check_arguments(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  detail::check_input(kOp, NnOp::Attention, q);
  ops::check_defined(kOp, k);
  ops::check_defined(kOp, v);
  ops::check_same_device(kOp, {&q, &k, &v});
  for (const Tensor* t : {&k, &v})
    WICK_CHECK(t->dtype() == q.dtype(), DTypeError, kOp, t == &k ? "k " : "v ", ops::describe(*t),
               " must have the dtype of q ", ops::describe(q));
  WICK_CHECK(q.rank() == 4 && k.rank() == 4 && v.rank() == 4, ShapeError, kOp,
             "needs q (b, h, t_q, d) and k, v (b, h_kv, t_kv, d) of rank 4, got q ", ops::describe(q), ", k ",
             ops::describe(k), ", v ", ops::describe(v));
  WICK_CHECK(k.shape() == v.shape(), ShapeError, kOp, "k ", ops::describe(k), " and v ", ops::describe(v),
             " must have one shape (b, h_kv, t_kv, d)");
  const int64_t h = q.dim(1), h_kv = k.dim(1);
  WICK_CHECK(q.dim(0) == k.dim(0) && q.dim(3) == k.dim(3), ShapeError, kOp, "q ", ops::describe(q), " and k ",
             ops::describe(k), " differ in the batch or head dim (b, d)");
  WICK_CHECK(h_kv > 0 ? h % h_kv == 0 : h == 0, ShapeError, kOp, "the query heads of q ", ops::describe(q),
             " must be a multiple of the key and value heads of k ", ops::describe(k));
  if (o.mask.defined()) {
    const Tensor& m = o.mask;
    ops::check_same_device(kOp, {&q, &m});
    WICK_CHECK(m.dtype() == q.dtype(), DTypeError, kOp, "mask ", ops::describe(m), " must have the dtype of q ",
               ops::describe(q));
    const Shape scores = {q.dim(0), h, q.dim(2), k.dim(2)};
    bool fits = m.rank() <= 4;
    try {
      fits = fits && broadcast_shapes(m.shape(), scores, kOp) == scores;
    } catch (const ShapeError&) {
      fits = false;
    }
    WICK_CHECK(fits, ShapeError, kOp, "mask ", ops::describe(m), " does not broadcast to the scores (b, h, t_q, t_kv) ",
               scores, " of q ", ops::describe(q), " and k ", ops::describe(k));
  }
  if (o.scale)
    WICK_CHECK(std::isfinite(*o.scale) && *o.scale > 0, ShapeError, kOp, "scale must be finite and above 0, got ",
               *o.scale, " (q ", ops::describe(q), ")");
  WICK_CHECK(o.window >= 0, ShapeError, kOp, "window must be at least 0 (0: none), got ", o.window, " (q ",
             ops::describe(q), ")");
  WICK_CHECK(std::isfinite(o.softcap) && o.softcap >= 0, ShapeError, kOp,
             "softcap must be finite and at least 0 (0: none), got ", o.softcap, " (q ", ops::describe(q), ")");
}

}  // namespace

namespace detail {

// softmax(q k^T * scale + mask) v in the math type. Grouped heads are matched by viewing q as
// (b, h_kv, h / h_kv, t_q, d) against k and v with a broadcast group dim: no kv head is copied.
Tensor attention_composed(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                          const AttentionArgs& a) {
  const DType m = math_dtype(q.dtype());
  const Device dev = q.device();
  const int64_t b = q.dim(0), h = q.dim(1), t_q = q.dim(2), d = q.dim(3), h_kv = k.dim(1), t_kv = k.dim(2);
  const Shape grouped = {b, h_kv, h / h_kv, t_q, t_kv};
  const Tensor qm = q.to_dtype(m).reshape({b, h_kv, h / h_kv, t_q, d});
  Tensor scores = qm.matmul(k.to_dtype(m).unsqueeze(2).transpose(-2, -1)).reshape({b, h, t_q, t_kv}).mul(a.scale);
  if (a.softcap > 0) scores = scores.mul(1 / a.softcap).tanh().mul(a.softcap);
  if (mask.defined()) scores = scores.add(mask.to_dtype(m));
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (a.causal || a.window > 0) {
    // Query i sits at position t_kv - t_q + i; window < t_kv here, so nothing below wraps.
    const Tensor pos = Tensor::arange(t_kv - t_q, t_kv, 1, DType::I64, dev).reshape({t_q, 1});
    const Tensor keys = Tensor::arange(t_kv, DType::I64, dev);
    Tensor seen;
    if (a.causal) seen = keys.le(pos);
    if (a.window > 0) {
      const Tensor recent = keys.gt(pos.sub(a.window));
      seen = seen.defined() ? seen.mul(recent) : recent;
    }
    scores = seen.where_cond(scores, Tensor::scalar(-kInf, m, dev));
  }
  // A row whose maximum is -inf sees no key: its shift is 0, so that its weights are exp(-inf) = 0
  // rather than NaN, and its output is set to zeros.
  const Tensor max = scores.max(-1, true);
  const Tensor empty = max.eq(-kInf);
  const Tensor zero = Tensor::scalar(0, m, dev);
  const Tensor weights = scores.sub(empty.where_cond(zero, max)).exp();
  const Tensor p = weights.div(weights.sum(-1, true));
  const Tensor out = p.reshape(grouped).matmul(v.to_dtype(m).unsqueeze(2)).reshape({b, h, t_q, d});
  return empty.where_cond(zero, out).to_dtype(q.dtype());
}

AttentionCall attention_call(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options) {
  check_arguments(q, k, v, options);
  const int64_t b = q.dim(0), h = q.dim(1), t_q = q.dim(2), d = q.dim(3), t_kv = k.dim(2);
  AttentionCall call;
  call.out = {b, h, t_q, d};
  ops::check_output(kOp, call.out, q.dtype(), {&q, &k, &v});
  // A window as long as the keys hides none of them (and bounds the positions' arithmetic).
  call.args = {options.scale.value_or(1 / std::sqrt(static_cast<double>(d))), options.causal,
               options.window < t_kv ? options.window : 0, options.library, options.softcap};
  // The mask broadcast to the scores, stride 0 where it broadcasts.
  if (options.mask.defined()) call.mask = options.mask.broadcast_as({b, h, t_q, t_kv});
  return call;
}

}  // namespace detail

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options) {
  const detail::AttentionCall call = detail::attention_call(q, k, v, options);
  // Nothing to compute, or no key to see: every row is empty.
  if (q.numel() == 0 || k.dim(2) == 0) return Tensor::zeros(call.out, q.dtype(), q.device());
  if (const NnKernels* kernels = detail::fused(NnOp::Attention, q)) {
    std::optional<View> mask;
    if (call.mask.defined()) mask.emplace(ops::view_of(call.mask));
    return ops::wrap(
        kernels->attention(ops::view_of(q), ops::view_of(k), ops::view_of(v), mask ? &*mask : nullptr, call.args),
        call.out, q.dtype());
  }
  return detail::attention_composed(q, k, v, options.mask, call.args);
}

}  // namespace wick::nn
