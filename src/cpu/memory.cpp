// Host memory for the CPU backend: 64-byte aligned blocks, each behind a small header that
// records its guard size, so the testing aid (poison and guard bytes) can be switched at any time.
// Large unguarded blocks are kept for reuse (block_cache.h).
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

#include "backend/host_memory.h"
#include "cpu/cpu_backend.h"
#include "wick/error.h"

namespace wick::cpu {

namespace {

constexpr size_t kAlign = 64;
constexpr unsigned char kGuardByte = 0xa5;
constexpr unsigned char kPoisonByte = 0xff;  // NaN in every float dtype, the maximum in unsigned

size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// The size of the block holding nbytes of data behind `guard` bytes on each side.
size_t block_size(size_t nbytes, size_t guard) {
  size_t total = guard + kAlign + round_up(nbytes) + guard;
  return guard ? total : BlockCache::size_class(total);
}

// A block from the C library. One of kHugeBytes or more starts on a huge-page boundary and asks the
// kernel for huge pages (where transparent huge pages are on for those who ask, as Debian's default
// "madvise" has it): a weight read once per token then costs a TLB entry per 2 MB instead of per
// 4 KB (a Llama 3.2 1B-shaped Q4_0 model on 2 cores of an Intel Xeon decoded 27.2 tokens/s instead
// of 21.4).
constexpr size_t kHugeBytes = size_t{2} << 20;

unsigned char* fresh_block(size_t total) {
  if (total > host_memory_bytes()) return nullptr;  // an OutOfMemoryError, never an overcommitted block
  if (total < kHugeBytes) return static_cast<unsigned char*>(std::aligned_alloc(kAlign, total));
  const size_t rounded = (total + kHugeBytes - 1) / kHugeBytes * kHugeBytes;
  void* p = std::aligned_alloc(kHugeBytes, rounded);
#if defined(MADV_HUGEPAGE)
  if (p != nullptr) madvise(p, rounded, MADV_HUGEPAGE);  // advice only: a refusal changes nothing
#endif
  return static_cast<unsigned char*>(p);
}

}  // namespace

size_t BlockCache::size_class(size_t n) {
  if (n < kMinBytes) return n;
  size_t top = kMinBytes;
  while (top < n) top <<= 1;
  const size_t quarter = top / 8;  // classes top/2 * (1, 1.25, 1.5, 1.75), then top
  size_t c = top / 2;
  while (c < n) c += quarter;
  return c;
}

void* BlockCache::take(size_t class_bytes) {
  if (class_bytes < kMinBytes) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = free_.find(class_bytes);
  if (it == free_.end() || it->second.empty()) return nullptr;
  void* p = it->second.back();
  it->second.pop_back();
  cached_ -= class_bytes;
  return p;
}

bool BlockCache::give(void* block, size_t class_bytes) {
  if (class_bytes < kMinBytes) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  if (cached_ + class_bytes > kMaxCachedBytes) return false;
  free_[class_bytes].push_back(block);
  cached_ += class_bytes;
  return true;
}

void BlockCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [size, blocks] : free_)
    for (void* p : blocks) std::free(p);
  free_.clear();
  cached_ = 0;
}

CpuBackend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

bool CpuBackend::supports(OpKey op, std::span<const DType> dtypes) const { return default_supports(*this, op, dtypes); }

// Block: [guard][header: guard size, padded to kAlign][data, rounded up][guard]
StoragePtr CpuBackend::alloc(size_t nbytes) {
  WICK_CHECK(nbytes <= kMaxAllocBytes, OutOfMemoryError, "alloc", "cannot allocate ", nbytes, " bytes on cpu");
  size_t guard = round_up(check_guard_.load());
  size_t total = block_size(nbytes, guard);
  auto* base = static_cast<unsigned char*>(guard ? nullptr : cache_.take(total));
  if (!base) base = fresh_block(total);
  if (!base) {  // give the cached blocks back and try once more
    cache_.clear();
    base = fresh_block(total);
  }
  if (!base) throw OutOfMemoryError(detail::str_cat("alloc: cannot allocate ", nbytes, " bytes on cpu"));
  unsigned char* header = base + guard;
  std::memcpy(header, &guard, sizeof guard);
  unsigned char* data = header + kAlign;
  if (guard) {
    std::memset(base, kGuardByte, guard);
    std::memset(data + nbytes, kGuardByte, total - guard - kAlign - nbytes);
  }
  if (check_poison_.load()) std::memset(data, kPoisonByte, nbytes);
  count_alloc(nbytes);
  return std::make_shared<Storage>(this, data, nbytes);
}

void CpuBackend::release(void* data, size_t nbytes) noexcept {
  count_release(nbytes);
  unsigned char* header = static_cast<unsigned char*>(data) - kAlign;
  size_t guard;
  std::memcpy(&guard, header, sizeof guard);
  unsigned char* base = header - guard;
  if (guard) {
    size_t tail = round_up(nbytes) + guard - nbytes;
    const unsigned char* after = static_cast<unsigned char*>(data) + nbytes;
    bool intact = true;
    for (size_t i = 0; i < guard; ++i) intact &= base[i] == kGuardByte;
    for (size_t i = 0; i < tail; ++i) intact &= after[i] == kGuardByte;
    if (!intact) ++guard_violations_;
  }
  if (guard || !cache_.give(base, block_size(nbytes, 0))) std::free(base);
}

void CpuBackend::empty_cache() { cache_.clear(); }

bool CpuBackend::set_alloc_check(AllocCheck check) {
  WICK_CHECK(check.guard_bytes <= kMaxAllocBytes, Error, "set_alloc_check", "guard of ", check.guard_bytes,
             " bytes is too large (cpu)");
  check_poison_ = check.poison;
  check_guard_ = check.guard_bytes;
  return true;
}

StoragePtr CpuBackend::from_host(const void* src, size_t nbytes) {
  StoragePtr s = alloc(nbytes);
  if (nbytes) std::memcpy(s->data(), src, nbytes);
  return s;
}

void CpuBackend::to_host(const Storage& src, size_t byte_offset, size_t nbytes, void* dst) {
  if (nbytes) std::memcpy(dst, static_cast<const char*>(src.data()) + byte_offset, nbytes);
}

}  // namespace wick::cpu
