// Front-end helpers of the nn wing (src/nn): the checks every op makes, and the choice between a
// backend's fused kernel and the composition of wick ops.
#pragma once

#include "backend/nn_kernels.h"
#include "core/checks.h"
#include "wick/nn.h"

namespace wick::nn::detail {

// x defined, of a dtype the op is defined for (DTypeError naming the op otherwise).
void check_input(const char* op, NnOp nop, const Tensor& x);
// A per-feature parameter (weight, bias) of x's last dim: defined, x's device and dtype, shape (d).
void check_feature_param(const char* op, const char* what, const Tensor& x, const Tensor& param);
// A second operand of an elementwise nn op (add_rms_norm's residual, silu_mul's up), named `what`:
// defined, of x's device, dtype and shape.
void check_same_operand(const char* op, const char* what, const Tensor& x, const Tensor& other);
// rope's x (b, h, t, d), or (b, t, h, d) when thd, and its tables cos and sin (t, d/2) of x's
// dtype and device, d even; errors call x `name`.
void check_rope(const char* op, NnOp nop, const Tensor& x, const Tensor& cos, const Tensor& sin, bool thd,
                const char* name = "x");
// The kernels of x's backend when they implement `nop` for x's dtype; null: compose.
const NnKernels* fused(NnOp nop, const Tensor& x);
// The math type the composition runs in: f32 for halves, the dtype itself otherwise.
DType math_dtype(DType dtype);

// Attention composed from wick ops (matmul, reductions, elementwise) in the math type, as the front
// end runs it where the backend has no fused kernel: the oracle of the fused kernels. Arguments as
// NnKernels::attention takes them, after the front end's checks (mask undefined: none).
Tensor attention_composed(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                          const AttentionArgs& args);

// scaled_dot_product_attention's checks of q, k, v and the options, and what a kernel then takes:
// the output's shape, the arguments, and the mask broadcast to the scores (b, h, t_q, t_kv).
struct AttentionCall {
  Shape out;
  AttentionArgs args{};
  Tensor mask;  // undefined: none
};
AttentionCall attention_call(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options);

}  // namespace wick::nn::detail
