// Conversion between any two element types, with wick's rules (docs/numerics.md):
//   float -> int: truncate toward zero, NaN -> 0, out of range saturates;
//   int -> int: wraps modulo 2^bits (two's complement);
//   -> float: one rounding to nearest even, also from i64 and f64 to the 16- and 8-bit floats
//   (where converting through f32 would round twice).
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/numeric.h"

namespace wick::kernels {

// f64 holding a value whose rounding to any format of at most 24 significant bits is the same
// as that of the 64-bit integer: exact below 2^53, otherwise the bits under bit 12 are folded into
// a sticky bit at bit 11 (a value f64 represents exactly).
WICK_HD inline double int64_to_f64_sticky(int64_t v) {
  uint64_t a = v < 0 ? uint64_t(0) - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  if (a >= (uint64_t(1) << 53)) a = (a & ~uint64_t(0xfff)) | ((a & 0xfff) ? 0x800 : 0);
  double d = static_cast<double>(a);
  return v < 0 ? -d : d;
}

template <typename To, typename From>
WICK_HD inline To cast(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (is_low_float_v<From>) {
    return cast<To>(static_cast<float>(x));  // exact
  } else if constexpr (std::is_floating_point_v<From>) {
    if constexpr (std::is_integral_v<To>) {
      double d = static_cast<double>(x);
      constexpr double hi = static_cast<double>(std::numeric_limits<To>::max()) + 1.0;
      constexpr double lo = static_cast<double>(std::numeric_limits<To>::min()) - 1.0;
      if (d != d) return To(0);
      if (d >= hi) return std::numeric_limits<To>::max();
      if (d <= lo) return std::numeric_limits<To>::min();
      return static_cast<To>(d);
    } else {
      return static_cast<To>(x);  // f32 <-> f64, or into a low float (f64 through round-to-odd)
    }
  } else {  // integer source
    if constexpr (std::is_integral_v<To> || std::is_floating_point_v<To>) {
      return static_cast<To>(x);
    } else if constexpr (sizeof(From) <= 2) {
      return To(static_cast<float>(x));  // exact in f32
    } else if constexpr (sizeof(From) == 4) {
      return To(static_cast<double>(x));  // exact in f64
    } else {
      return To(int64_to_f64_sticky(static_cast<int64_t>(x)));
    }
  }
}

}  // namespace wick::kernels
