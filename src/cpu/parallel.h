// OpenMP parallel loops for the CPU backend. Work below a size threshold runs on the calling
// thread. An exception cannot leave an OpenMP region (the process would end): parallel_for
// catches the first one a body throws and rethrows it on the calling thread after the loop.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace wick::cpu {

// Elements of simple elementwise work below which one thread is faster than waking a team.
inline constexpr int64_t kParallelGrain = 32768;

// The same for elementwise work that takes an exponential per element (silu_mul): a 4-sequence
// decoding step's silu_mul of 32768 elements took 70 microseconds on one thread.
inline constexpr int64_t kExpGrain = 4096;

inline int max_threads() {
#ifdef _OPENMP
  return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
  return 1;
#endif
}

// Ends the calling thread's OpenMP team (its threads exit); its next parallel region starts one again.
// GCC's runtime (libgomp) only: there a pause frees the calling thread's team; LLVM's pauses the
// threads of the whole process, and it does not count teams as libgomp does.
inline void release_team() {
#if defined(_OPENMP) && defined(__GNUC__) && !defined(__clang__)
  if (!omp_in_parallel()) omp_pause_resource_all(omp_pause_soft);
#endif
}

// Ranges per thread of a parallel_for, handed out as threads come free.
inline constexpr int64_t kRangesPerThread = 16;

// Calls f(begin, end) on disjoint ranges covering [0, n), each at least `grain` long (or the
// whole range), in parallel when there is more than one. There are up to kRangesPerThread ranges
// per thread, each taken by the next thread to come free, so that a thread that runs late (its
// processor shared, as a virtual machine's are) holds the loop back by one small range, not by a
// whole share. Every loop runs with the whole team, even one of fewer ranges than threads:
// libgomp parks the threads that a smaller team leaves out, and the next loop of the whole team
// has to wake them. On the 16 cores of a virtual machine (Intel Xeon, AMX), a 1B-shape Q4_0 decode
// ran at 31 tokens/s with one range per thread and teams cut to the ranges, 43-45 with ranges
// handed out, and 88-96 with the whole team as well (llama-bench: 99.5). With 16 ranges per thread
// rather than 4, the same file's 512-token prompt went from 676-679 tokens/s to 734-777 there (a
// prompt's product of 3072 rows has 192 groups of 16 to share: 3 to a range of 4 per thread left
// threads idle for a range's time at the end) and its decoding stayed at 93-103 tokens/s.
template <typename F>
void parallel_for(int64_t n, int64_t grain, const F& f) {
  if (n <= 0) return;
  const int64_t threads = max_threads();
  const int64_t chunks = std::clamp<int64_t>(n / std::max<int64_t>(grain, 1), 1, threads * kRangesPerThread);
  if (chunks <= 1 || threads <= 1) {
    f(int64_t(0), n);
    return;
  }
  std::exception_ptr error;
  std::atomic<bool> failed{false};
#pragma omp parallel for schedule(dynamic, 1) num_threads(static_cast <int>(threads))
  for (int64_t c = 0; c < chunks; ++c) {
    if (failed.load(std::memory_order_relaxed)) continue;  // the others stop early
    try {
      // c * n / chunks in 128 bits: c * n can pass 2^63 for n near the int64 limit.
      f(static_cast<int64_t>(static_cast<__int128>(c) * n / chunks),
        static_cast<int64_t>(static_cast<__int128>(c + 1) * n / chunks));
    } catch (...) {
      if (!failed.exchange(true)) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace wick::cpu
