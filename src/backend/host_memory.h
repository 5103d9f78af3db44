// The most host memory one allocation can use: the machine's RAM and swap. A request past it can
// only fail, or, where the kernel overcommits, be granted and then kill the process when touched;
// wick refuses it first, as an OutOfMemoryError of its own.
#pragma once

#include <cstdint>
#include <limits>
#include <sys/sysinfo.h>

namespace wick {

inline uint64_t host_memory_bytes() {
  static const uint64_t bytes = [] {
    struct sysinfo si {};
    if (sysinfo(&si) != 0) return std::numeric_limits<uint64_t>::max();
    return (static_cast<uint64_t>(si.totalram) + static_cast<uint64_t>(si.totalswap)) * si.mem_unit;
  }();
  return bytes;
}

}  // namespace wick
