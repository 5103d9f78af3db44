// A Scalar converted to element type T with wick's cast rules (kernels/cast.h).
#pragma once

#include "kernels/cast.h"
#include "wick/scalar.h"

namespace wick {

template <typename T>
T scalar_as(const Scalar& s) {
  return s.is_integral() ? kernels::cast<T>(s.int_value()) : kernels::cast<T>(s.to_double());
}

}  // namespace wick
