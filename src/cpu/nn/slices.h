// The slices an nn kernel works on: every position of a layout but `dim`, each a run of
// layout.dim(dim) elements at stride layout.stride(dim), walked in parallel.
#pragma once

#include <algorithm>
#include <cstdint>

#include "cpu/loops.h"

namespace wick::cpu {

// Calls f(x_offset, out_offset) for the first element of each slice of x along dim, where out is
// the contiguous layout of x's shape.
template <typename F>
void for_each_slice(const Layout& x, int dim, const F& f) {
  const int64_t len = x.dim(dim);
  const Layout xs = x.narrow(dim, 0, 1), os = Layout(x.shape()).narrow(dim, 0, 1);
  const StridedSpace<2> slices = collapse<2>({&os, &xs});
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(len, 1));
  for_each_run<2>(slices, grain, [&](const int64_t* off, int64_t n, const int64_t* st) {
    for (int64_t r = 0; r < n; ++r) f(off[1] + r * st[1], off[0] + r * st[0]);
  });
}

}  // namespace wick::cpu
