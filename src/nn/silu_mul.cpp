// silu(gate) * up: a SwiGLU layer's gated unit.
#include "nn/nn_ops.h"
#include "wick/nn.h"

namespace wick::nn {

Tensor silu_mul(const Tensor& gate, const Tensor& up) {
  constexpr const char* op = "silu_mul";
  detail::check_input(op, NnOp::SiluMul, gate);
  detail::check_same_operand(op, "up", gate, up);
  ops::check_output(op, gate.shape(), gate.dtype(), {&gate, &up});
  if (gate.numel() == 0) return Tensor::zeros(gate.shape(), gate.dtype(), gate.device());
  if (const NnKernels* k = detail::fused(NnOp::SiluMul, gate))
    return ops::wrap(k->silu_mul(ops::view_of(gate), ops::view_of(up)), gate.shape(), gate.dtype());
  const DType m = detail::math_dtype(gate.dtype());
  return gate.to_dtype(m).silu().mul(up.to_dtype(m)).to_dtype(gate.dtype());
}

}  // namespace wick::nn
