// A bounded cache of large host blocks. Freeing a large block returns its pages to the OS and
// the next allocation faults them in again, which costs as much as a large matmul; keeping freed
// blocks for reuse avoids it. Sizes are rounded up to classes (quarter steps between powers of
// two) so that blocks of nearby sizes are shared.
#pragma once

#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace wick::cpu {

class BlockCache {
 public:
  static constexpr size_t kMinBytes = size_t(1) << 18;  // smaller blocks come from malloc's own lists
  static constexpr size_t kMaxCachedBytes = size_t(1) << 30;

  // The size a block of at least n bytes is allocated with (n itself below kMinBytes).
  static size_t size_class(size_t n);
  // A cached block of exactly this class size, or nullptr.
  void* take(size_t class_bytes);
  // Keeps the block for reuse; false when the cache is full (the caller frees it).
  bool give(void* block, size_t class_bytes);
  // Frees every cached block.
  void clear();
  ~BlockCache() { clear(); }

 private:
  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
};

}  // namespace wick::cpu
