#include "reference/element.h"

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/dispatch.h"

namespace wick::reference {

static_assert(LDBL_MANT_DIG >= 64, "the reference reads i64 and f64 exactly into a long double");

namespace {

struct Format {
  int digits;  // significant bits, with the implicit one
  int emin;    // exponent of the smallest normal
  long double max;
  bool has_inf;
};

Format format_of(DType dt) {
  switch (dt) {
    case DType::F16: return {11, -14, 65504.0L, true};
    case DType::BF16: return {8, -126, std::ldexp(255.0L, 120), true};  // (2 - 2^-7) * 2^127
    case DType::F8E4M3: return {4, -6, 448.0L, false};
    case DType::F32: return {24, -126, FLT_MAX, true};
    default: return {53, -1022, DBL_MAX, true};
  }
}

void int_range(DType dt, int64_t* lo, int64_t* hi) {
  dispatch(dt, [&]<typename T>() {
    if constexpr (std::is_integral_v<T>) {
      *lo = static_cast<int64_t>(std::numeric_limits<T>::min());
      *hi = static_cast<int64_t>(std::numeric_limits<T>::max());
    }
  });
}

}  // namespace

long double round_to_format(long double v, DType dt) {
  const Format f = format_of(dt);
  const long double nan = std::numeric_limits<long double>::quiet_NaN();
  if (std::isnan(v)) return v;
  if (std::isinf(v)) return f.has_inf ? v : nan;
  if (v == 0) return v;
  int e = std::max(std::ilogb(v), f.emin);
  long double quantum = std::ldexp(1.0L, e - (f.digits - 1));
  long double r = std::nearbyint(v / quantum) * quantum;  // default rounding: to nearest even
  if (std::fabs(r) > f.max) {
    if (!f.has_inf) return nan;
    return r > 0 ? std::numeric_limits<long double>::infinity() : -std::numeric_limits<long double>::infinity();
  }
  return r;
}

int64_t float_to_int(long double v, DType dt) {
  int64_t lo = 0, hi = 0;
  int_range(dt, &lo, &hi);
  if (std::isnan(v)) return 0;
  long double t = std::trunc(v);
  if (t >= static_cast<long double>(hi)) return hi;
  if (t <= static_cast<long double>(lo)) return lo;
  return static_cast<int64_t>(t);
}

int64_t wrap_int(int64_t v, DType dt) {
  return dispatch(dt, [&]<typename T>() -> int64_t {
    if constexpr (std::is_integral_v<T>) return static_cast<int64_t>(static_cast<T>(v));
    return v;
  });
}

long double Elements::get_f(int64_t i) const {
  return dispatch(dt_, [&]<typename T>() -> long double {
    T v;
    std::memcpy(&v, data_ + i * sizeof(T), sizeof(T));
    if constexpr (std::is_integral_v<T>)
      return static_cast<long double>(v);
    else
      return static_cast<long double>(static_cast<double>(v));
  });
}

int64_t Elements::get_i(int64_t i) const {
  return dispatch(dt_, [&]<typename T>() -> int64_t {
    T v;
    std::memcpy(&v, data_ + i * sizeof(T), sizeof(T));
    if constexpr (std::is_integral_v<T>)
      return static_cast<int64_t>(v);
    else
      return 0;
  });
}

void Elements::set_f(int64_t i, long double v) const {
  dispatch(dt_, [&]<typename T>() {
    if constexpr (!std::is_integral_v<T>) {
      // The rounded value is exact in the format, so any conversion of it is exact too.
      T out = T(static_cast<double>(round_to_format(v, dt_)));
      std::memcpy(data_ + i * sizeof(T), &out, sizeof(T));
    }
  });
}

void Elements::set_i(int64_t i, int64_t v) const {
  dispatch(dt_, [&]<typename T>() {
    if constexpr (std::is_integral_v<T>) {
      T out = static_cast<T>(v);
      std::memcpy(data_ + i * sizeof(T), &out, sizeof(T));
    }
  });
}

void Elements::set_from_f(int64_t i, long double v) const {
  if (is_float(dt_))
    set_f(i, v);
  else
    set_i(i, float_to_int(v, dt_));
}

void Elements::set_from_i(int64_t i, int64_t v) const {
  if (is_float(dt_))
    set_f(i, static_cast<long double>(v));
  else
    set_i(i, v);
}

void Elements::copy_from(int64_t i, const Elements& src, int64_t j) const {
  const size_t size = static_cast<size_t>(dtype_size(dt_));
  std::memcpy(data_ + static_cast<size_t>(i) * size, src.data_ + static_cast<size_t>(j) * size, size);
}

}  // namespace wick::reference
