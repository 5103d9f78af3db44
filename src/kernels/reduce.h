// Reductions written once for the CPU loops and the GPU kernels: an accumulator type, its
// identity, how one element enters it, how two partial results combine, and the final value.
// Sums accumulate in f32 (f16, bf16, f8e4m3, f32), f64, or 64-bit integers that wrap.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "backend/op.h"
#include "kernels/binary.h"
#include "kernels/numeric.h"

namespace wick::kernels {

template <typename T>
using sum_acc_t = std::conditional_t<is_float_v<T>, opmath_t<T>, uint64_t>;

template <typename A, typename T>
WICK_HD inline A to_acc(T v) {
  return static_cast<A>(to_opmath(v));
}

template <typename T>
struct SumReduce {
  using Acc = sum_acc_t<T>;
  using Out = T;
  WICK_HD static Acc init() { return Acc(0); }
  WICK_HD static Acc element(T v, int64_t) { return to_acc<Acc>(v); }
  WICK_HD static Acc combine(Acc a, Acc b) { return a + b; }
  // One more element, at an index above every index already in `a`.
  WICK_HD static Acc accumulate(Acc a, T v, int64_t i) { return combine(a, element(v, i)); }
  WICK_HD static Out finish(Acc a) {
    if constexpr (is_float_v<T>)
      return from_opmath<T>(a);
    else
      return static_cast<T>(a);
  }
};

template <typename M>
WICK_HD constexpr M lowest_value() {
  if constexpr (std::numeric_limits<M>::has_infinity)
    return -std::numeric_limits<M>::infinity();
  else
    return std::numeric_limits<M>::lowest();
}

template <typename M>
WICK_HD constexpr M highest_value() {
  if constexpr (std::numeric_limits<M>::has_infinity)
    return std::numeric_limits<M>::infinity();
  else
    return std::numeric_limits<M>::max();
}

// min and max propagate NaN, like maximum/minimum.
template <typename T, bool kMax>
struct MinMaxReduce {
  using Acc = opmath_t<T>;
  using Out = T;
  WICK_HD static Acc init() { return kMax ? lowest_value<Acc>() : highest_value<Acc>(); }
  WICK_HD static Acc element(T v, int64_t) { return to_opmath(v); }
  WICK_HD static Acc combine(Acc a, Acc b) {
    if constexpr (kMax)
      return Binary<BinaryOp::Maximum>{}(a, b);
    else
      return Binary<BinaryOp::Minimum>{}(a, b);
  }
  WICK_HD static Acc accumulate(Acc a, T v, int64_t i) { return combine(a, element(v, i)); }
  WICK_HD static Out finish(Acc a) { return from_opmath<T>(a); }
};

template <typename M>
struct ArgAcc {
  M v;
  int64_t i;  // -1: empty
};

// argmin/argmax: NaN counts as the extreme, and among equal candidates the smallest index wins.
// The combine does not depend on the order of its operands, so any grouping gives the same answer.
template <typename T, bool kMax>
struct ArgReduce {
  using M = opmath_t<T>;
  using Acc = ArgAcc<M>;
  using Out = uint32_t;
  WICK_HD static Acc init() { return {M(0), -1}; }
  WICK_HD static Acc element(T v, int64_t i) { return {to_opmath(v), i}; }
  WICK_HD static Acc combine(Acc a, Acc b) {
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    const bool an = is_nan(a.v), bn = is_nan(b.v);
    if (an || bn) {
      if (an && bn) return a.i < b.i ? a : b;
      return an ? a : b;
    }
    if (a.v == b.v) return a.i < b.i ? a : b;
    return (kMax ? b.v > a.v : b.v < a.v) ? b : a;
  }
  // combine(a, element(v, i)) when i is above every index in a: v wins only by being strictly
  // better, or NaN over a number.
  WICK_HD static Acc accumulate(Acc a, T v, int64_t i) {
    const M m = to_opmath(v);
    if (a.i < 0 || (!is_nan(a.v) && (is_nan(m) || (kMax ? m > a.v : m < a.v)))) return {m, i};
    return a;
  }
  WICK_HD static Out finish(Acc a) { return static_cast<Out>(a.i); }
};

// Calls f.template operator()<Reducer>() with the reducer type of `op` for element type T.
template <typename T, typename F>
decltype(auto) dispatch_reduce(ReduceOp op, F&& f) {
  switch (op) {
    case ReduceOp::Sum: return f.template operator()<SumReduce<T>>();
    case ReduceOp::Min: return f.template operator()<MinMaxReduce<T, false>>();
    case ReduceOp::Max: return f.template operator()<MinMaxReduce<T, true>>();
    case ReduceOp::ArgMin: return f.template operator()<ArgReduce<T, false>>();
    case ReduceOp::ArgMax: return f.template operator()<ArgReduce<T, true>>();
  }
  __builtin_unreachable();
}

}  // namespace wick::kernels
