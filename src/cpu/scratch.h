// Host scratch memory sized from tensor dims, uninitialised. A size the host cannot give is
// wick's OutOfMemoryError, never std::bad_alloc or std::length_error: those must not reach
// callers, and parallel_for forwards what a loop body throws as it is. The memory comes from
// malloc, which answers null for a size it cannot give (operator new under a sanitizer ends the
// process instead), and past kMaxAllocBytes nothing is asked at all.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <type_traits>

#include "backend/backend.h"
#include "wick/error.h"

namespace wick::cpu {

template <typename T>
class Scratch {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);

 public:
  explicit Scratch(int64_t n) {
    const bool fits = n >= 0 && static_cast<uint64_t>(n) <= kMaxAllocBytes / sizeof(T);
    if (fits) p_.reset(static_cast<T*>(std::malloc(static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(T))));
    WICK_CHECK(p_ != nullptr, OutOfMemoryError, "alloc", "cannot allocate ", n, " scratch elements of ", sizeof(T),
               " bytes in host memory (cpu)");
  }
  T* data() { return p_.get(); }
  const T* data() const { return p_.get(); }
  T& operator[](int64_t i) { return p_[static_cast<size_t>(i)]; }
  const T& operator[](int64_t i) const { return p_[static_cast<size_t>(i)]; }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T[], Free> p_;
};

}  // namespace wick::cpu
