// Host scratch memory sized from tensor dims, uninitialised. A size the host cannot give is
// wick's OutOfMemoryError, never std::bad_alloc or std::length_error: those must not reach
// callers, and parallel_for forwards what a loop body throws as it is. Small blocks come from
// malloc, which answers null for a size it cannot give (operator new under a sanitizer ends the
// process instead); large ones from the CPU backend, whose cache keeps them for the next call (a
// widened weight freed to the system and faulted in again per product cost a 1B-shaped F16
// model's prompt a sixth of its time in clearing pages); past kMaxAllocBytes nothing is asked at
// all.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <type_traits>

#include "backend/backend.h"
#include "backend/storage.h"
#include "cpu/block_cache.h"
#include "cpu/cpu_backend.h"
#include "wick/error.h"

namespace wick::cpu {

template <typename T>
class Scratch {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);

 public:
  explicit Scratch(int64_t n) {
    const bool fits = n >= 0 && static_cast<uint64_t>(n) <= kMaxAllocBytes / sizeof(T);
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(T);
    if (fits && bytes >= BlockCache::kMinBytes) {
      block_ = cpu_backend().alloc(bytes);
      data_ = static_cast<T*>(block_->data());
    } else if (fits) {
      small_.reset(static_cast<T*>(std::malloc(bytes)));
      data_ = small_.get();
    }
    WICK_CHECK(data_ != nullptr, OutOfMemoryError, "alloc", "cannot allocate ", n, " scratch elements of ", sizeof(T),
               " bytes in host memory (cpu)");
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T& operator[](int64_t i) { return data_[i]; }
  const T& operator[](int64_t i) const { return data_[i]; }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  T* data_ = nullptr;
  std::unique_ptr<T[], Free> small_;
  StoragePtr block_;
};

}  // namespace wick::cpu
