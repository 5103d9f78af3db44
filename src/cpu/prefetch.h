// Software prefetch for the decode products, which stream each weight once. The processor's own
// prefetchers stop at 4 KB pages, and a weight mapped from a file (a GGUF tensor used in place) is
// in 4 KB pages, often one page per row: without help every row starts with a miss. Asking for the
// bytes a little ahead, across the end of a row into the next, hides it (a 1B-shape F16 file's
// decode on 2 Zen 4 cores: 4.6 tokens/s without, 13.8 with).
#pragma once

#include <cstdint>

namespace wick::cpu {

// How far ahead of its loads a loop asks for the weight.
inline constexpr int64_t kPrefetchBytes = 2048;

// Asks for the Bytes bytes that lie kPrefetchBytes past p, for reading, into every cache level: the
// many-row products read a run of weight rows once per tile of x and need it kept (a non-temporal
// hint left it out of L2 and cut a Q4_0 prompt's speed by a quarter).
template <int64_t Bytes>
[[gnu::always_inline]] inline void prefetch_ahead(const void* p) {
  for (int64_t o = 0; o < Bytes; o += 64) __builtin_prefetch(static_cast<const char*>(p) + kPrefetchBytes + o, 0, 3);
}

}  // namespace wick::cpu
