// Element access for the reference backend: every float is read exactly into a long double and
// written back with one correct rounding (round_to_format, written from the formats' definitions
// and independent of the conversion code the other backends use); every integer is read into an
// int64_t and written back modulo 2^bits.
#pragma once

#include <cstdint>

#include "backend/storage.h"
#include "wick/dtype.h"

namespace wick::reference {

// Rounds v to the nearest value of the float dtype (ties to even), with its subnormals, and
// overflow to inf (f16, bf16, f32, f64) or NaN (f8e4m3, which has no inf).
long double round_to_format(long double v, DType dt);

// Float -> integer with wick's rule: truncate toward zero, NaN -> 0, saturate to the range.
int64_t float_to_int(long double v, DType dt);

// Integer -> the dtype's width, two's complement wrap-around.
int64_t wrap_int(int64_t v, DType dt);

// Typed access to the elements of one storage (indices in elements).
class Elements {
 public:
  Elements(const Storage& s, DType dt) : data_(static_cast<unsigned char*>(s.data())), dt_(dt) {}
  DType dtype() const { return dt_; }
  long double get_f(int64_t i) const;  // float dtypes
  int64_t get_i(int64_t i) const;      // integer dtypes
  void set_f(int64_t i, long double v) const;
  void set_i(int64_t i, int64_t v) const;
  // A number of either kind, converted with wick's cast rules.
  void set_from_f(int64_t i, long double v) const;
  void set_from_i(int64_t i, int64_t v) const;
  void copy_from(int64_t i, const Elements& src, int64_t j) const;

 private:
  unsigned char* data_;
  DType dt_;
};

}  // namespace wick::reference
