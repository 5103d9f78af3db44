#include "wick/scalar.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "core/dispatch.h"
#include "wick/error.h"

namespace wick {

int64_t Scalar::from_u64(uint64_t v) {
  WICK_CHECK(v <= static_cast<uint64_t>(INT64_MAX), DTypeError, "scalar", "the value ", v,
             " is above the largest integer a dtype of wick holds (", INT64_MAX, ", i64)");
  return static_cast<int64_t>(v);
}

std::string Scalar::to_string() const {
  if (integral_) return std::to_string(i_);
  std::ostringstream os;
  os.precision(17);
  os << f_;
  return os.str();
}

bool Scalar::fits(DType dt) const {
  if (is_float(dt)) return true;
  return dispatch(dt, [&]<typename T>() {
    if constexpr (std::is_integral_v<T>) {
      using L = std::numeric_limits<T>;
      if (integral_) {
        if constexpr (std::is_unsigned_v<T>)
          return i_ >= 0 && static_cast<uint64_t>(i_) <= L::max();
        else
          return i_ >= L::min() && i_ <= L::max();
      }
      return std::isfinite(f_) && f_ == std::trunc(f_) && f_ >= static_cast<double>(L::min()) &&
             f_ < static_cast<double>(L::max()) + 1.0;
    }
    return true;
  });
}

}  // namespace wick
