// Elementwise functors, written once for the CPU loops and the GPU kernels. Each takes and
// returns the math type M (opmath_t of the element type: f32 for f16/bf16/f8e4m3); the ops
// defined for integers also take the integer type itself. NaN propagates through every float op.
#pragma once

#include <type_traits>

#include "backend/op.h"
#include "kernels/numeric.h"

namespace wick::kernels {

template <UnaryOp op>
struct Unary;

#define WICK_UNARY_FLOAT(Op, expr)    \
  template <>                         \
  struct Unary<UnaryOp::Op> {         \
    template <typename M>             \
    WICK_HD M operator()(M x) const { \
      return expr;                    \
    }                                 \
  };

WICK_UNARY_FLOAT(Exp, math::exp(x))
WICK_UNARY_FLOAT(Log, math::log(x))
WICK_UNARY_FLOAT(Sin, math::sin(x))
WICK_UNARY_FLOAT(Cos, math::cos(x))
WICK_UNARY_FLOAT(Tanh, math::tanh(x))
WICK_UNARY_FLOAT(Recip, M(1) / x)
WICK_UNARY_FLOAT(Sqrt, math::sqrt(x))
WICK_UNARY_FLOAT(Erf, math::erf(x))
// tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
WICK_UNARY_FLOAT(Gelu, M(0.5) * x * (M(1) + math::tanh(M(0.7978845608028654) * (x + M(0.044715) * x * x * x))))
WICK_UNARY_FLOAT(GeluErf, M(0.5) * x * (M(1) + math::erf(x * M(0.7071067811865476))))
WICK_UNARY_FLOAT(Silu, x / (M(1) + math::exp(-x)))
WICK_UNARY_FLOAT(Sigmoid, M(1) / (M(1) + math::exp(-x)))
#undef WICK_UNARY_FLOAT

template <>
struct Unary<UnaryOp::Abs> {
  template <typename M>
  WICK_HD M operator()(M x) const {
    if constexpr (std::is_floating_point_v<M>)
      return math::fabs(x);
    else if constexpr (std::is_signed_v<M>)
      return x < 0 ? wrap_neg(x) : x;
    else
      return x;
  }
};

template <>
struct Unary<UnaryOp::Neg> {
  template <typename M>
  WICK_HD M operator()(M x) const {
    if constexpr (std::is_floating_point_v<M>)
      return -x;
    else
      return wrap_neg(x);
  }
};

template <>
struct Unary<UnaryOp::Sqr> {
  template <typename M>
  WICK_HD M operator()(M x) const {
    if constexpr (std::is_floating_point_v<M>)
      return x * x;
    else
      return wrap_mul(x, x);
  }
};

template <>
struct Unary<UnaryOp::Relu> {
  template <typename M>
  WICK_HD M operator()(M x) const {
    return (x > M(0) || is_nan(x)) ? x : M(0);
  }
};

// Integers are already whole: floor, ceil and round leave them as they are.
#define WICK_UNARY_ROUNDING(Op, fn)              \
  template <>                                    \
  struct Unary<UnaryOp::Op> {                    \
    template <typename M>                        \
    WICK_HD M operator()(M x) const {            \
      if constexpr (std::is_floating_point_v<M>) \
        return fn(x);                            \
      else                                       \
        return x;                                \
    }                                            \
  };
WICK_UNARY_ROUNDING(Floor, math::floor)
WICK_UNARY_ROUNDING(Ceil, math::ceil)
WICK_UNARY_ROUNDING(Round, math::round)  // ties away from zero, as Candle and C's round()
#undef WICK_UNARY_ROUNDING

// -1, 0 or 1; a float zero keeps its sign and NaN stays NaN.
template <>
struct Unary<UnaryOp::Sign> {
  template <typename M>
  WICK_HD M operator()(M x) const {
    if constexpr (std::is_unsigned_v<M>)
      return x > 0 ? M(1) : M(0);
    else
      return x > M(0) ? M(1) : (x < M(0) ? M(-1) : x);
  }
};

// x * mul + add. Integers compute in f64 and convert back with the float -> int cast rules.
template <typename M>
struct Affine {
  M mul, add;
  WICK_HD M operator()(M x) const { return x * mul + add; }
};

template <typename M>
struct Powf {
  M exponent;
  WICK_HD M operator()(M x) const { return math::pow(x, exponent); }
};

template <typename M>
struct Elu {
  M alpha;
  WICK_HD M operator()(M x) const { return x > M(0) ? x : alpha * math::expm1(x); }
};

}  // namespace wick::kernels
