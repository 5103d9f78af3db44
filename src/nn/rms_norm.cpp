// rms_norm over the last dim, and the residual add fused before it.
#include <cmath>
#include <utility>

#include "nn/nn_ops.h"
#include "wick/nn.h"

namespace wick::nn {

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  constexpr const char* op = "rms_norm";
  detail::check_input(op, NnOp::RmsNorm, x);
  if (weight.defined() && weight.rank() == 2) {
    // A weight per row of x's last two dims.
    ops::check_same_device(op, {&x, &weight});
    WICK_CHECK(weight.dtype() == x.dtype(), DTypeError, op, "weight ", ops::describe(weight),
               " must have the dtype of x ", ops::describe(x));
    WICK_CHECK(x.rank() >= 2 && weight.dim(0) == x.dim(-2) && weight.dim(1) == x.dim(-1), ShapeError, op, "weight ",
               ops::describe(weight), " must have shape [d] or x's last two dims [m, d] for x ", ops::describe(x));
  } else {
    detail::check_feature_param(op, "weight", x, weight);
  }
  WICK_CHECK(std::isfinite(eps) && eps >= 0, ShapeError, op, "eps must be finite and at least 0, got ", eps, " (",
             ops::describe(x), ")");
  ops::check_output(op, x.shape(), x.dtype(), {&x, &weight});
  if (x.numel() == 0) return Tensor::zeros(x.shape(), x.dtype(), x.device());
  if (const NnKernels* k = detail::fused(NnOp::RmsNorm, x))
    return ops::wrap(k->rms_norm(ops::view_of(x), ops::view_of(weight), eps), x.shape(), x.dtype());
  const DType m = detail::math_dtype(x.dtype());
  const Tensor xm = x.to_dtype(m);
  const Tensor rms = xm.sqr().mean(-1, true).add(eps).sqrt();
  return xm.div(rms).mul(weight.to_dtype(m)).to_dtype(x.dtype());
}

AddRmsNorm add_rms_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, double eps) {
  constexpr const char* op = "add_rms_norm";
  detail::check_input(op, NnOp::AddRmsNorm, x);
  detail::check_same_operand(op, "residual", x, residual);
  detail::check_feature_param(op, "weight", x, weight);
  WICK_CHECK(std::isfinite(eps) && eps >= 0, ShapeError, op, "eps must be finite and at least 0, got ", eps, " (",
             ops::describe(x), ")");
  ops::check_output(op, x.shape(), x.dtype(), {&x, &residual, &weight});
  if (x.numel() == 0)
    return {Tensor::zeros(x.shape(), x.dtype(), x.device()), Tensor::zeros(x.shape(), x.dtype(), x.device())};
  if (const NnKernels* k = detail::fused(NnOp::AddRmsNorm, x)) {
    auto [sum, normed] = k->add_rms_norm(ops::view_of(x), ops::view_of(residual), ops::view_of(weight), eps);
    return {ops::wrap(std::move(sum), x.shape(), x.dtype()), ops::wrap(std::move(normed), x.shape(), x.dtype())};
  }
  Tensor sum = x.add(residual);
  Tensor normed = rms_norm(sum, weight, eps);
  return {std::move(sum), std::move(normed)};
}

}  // namespace wick::nn
