// The CPU backend's strided iteration: an N-operand space (backend/strided.h) is walked in runs
// of consecutive elements along the innermost dim. The multi-index is computed once per parallel
// chunk and then advanced, never divided out per element; a run whose operands all have stride
// 1 takes a loop the compiler vectorises.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <utility>

#include "backend/backend.h"
#include "backend/strided.h"
#include "cpu/parallel.h"

namespace wick::cpu {

// Calls run(offsets[N], count, inner_strides[N]) for runs covering `s` (in parallel), where
// element j of the run is at offsets[k] + j * inner_strides[k] for operand k.
template <int N, typename Run>
void for_each_run(const StridedSpace<N>& s, int64_t grain, const Run& run) {
  int64_t n = s.numel();
  if (n == 0) return;
  const int last = s.rank - 1;
  int64_t inner_strides[N];
  for (int k = 0; k < N; ++k) inner_strides[k] = s.strides[k][last];
  parallel_for(n, grain, [&](int64_t begin, int64_t end) {
    int64_t idx[kMaxRank];
    int64_t off[N];
    int64_t rem = begin;
    for (int d = last; d >= 0; --d) {
      idx[d] = rem % s.shape[d];
      rem /= s.shape[d];
    }
    for (int k = 0; k < N; ++k) {
      off[k] = s.offsets[k];
      for (int d = 0; d <= last; ++d) off[k] += idx[d] * s.strides[k][d];
    }
    for (int64_t i = begin; i < end;) {
      int64_t count = std::min(s.shape[last] - idx[last], end - i);
      run(static_cast<const int64_t*>(off), count, static_cast<const int64_t*>(inner_strides));
      i += count;
      idx[last] += count;
      for (int k = 0; k < N; ++k) off[k] += count * inner_strides[k];
      for (int d = last; d > 0 && idx[d] == s.shape[d]; --d) {  // carry into the outer dims
        idx[d] = 0;
        ++idx[d - 1];
        for (int k = 0; k < N; ++k) off[k] += s.strides[k][d - 1] - s.shape[d] * s.strides[k][d];
      }
    }
  });
}

// for_each_run on the calling thread, in order.
template <int N, typename Run>
void for_each_run_serial(const StridedSpace<N>& s, const Run& run) {
  for_each_run<N>(s, std::numeric_limits<int64_t>::max(), run);
}

template <typename T>
Operand<T> operand(const View& v) {
  return {static_cast<const T*>(v.storage.data()), &v.layout};
}

template <typename T>
T* mut_data(const MutView& v) {
  return static_cast<T*>(v.storage.data());
}

namespace detail {

template <typename F, typename Out, size_t... K, typename... In>
void map_run(const F& f, Out* out, int64_t n, const int64_t* st, std::index_sequence<K...>, const In*... in) {
  if (st[0] == 1 && ((st[K + 1] == 1) && ...)) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(in[i]...);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i * st[0]] = f(in[i * st[K + 1]]...);
  }
}

}  // namespace detail

// out[i] = f(in[i]...) over the shape of out_layout (every input has that shape), in parallel
// tasks of at least Grain elements.
template <int64_t Grain = kParallelGrain, typename F, typename Out, typename... In>
void map_elementwise(const F& f, Out* out, const Layout& out_layout, Operand<In>... in) {
  constexpr int N = 1 + sizeof...(In);
  StridedSpace<N> s = collapse<N>(std::array<const Layout*, N>{&out_layout, in.layout...});
  for_each_run<N>(s, Grain, [&](const int64_t* off, int64_t n, const int64_t* st) {
    [&]<size_t... K>(std::index_sequence<K...> seq) {
      detail::map_run(f, out + off[0], n, st, seq, (in.data + off[K + 1])...);
    }
    (std::index_sequence_for<In...>{});
  });
}

}  // namespace wick::cpu
