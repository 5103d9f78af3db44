// A number given to an op (fill values, the scalar side of `x + 2`): an integer or a float,
// converted to the tensor's dtype where it is used.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "wick/dtype.h"

namespace wick {

class Scalar {
 public:
  // Any integer type, bool (0 or 1) included; an unsigned 64-bit value above INT64_MAX, which no
  // dtype of wick holds, is a DTypeError.
  template <typename T>
  requires std::is_integral_v<T> Scalar(T v) : i_(from_integer(v)), integral_(true) {}
  template <typename T>
  requires std::is_floating_point_v<T> Scalar(T v) : f_(static_cast<double>(v)), integral_(false) {}
  Scalar(f16 v) : f_(static_cast<double>(v)), integral_(false) {}
  Scalar(bf16 v) : f_(static_cast<double>(v)), integral_(false) {}
  Scalar(f8e4m3 v) : f_(static_cast<double>(v)), integral_(false) {}

  bool is_integral() const { return integral_; }
  double to_double() const { return integral_ ? static_cast<double>(i_) : f_; }
  int64_t int_value() const { return i_; }  // only meaningful when is_integral()
  std::string to_string() const;

  // Whether the value converts to `dt` without loss of meaning: integers must fit the integer
  // dtype's range; floats must be integral and in range to become an integer dtype. Any number
  // converts to a float dtype (rounded to nearest even, overflow to inf or f8's NaN).
  bool fits(DType dt) const;

 private:
  template <typename T>
  static int64_t from_integer(T v) {
    if constexpr (std::is_unsigned_v<T> && sizeof(T) == 8) return from_u64(v);
    return static_cast<int64_t>(v);
  }
  static int64_t from_u64(uint64_t v);

  int64_t i_ = 0;
  double f_ = 0;
  bool integral_ = true;
};

}  // namespace wick
