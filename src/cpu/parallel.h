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

inline int max_threads() {
#ifdef _OPENMP
  return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
  return 1;
#endif
}

// Calls f(begin, end) on disjoint ranges covering [0, n), each at least `grain` long (or the
// whole range), in parallel when there is more than one.
template <typename F>
void parallel_for(int64_t n, int64_t grain, const F& f) {
  if (n <= 0) return;
  int64_t threads = max_threads();
  int64_t chunks = std::clamp<int64_t>(n / std::max<int64_t>(grain, 1), 1, threads);
  if (chunks <= 1) {
    f(int64_t(0), n);
    return;
  }
  std::exception_ptr error;
  std::atomic<bool> failed{false};
#pragma omp parallel for schedule(static) num_threads(static_cast <int>(chunks))
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
