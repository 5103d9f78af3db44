// Dtype dispatch: calls a templated lambda with the C++ element type of a DType,
//   dispatch(dtype, [&]<typename T>() { ... });
// Kernels are templates over T; this is the one place a run-time dtype becomes a type.
#pragma once

#include <utility>

#include "wick/dtype.h"

namespace wick {

template <typename F>
decltype(auto) dispatch(DType dtype, F&& f) {
  switch (dtype) {
#define WICK_X(e, t, n) \
  case DType::e: return std::forward<F>(f).template operator()<t>();
    WICK_FORALL_DTYPES(WICK_X)
#undef WICK_X
  }
  __builtin_unreachable();
}

}  // namespace wick
