// Reductions over any set of dims, and cumsum.
//
// The input splits into a kept space (one element per output) and a reduced space. Three
// loops cover every layout: a dense reduced space (reduce contiguous memory per output); kept
// elements contiguous in memory (accumulate whole rows into a block of outputs, vectorised across
// outputs); anything else (walk the reduced space per output). Long dense runs are split into
// fixed chunks combined in order, so results do not depend on the number of threads.
#include "kernels/reduce.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

#include "backend/reduce_plan.h"
#include "core/dispatch.h"
#include "cpu/cpu_backend.h"
#include "cpu/loops.h"

namespace wick::cpu {

namespace {

using kernels::from_opmath;
using kernels::is_float_v;
using kernels::sum_acc_t;
using kernels::to_acc;

constexpr int64_t kChunk = 1 << 15;
constexpr int64_t kColumnBlock = 64;

// Pairwise summation: error grows with log(n) rather than n.
template <typename A, typename T>
A pairwise_sum(const T* p, int64_t n, int64_t stride) {
  if (n <= 128) {
    A acc[8] = {};
    int64_t i = 0;
    if (stride == 1) {
      for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; ++k) acc[k] += to_acc<A>(p[i + k]);
    }
    for (; i < n; ++i) acc[0] += to_acc<A>(p[i * stride]);
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  }
  int64_t half = n / 2;
  return pairwise_sum<A>(p, half, stride) + pairwise_sum<A>(p + half * stride, n - half, stride);
}

// Reduces a run p[0], p[stride], ... of n elements whose first is element `base` of the reduced
// space: pairwise for sums, in order otherwise.
template <typename R, typename T>
typename R::Acc reduce_run(const T* p, int64_t n, int64_t stride, int64_t base) {
  if constexpr (std::is_same_v<R, kernels::SumReduce<T>>) {
    return pairwise_sum<typename R::Acc>(p, n, stride);
  } else {
    typename R::Acc acc = R::init();
    for (int64_t i = 0; i < n; ++i) acc = R::combine(acc, R::element(p[i * stride], base + i));
    return acc;
  }
}

// Reduces p[0..n) (stride 1) in fixed chunks folded in order; the chunks run in parallel when
// `parallel` is set, with the same result.
template <typename R, typename T>
typename R::Acc reduce_dense(const T* p, int64_t n, bool parallel) {
  using Acc = typename R::Acc;
  if (n <= kChunk) return reduce_run<R>(p, n, 1, 0);
  int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<Acc> part(static_cast<size_t>(chunks));
  auto one = [&](int64_t c) {
    part[static_cast<size_t>(c)] = reduce_run<R>(p + c * kChunk, std::min(kChunk, n - c * kChunk), 1, c * kChunk);
  };
  if (parallel) {
    parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) one(c);
    });
  } else {
    for (int64_t c = 0; c < chunks; ++c) one(c);
  }
  Acc acc = part[0];
  for (int64_t c = 1; c < chunks; ++c) acc = R::combine(acc, part[static_cast<size_t>(c)]);
  return acc;
}

