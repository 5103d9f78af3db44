// Binary and comparison functors over the math type M (see unary.h). Integer add/sub/mul wrap;
// integer division truncates, x / 0 = 0. maximum/minimum propagate NaN.
#pragma once

#include <type_traits>

#include "backend/op.h"
#include "kernels/numeric.h"

namespace wick::kernels {

template <BinaryOp op>
struct Binary;

template <>
struct Binary<BinaryOp::Add> {
  template <typename M>
  WICK_HD M operator()(M a, M b) const {
    if constexpr (std::is_integral_v<M>)
      return wrap_add(a, b);
    else
      return a + b;
  }
};

template <>
struct Binary<BinaryOp::Sub> {
  template <typename M>
  WICK_HD M operator()(M a, M b) const {
    if constexpr (std::is_integral_v<M>)
      return wrap_sub(a, b);
    else
      return a - b;
  }
};

template <>
struct Binary<BinaryOp::Mul> {
  template <typename M>
  WICK_HD M operator()(M a, M b) const {
    if constexpr (std::is_integral_v<M>)
      return wrap_mul(a, b);
    else
      return a * b;
  }
};

template <>
struct Binary<BinaryOp::Div> {
  template <typename M>
  WICK_HD M operator()(M a, M b) const {
    if constexpr (std::is_integral_v<M>)
      return int_div(a, b);
    else
      return a / b;
  }
};

template <>
struct Binary<BinaryOp::Maximum> {
  template <typename M>
  WICK_HD M operator()(M a, M b) const {
    if (is_nan(a)) return a;
    if (is_nan(b)) return b;
    return a < b ? b : a;
  }
};

template <>
struct Binary<BinaryOp::Minimum> {
  template <typename M>
  WICK_HD M operator()(M a, M b) const {
    if (is_nan(a)) return a;
    if (is_nan(b)) return b;
    return b < a ? b : a;
  }
};

// IEEE comparisons: every comparison with NaN is false except ne.
template <CmpOp op>
struct Cmp {
  template <typename M>
  WICK_HD bool operator()(M a, M b) const {
    if constexpr (op == CmpOp::Eq)
      return a == b;
    else if constexpr (op == CmpOp::Ne)
      return a != b;
    else if constexpr (op == CmpOp::Lt)
      return a < b;
    else if constexpr (op == CmpOp::Le)
      return a <= b;
    else if constexpr (op == CmpOp::Gt)
      return a > b;
    else
      return a >= b;
  }
};

}  // namespace wick::kernels
