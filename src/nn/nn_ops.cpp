#include "nn/nn_ops.h"

namespace wick::nn::detail {

void check_input(const char* op, NnOp nop, const Tensor& x) {
  ops::check_defined(op, x);
  const DType dt = x.dtype();
  WICK_CHECK(op_defined(nop, {&dt, 1}), DTypeError, op, "needs a float tensor of f64, f32, f16 or bf16, got ",
             ops::describe(x));
}

void check_feature_param(const char* op, const char* what, const Tensor& x, const Tensor& param) {
  ops::check_defined(op, param);
  ops::check_same_device(op, {&x, &param});
  WICK_CHECK(param.dtype() == x.dtype(), DTypeError, op, what, " ", ops::describe(param), " must have the dtype of x ",
             ops::describe(x));
  WICK_CHECK(x.rank() >= 1 && param.rank() == 1 && param.dim(0) == x.dim(-1), ShapeError, op, what, " ",
             ops::describe(param), " must have shape [d] for x ", ops::describe(x), " of last dim d");
}

void check_same_operand(const char* op, const char* what, const Tensor& x, const Tensor& other) {
  ops::check_defined(op, other);
  ops::check_same_device(op, {&x, &other});
  WICK_CHECK(other.dtype() == x.dtype(), DTypeError, op, what, " ", ops::describe(other), " must have the dtype of x ",
             ops::describe(x));
  WICK_CHECK(other.shape() == x.shape(), ShapeError, op, what, " ", ops::describe(other), " must have the shape of x ",
             ops::describe(x));
}

const NnKernels* fused(NnOp nop, const Tensor& x) {
  Backend& b = ops::backend_of(x);
  const DType dt = x.dtype();
  return b.supports(nop, {&dt, 1}) ? b.nn() : nullptr;
}

DType math_dtype(DType dtype) { return dtype == DType::F16 || dtype == DType::BF16 ? DType::F32 : dtype; }

}  // namespace wick::nn::detail
