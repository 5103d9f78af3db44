// layer_norm over the last dim, with or without bias.
#include <cmath>

#include "nn/nn_ops.h"
#include "wick/nn.h"

namespace wick::nn {

namespace {

Tensor layer_norm_op(const Tensor& x, const Tensor& weight, const Tensor* bias, double eps) {
  constexpr const char* op = "layer_norm";
  detail::check_input(op, NnOp::LayerNorm, x);
  detail::check_feature_param(op, "weight", x, weight);
  if (bias) detail::check_feature_param(op, "bias", x, *bias);
  WICK_CHECK(std::isfinite(eps) && eps >= 0, ShapeError, op, "eps must be finite and at least 0, got ", eps, " (",
             ops::describe(x), ")");
  ops::check_output(op, x.shape(), x.dtype(), {&x, &weight});
  if (x.numel() == 0) return Tensor::zeros(x.shape(), x.dtype(), x.device());
  if (const NnKernels* k = detail::fused(NnOp::LayerNorm, x)) {
    if (bias) {
      const View b = ops::view_of(*bias);
      return ops::wrap(k->layer_norm(ops::view_of(x), ops::view_of(weight), &b, eps), x.shape(), x.dtype());
    }
    return ops::wrap(k->layer_norm(ops::view_of(x), ops::view_of(weight), nullptr, eps), x.shape(), x.dtype());
  }
  // Two passes (mean, then the mean of squared deviations): no cancellation at large magnitudes.
  const DType m = detail::math_dtype(x.dtype());
  const Tensor xm = x.to_dtype(m);
  const Tensor centred = xm.sub(xm.mean(-1, true));
  const Tensor std = centred.sqr().mean(-1, true).add(eps).sqrt();
  Tensor out = centred.div(std).mul(weight.to_dtype(m));
  if (bias) out = out.add(bias->to_dtype(m));
  return out.to_dtype(x.dtype());
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  return layer_norm_op(x, weight, &bias, eps);
}
Tensor layer_norm(const Tensor& x, const Tensor& weight, double eps) { return layer_norm_op(x, weight, nullptr, eps); }

}  // namespace wick::nn
