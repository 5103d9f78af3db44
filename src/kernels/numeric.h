// Numeric building blocks shared by the CPU loops and the GPU kernels: the math type of each
// element type, wrapping integer arithmetic, and math functions with one name on host and device.
#pragma once

#include <math.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "wick/float_types.h"

namespace wick::kernels {

template <typename T>
inline constexpr bool is_low_float_v = std::is_same_v<T, f16> || std::is_same_v<T, bf16> || std::is_same_v<T, f8e4m3>;

// Float element types: the three low-precision ones, f32 and f64.
template <typename T>
inline constexpr bool is_float_v = is_low_float_v<T> || std::is_floating_point_v<T>;

// The type arithmetic on T is done in: f32 for the low-precision floats, T itself otherwise.
template <typename T>
using opmath_t = std::conditional_t<is_low_float_v<T>, float, T>;

// In GPU code, f16 goes to and from f32 by the hardware's conversion alone: the same values as the
// casts, except that a NaN's payload is not kept (arithmetic gives the processor's own NaN anyway).
// The casts' payload-keeping selects, once per value, made the f16 products integer-bound.
template <typename T>
WICK_HD inline opmath_t<T> to_opmath(T x) {
#if WICK_DEVICE_CODE
  if constexpr (std::is_same_v<T, f16>)
    return detail::f16_hardware_value(x.bits);
  else
#endif
    return static_cast<opmath_t<T>>(x);
}

template <typename T, typename M>
WICK_HD inline T from_opmath(M x) {
#if WICK_DEVICE_CODE
  if constexpr (std::is_same_v<T, f16> && std::is_same_v<M, float>)
    return f16::from_bits(detail::f16_hardware_bits(x));
  else
#endif
    return static_cast<T>(x);
}

// Integer arithmetic that wraps modulo 2^bits instead of overflowing (no undefined behaviour):
// the operation is done in an unsigned type at least 32 bits wide.
template <typename T>
using wrap_t = std::conditional_t<(sizeof(T) < 4), uint32_t, std::make_unsigned_t<T>>;

template <typename T>
WICK_HD inline T wrap_add(T a, T b) {
  return static_cast<T>(static_cast<wrap_t<T>>(a) + static_cast<wrap_t<T>>(b));
}
template <typename T>
WICK_HD inline T wrap_sub(T a, T b) {
  return static_cast<T>(static_cast<wrap_t<T>>(a) - static_cast<wrap_t<T>>(b));
}
template <typename T>
WICK_HD inline T wrap_mul(T a, T b) {
  return static_cast<T>(static_cast<wrap_t<T>>(a) * static_cast<wrap_t<T>>(b));
}
template <typename T>
WICK_HD inline T wrap_neg(T a) {
  return wrap_sub(T(0), a);
}

// Integer division truncating toward zero; x / 0 is 0 and MIN / -1 wraps to MIN, so that no
// input traps (a CPU would raise SIGFPE) and every backend gives the same answer.
template <typename T>
WICK_HD inline T int_div(T a, T b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<T>) {
    if (b == T(-1)) return wrap_neg(a);
  }
  return static_cast<T>(a / b);
}

template <typename M>
WICK_HD inline bool is_nan(M x) {
  if constexpr (std::is_floating_point_v<M>) {
    return x != x;
  } else {
    return false;
  }
}

// Math functions for float and double with the same spelling in host and device code.
namespace math {
#define WICK_MATH_FN(name)                                    \
  WICK_HD inline float name(float x) { return ::name##f(x); } \
  WICK_HD inline double name(double x) { return ::name(x); }
WICK_MATH_FN(exp)
WICK_MATH_FN(expm1)
WICK_MATH_FN(log)
WICK_MATH_FN(sin)
WICK_MATH_FN(cos)
WICK_MATH_FN(tanh)
WICK_MATH_FN(sqrt)
WICK_MATH_FN(erf)
WICK_MATH_FN(floor)
WICK_MATH_FN(ceil)
WICK_MATH_FN(round)
WICK_MATH_FN(fabs)
#undef WICK_MATH_FN
WICK_HD inline float pow(float x, float e) { return ::powf(x, e); }
WICK_HD inline double pow(double x, double e) { return ::pow(x, e); }
}  // namespace math

}  // namespace wick::kernels
