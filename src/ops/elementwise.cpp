// Front end of the elementwise ops: unary, binary (numpy broadcasting), comparisons, where,
// affine, powf, elu, clamp and the operators.
#include <string>

#include "backend/op.h"
#include "core/checks.h"
#include "wick/ops.h"

namespace wick {

using ops::backend_of;
using ops::view_of;
using ops::wrap;

namespace {

Tensor unary_op(UnaryOp op, const Tensor& x) {
  const std::string name(op_name(op));
  ops::check_defined(name.c_str(), x);
  ops::check_supported(name.c_str(), x, op, {x.dtype()});
  ops::check_output(name.c_str(), x.shape(), x.dtype(), {&x});
  return wrap(backend_of(x).unary(op, view_of(x)), x.shape(), x.dtype());
}

// Broadcasts a and b to one shape and calls f(shape, a_layout, b_layout) -> storage.
template <typename F>
Tensor broadcast_pair(const char* name, const Tensor& a, const Tensor& b, OpKey key, DType out_dtype, F&& f) {
  ops::check_same_device(name, {&a, &b});
  ops::check_same_dtype(name, a, b);
  ops::check_supported(name, a, key, {a.dtype()});
  Shape shape = ops::broadcast_shape(name, a, b);
  ops::check_output(name, shape, out_dtype, {&a, &b});
  Layout la = a.layout().broadcast_as(shape), lb = b.layout().broadcast_as(shape);
  return wrap(f(view_of(a, la), view_of(b, lb)), shape, out_dtype);
}

Tensor binary_op(BinaryOp op, const Tensor& a, const Tensor& b) {
  const std::string name(op_name(op));
  return broadcast_pair(name.c_str(), a, b, op, a.dtype(),
                        [&](const View& va, const View& vb) { return backend_of(a).binary(op, va, vb); });
}

Tensor cmp_op(CmpOp op, const Tensor& a, const Tensor& b) {
  const std::string name(op_name(op));
  return broadcast_pair(name.c_str(), a, b, op, DType::U8,
                        [&](const View& va, const View& vb) { return backend_of(a).cmp(op, va, vb); });
}

// The scalar as a rank-0 tensor of x's dtype and device, checked to fit the dtype.
Tensor scalar_like(std::string_view name, const Tensor& x, Scalar v) {
  const std::string n(name);
  ops::check_defined(n.c_str(), x);
  ops::check_scalar_fits(n.c_str(), v, x.dtype(), ops::describe(x));
  return Tensor::scalar(v, x.dtype(), x.device());
}

Tensor binary_scalar(BinaryOp op, const Tensor& x, Scalar v) {
  return binary_op(op, x, scalar_like(op_name(op), x, v));
}
Tensor scalar_binary(BinaryOp op, Scalar v, const Tensor& x) {
  return binary_op(op, scalar_like(op_name(op), x, v), x);
}
Tensor cmp_scalar(CmpOp op, const Tensor& x, Scalar v) { return cmp_op(op, x, scalar_like(op_name(op), x, v)); }

}  // namespace

Tensor Tensor::add(const Tensor& rhs) const { return binary_op(BinaryOp::Add, *this, rhs); }
Tensor Tensor::sub(const Tensor& rhs) const { return binary_op(BinaryOp::Sub, *this, rhs); }
Tensor Tensor::mul(const Tensor& rhs) const { return binary_op(BinaryOp::Mul, *this, rhs); }
Tensor Tensor::div(const Tensor& rhs) const { return binary_op(BinaryOp::Div, *this, rhs); }
Tensor Tensor::maximum(const Tensor& rhs) const { return binary_op(BinaryOp::Maximum, *this, rhs); }
Tensor Tensor::minimum(const Tensor& rhs) const { return binary_op(BinaryOp::Minimum, *this, rhs); }
Tensor Tensor::add(Scalar rhs) const { return binary_scalar(BinaryOp::Add, *this, rhs); }
Tensor Tensor::sub(Scalar rhs) const { return binary_scalar(BinaryOp::Sub, *this, rhs); }
Tensor Tensor::mul(Scalar rhs) const { return binary_scalar(BinaryOp::Mul, *this, rhs); }
Tensor Tensor::div(Scalar rhs) const { return binary_scalar(BinaryOp::Div, *this, rhs); }
Tensor Tensor::maximum(Scalar rhs) const { return binary_scalar(BinaryOp::Maximum, *this, rhs); }
Tensor Tensor::minimum(Scalar rhs) const { return binary_scalar(BinaryOp::Minimum, *this, rhs); }

Tensor Tensor::exp() const { return unary_op(UnaryOp::Exp, *this); }
Tensor Tensor::log() const { return unary_op(UnaryOp::Log, *this); }
Tensor Tensor::sin() const { return unary_op(UnaryOp::Sin, *this); }
Tensor Tensor::cos() const { return unary_op(UnaryOp::Cos, *this); }
Tensor Tensor::tanh() const { return unary_op(UnaryOp::Tanh, *this); }
Tensor Tensor::abs() const { return unary_op(UnaryOp::Abs, *this); }
Tensor Tensor::neg() const { return unary_op(UnaryOp::Neg, *this); }
Tensor Tensor::recip() const { return unary_op(UnaryOp::Recip, *this); }
Tensor Tensor::sqr() const { return unary_op(UnaryOp::Sqr, *this); }
Tensor Tensor::sqrt() const { return unary_op(UnaryOp::Sqrt, *this); }
Tensor Tensor::gelu() const { return unary_op(UnaryOp::Gelu, *this); }
Tensor Tensor::gelu_erf() const { return unary_op(UnaryOp::GeluErf, *this); }
Tensor Tensor::erf() const { return unary_op(UnaryOp::Erf, *this); }
Tensor Tensor::relu() const { return unary_op(UnaryOp::Relu, *this); }
Tensor Tensor::silu() const { return unary_op(UnaryOp::Silu, *this); }
Tensor Tensor::sigmoid() const { return unary_op(UnaryOp::Sigmoid, *this); }
Tensor Tensor::floor() const { return unary_op(UnaryOp::Floor, *this); }
Tensor Tensor::ceil() const { return unary_op(UnaryOp::Ceil, *this); }
Tensor Tensor::round() const { return unary_op(UnaryOp::Round, *this); }
Tensor Tensor::sign() const { return unary_op(UnaryOp::Sign, *this); }

Tensor Tensor::affine(double mul, double add) const {
  ops::check_defined("affine", *this);
  ops::check_supported("affine", *this, OpCode::Affine, {dtype_});
  ops::check_output("affine", shape(), dtype_, {this});
  return wrap(backend_of(*this).affine(view_of(*this), mul, add), shape(), dtype_);
}

Tensor Tensor::powf(double exponent) const {
  ops::check_defined("powf", *this);
  ops::check_supported("powf", *this, OpCode::Powf, {dtype_});
  ops::check_output("powf", shape(), dtype_, {this});
  return wrap(backend_of(*this).powf(view_of(*this), exponent), shape(), dtype_);
}

Tensor Tensor::elu(double alpha) const {
  ops::check_defined("elu", *this);
  ops::check_supported("elu", *this, OpCode::Elu, {dtype_});
  ops::check_output("elu", shape(), dtype_, {this});
  return wrap(backend_of(*this).elu(view_of(*this), alpha), shape(), dtype_);
}

Tensor Tensor::clamp(Scalar lo, Scalar hi) const { return maximum(lo).minimum(hi); }

Tensor Tensor::eq(const Tensor& rhs) const { return cmp_op(CmpOp::Eq, *this, rhs); }
Tensor Tensor::ne(const Tensor& rhs) const { return cmp_op(CmpOp::Ne, *this, rhs); }
Tensor Tensor::lt(const Tensor& rhs) const { return cmp_op(CmpOp::Lt, *this, rhs); }
Tensor Tensor::le(const Tensor& rhs) const { return cmp_op(CmpOp::Le, *this, rhs); }
Tensor Tensor::gt(const Tensor& rhs) const { return cmp_op(CmpOp::Gt, *this, rhs); }
Tensor Tensor::ge(const Tensor& rhs) const { return cmp_op(CmpOp::Ge, *this, rhs); }
Tensor Tensor::eq(Scalar rhs) const { return cmp_scalar(CmpOp::Eq, *this, rhs); }
Tensor Tensor::ne(Scalar rhs) const { return cmp_scalar(CmpOp::Ne, *this, rhs); }
Tensor Tensor::lt(Scalar rhs) const { return cmp_scalar(CmpOp::Lt, *this, rhs); }
Tensor Tensor::le(Scalar rhs) const { return cmp_scalar(CmpOp::Le, *this, rhs); }
Tensor Tensor::gt(Scalar rhs) const { return cmp_scalar(CmpOp::Gt, *this, rhs); }
Tensor Tensor::ge(Scalar rhs) const { return cmp_scalar(CmpOp::Ge, *this, rhs); }

Tensor Tensor::where_cond(const Tensor& on_true, const Tensor& on_false) const {
  return wick::where_cond(*this, on_true, on_false);
}

Tensor where_cond(const Tensor& cond, const Tensor& on_true, const Tensor& on_false) {
  const char* name = "where_cond";
  ops::check_same_device(name, {&cond, &on_true, &on_false});
  ops::check_same_dtype(name, on_true, on_false);
  WICK_CHECK(is_index_dtype(cond.dtype()), DTypeError, name, "the condition must have an integer dtype, got ",
             ops::describe(cond));
  ops::check_supported(name, on_true, OpCode::Where, {cond.dtype(), on_true.dtype()});
  Shape shape = ops::broadcast_shape(name, on_true, on_false);
  ops::check_output(name, shape, on_true.dtype(), {&cond, &on_true, &on_false});
  shape = ops::broadcast_shape(name, cond, on_true.broadcast_as(shape));
  ops::check_output(name, shape, on_true.dtype(), {&cond, &on_true, &on_false});
  Layout lc = cond.layout().broadcast_as(shape), lt = on_true.layout().broadcast_as(shape),
         lf = on_false.layout().broadcast_as(shape);
  return wrap(backend_of(cond).where(view_of(cond, lc), view_of(on_true, lt), view_of(on_false, lf)), shape,
              on_true.dtype());
}

Tensor operator+(const Tensor& a, const Tensor& b) { return a.add(b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return a.sub(b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return a.mul(b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return a.div(b); }
Tensor operator+(const Tensor& a, Scalar b) { return a.add(b); }
Tensor operator-(const Tensor& a, Scalar b) { return a.sub(b); }
Tensor operator*(const Tensor& a, Scalar b) { return a.mul(b); }
Tensor operator/(const Tensor& a, Scalar b) { return a.div(b); }
Tensor operator+(Scalar a, const Tensor& b) { return scalar_binary(BinaryOp::Add, a, b); }
Tensor operator-(Scalar a, const Tensor& b) { return scalar_binary(BinaryOp::Sub, a, b); }
Tensor operator*(Scalar a, const Tensor& b) { return scalar_binary(BinaryOp::Mul, a, b); }
Tensor operator/(Scalar a, const Tensor& b) { return scalar_binary(BinaryOp::Div, a, b); }
Tensor operator-(const Tensor& a) { return a.neg(); }

}  // namespace wick