template <typename R, typename T>
void reduce_impl(const T* x, typename R::Out* out, const Layout& xl, std::span<const int> dims) {
  using Acc = typename R::Acc;
  const ReducePlan plan = make_reduce_plan(xl, dims);
  const StridedSpace<2>& kept = plan.kept;
  const StridedSpace<1>& red = plan.reduced;
  const int64_t nout = kept.numel(), nred = red.numel();
  if (nout == 0) return;

  auto reduce_one = [&](const T* base, bool parallel) -> Acc {
    if (nred == 0) return R::init();
    if (red.dense(0)) return reduce_dense<R>(base, nred, parallel);
    Acc acc = R::init();
    int64_t pos = 0;
    for_each_run_serial(red, [&](const int64_t* off, int64_t n, const int64_t* st) {
      acc = R::combine(acc, reduce_run<R>(base + off[0], n, st[0], pos));
      pos += n;
    });
    return acc;
  };

  const int last = kept.rank - 1;
  const bool columns =
      nred > 0 && !red.dense(0) && kept.strides[0][last] == 1 && kept.strides[1][last] == 1 && kept.shape[last] >= 8;
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(nred, 1));
  if (columns) {
    for_each_run<2>(kept, grain, [&](const int64_t* off, int64_t n, const int64_t*) {
      for (int64_t j0 = 0; j0 < n; j0 += kColumnBlock) {
        const int64_t w = std::min(kColumnBlock, n - j0);
        Acc acc[kColumnBlock];
        std::fill(acc, acc + w, R::init());
        const T* base = x + off[1] + j0;
        int64_t pos = 0;
        for_each_run_serial(red, [&](const int64_t* roff, int64_t m, const int64_t* rst) {
          for (int64_t i = 0; i < m; ++i) {
            const T* row = base + roff[0] + i * rst[0];
            for (int64_t j = 0; j < w; ++j) acc[j] = R::combine(acc[j], R::element(row[j], pos + i));
          }
          pos += m;
        });
        for (int64_t j = 0; j < w; ++j) out[off[0] + j0 + j] = R::finish(acc[j]);
      }
    });
  } else if (nout >= max_threads() || nred < 2 * kChunk) {
    for_each_run<2>(kept, grain, [&](const int64_t* off, int64_t n, const int64_t* st) {
      for (int64_t j = 0; j < n; ++j) out[off[0] + j * st[0]] = R::finish(reduce_one(x + off[1] + j * st[1], false));
    });
  } else {  // few outputs, long reductions: parallel inside each
    for_each_run_serial(kept, [&](const int64_t* off, int64_t n, const int64_t* st) {
      for (int64_t j = 0; j < n; ++j) out[off[0] + j * st[0]] = R::finish(reduce_one(x + off[1] + j * st[1], true));
    });
  }
}

template <typename T>
void cumsum_impl(const T* x, T* out, const Layout& xl, int dim) {
  using Acc = sum_acc_t<T>;
  const Strides out_strides = contiguous_strides(xl.shape());
  const int64_t len = xl.dim(dim), xs = xl.stride(dim), os = out_strides[dim];
  // One line per position of the other dims.
  const Layout line_x = xl.narrow(dim, 0, len > 0 ? 1 : 0);
  const Layout line_out = Layout(xl.shape(), out_strides, 0).narrow(dim, 0, len > 0 ? 1 : 0);
  const StridedSpace<2> lines = collapse<2>({&line_out, &line_x});
  auto finish = [](Acc a) {
    if constexpr (is_float_v<T>)
      return from_opmath<T>(a);
    else
      return static_cast<T>(a);
  };
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(len, 1));
  for_each_run<2>(lines, grain, [&](const int64_t* off, int64_t n, const int64_t* st) {
    if (st[0] == 1 && st[1] == 1) {  // neighbouring lines: scan a block of them together
      for (int64_t j0 = 0; j0 < n; j0 += kColumnBlock) {
        const int64_t w = std::min(kColumnBlock, n - j0);
        Acc acc[kColumnBlock] = {};
        for (int64_t i = 0; i < len; ++i) {
          const T* row = x + off[1] + j0 + i * xs;
          T* orow = out + off[0] + j0 + i * os;
          for (int64_t j = 0; j < w; ++j) orow[j] = finish(acc[j] += to_acc<Acc>(row[j]));
        }
      }
      return;
    }
    for (int64_t j = 0; j < n; ++j) {
      const T* p = x + off[1] + j * st[1];
      T* o = out + off[0] + j * st[0];
      Acc acc = 0;
      for (int64_t i = 0; i < len; ++i) o[i * os] = finish(acc += to_acc<Acc>(p[i * xs]));
    }
  });
}

}  // namespace

StoragePtr CpuBackend::reduce(ReduceOp op, const View& x, std::span<const int> dims) {
  Shape out_shape = x.layout.shape();
  for (int d : dims) out_shape[d] = 1;
  const bool arg = op == ReduceOp::ArgMin || op == ReduceOp::ArgMax;
  StoragePtr out = alloc(arg ? DType::U32 : x.dtype, out_shape.numel());
  dispatch(x.dtype, [&]<typename T>() {
    kernels::dispatch_reduce<T>(op, [&]<typename R>() {
      reduce_impl<R>(static_cast<const T*>(x.storage.data()), static_cast<typename R::Out*>(out->data()), x.layout,
                     dims);
    });
  });
  return out;
}

StoragePtr CpuBackend::cumsum(const View& x, int dim) {
  StoragePtr out = alloc(x.dtype, x.layout.numel());
  dispatch(x.dtype,
           [&]<typename T>() { cumsum_impl(static_cast<const T*>(x.storage.data()), out->as<T>(), x.layout, dim); });
  return out;
}

}  // namespace wick::cpu
