// OpenMP parallel loops for the CPU backend. Work below a size threshold runs on the calling
// thread. Bodies must not throw (an exception cannot leave an OpenMP region): record errors and
// raise them after the loop.
#pragma once

#include <algorithm>
#include <cstdint>

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
#pragma omp parallel for schedule(static) num_threads(static_cast <int>(chunks))
  for (int64_t c = 0; c < chunks; ++c) f(c * n / chunks, (c + 1) * n / chunks);
}

}  // namespace wick::cpu
