// Front-end helpers of the nn wing (src/nn): the checks every op makes, and the choice between a
// backend's fused kernel and the composition of wick ops.
#pragma once

#include "backend/nn_kernels.h"
#include "core/checks.h"

namespace wick::nn::detail {

// x defined, of a dtype the op is defined for (DTypeError naming the op otherwise).
void check_input(const char* op, NnOp nop, const Tensor& x);
// A per-feature parameter (weight, bias) of x's last dim: defined, x's device and dtype, shape (d).
void check_feature_param(const char* op, const char* what, const Tensor& x, const Tensor& param);
// The kernels of x's backend when they implement `nop` for x's dtype; null: compose.
const NnKernels* fused(NnOp nop, const Tensor& x);
// The math type the composition runs in: f32 for halves, the dtype itself otherwise.
DType math_dtype(DType dtype);

}  // namespace wick::nn::detail
