// softmax and log_softmax along any dim.
#include "nn/nn_ops.h"
#include "wick/nn.h"

namespace wick::nn {

namespace {

Tensor softmax_op(const char* op, NnOp nop, const Tensor& x, int64_t dim) {
  detail::check_input(op, nop, x);
  const int d = ops::dim_of(op, x, dim);
  ops::check_output(op, x.shape(), x.dtype(), {&x});
  if (x.numel() == 0) return Tensor::zeros(x.shape(), x.dtype(), x.device());
  const bool log = nop == NnOp::LogSoftmax;
  if (const NnKernels* k = detail::fused(nop, x)) return ops::wrap(k->softmax(ops::view_of(x), d, log), x.shape(), x.dtype());
  // The composition (the oracle of the fused kernels), in the math type.
  const Tensor xm = x.to_dtype(detail::math_dtype(x.dtype()));
  const Tensor shifted = xm.sub(xm.max(d, true));
  const Tensor sum = shifted.exp().sum(d, true);
  const Tensor out = log ? shifted.sub(sum.log()) : shifted.exp().div(sum);
  return out.to_dtype(x.dtype());
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_op("softmax", NnOp::Softmax, x, dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_op("log_softmax", NnOp::LogSoftmax, x, dim); }

}  // namespace wick::nn
