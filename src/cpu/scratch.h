// Host scratch memory sized from tensor dims. A size the host cannot give is wick's
// OutOfMemoryError, never std::bad_alloc or std::length_error: those must not reach callers, and
// parallel_for forwards what a loop body throws as it is.
#pragma once

#include <cstdint>
#include <exception>
#include <vector>

#include "wick/error.h"

namespace wick::cpu {

template <typename T>
void resize_scratch(std::vector<T>& v, int64_t n) {
  try {
    v.resize(static_cast<size_t>(n));
  } catch (const std::exception&) {
    WICK_THROW(OutOfMemoryError, "alloc", "cannot allocate ", n, " scratch elements of ", sizeof(T),
               " bytes in host memory (cpu)");
  }
}

}  // namespace wick::cpu
