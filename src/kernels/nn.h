// The math of the nn wing's fused kernels, shared by the CPU loops (src/cpu/nn) and the GPU
// kernels (src/gpu/nn): accumulators that a thread fills element by element and that threads then
// combine in a fixed order, and the per-element formulas. M is the math type (opmath_t).
//
// Each formula follows the composition the front end runs where a backend has no fused kernel
// (src/nn), so that special values come out alike: a NaN anywhere in a softmax slice makes the
// slice NaN, a slice of -inf is NaN (as PyTorch), +inf gives NaN where exp(inf - inf) appears.
#pragma once

#include <cstdint>
#include <limits>

#include "kernels/numeric.h"

namespace wick::kernels {

// Online softmax state of a slice: its largest element and the sum of exp(x - max). Empty: sum 0
// (after any element but -inf the sum is at least 1, or NaN).
template <typename M>
struct SoftmaxAcc {
  M max;
  M sum;

  static WICK_HD SoftmaxAcc init() { return {-std::numeric_limits<M>::infinity(), M(0)}; }
  WICK_HD bool empty() const { return sum == M(0); }

  WICK_HD void add(M x) {
    if (x > max) {
      // exp(x - x) rather than 1: an infinite x gives NaN, as exp(x - max) does in the composition.
      sum = sum * math::exp(max - x) + math::exp(x - x);
      max = x;
    } else if (x != max || x != -std::numeric_limits<M>::infinity()) {
      // -inf adds exp(-inf - max) = 0 once the slice has a finite maximum; while every element
      // so far is -inf the state stays empty, and a slice of -inf ends with max - max = NaN.
      sum += math::exp(x - max);
    }
  }

  static WICK_HD SoftmaxAcc combine(SoftmaxAcc a, SoftmaxAcc b) {
    if (a.empty()) return b;
    if (b.empty()) return a;
    const M m = a.max > b.max ? a.max : b.max;
    return {m, a.sum * math::exp(a.max - m) + b.sum * math::exp(b.max - m)};
  }
};

template <typename M>
WICK_HD inline M softmax_value(M x, SoftmaxAcc<M> acc) {
  return math::exp(x - acc.max) / acc.sum;
}
template <typename M>
WICK_HD inline M log_softmax_value(M x, SoftmaxAcc<M> acc) {
  return (x - acc.max) - math::log(acc.sum);
}

// rms_norm: x * scale * weight, scale = 1 / sqrt(sum of squares / n + eps).
template <typename M>
WICK_HD inline M rms_scale(M square_sum, int64_t n, M eps) {
  return M(1) / math::sqrt(square_sum / static_cast<M>(n) + eps);
}
template <typename M>
WICK_HD inline M rms_norm_value(M x, M scale, M weight) {
  return x * scale * weight;
}

// layer_norm in two passes, the mean and then the sum of squared deviations, so that inputs of
// large magnitude and small spread (1e4 + noise) do not cancel: (x - mean) * scale * weight + bias,
// scale = 1 / sqrt(deviation sum / n + eps) = rms_scale(deviation sum, n, eps).
template <typename M>
WICK_HD inline M layer_norm_value(M x, M mean, M scale, M weight, M bias) {
  return (x - mean) * scale * weight + bias;
}

// rope: the pair (a, b) of features turned by the angle whose cosine and sine are c and s. The
// front end's composition computes the same products and sums in the same order (no contraction
// into fused multiply-adds anywhere), so the fused kernels give its bits.
template <typename M>
struct RopePair {
  M a, b;
};
template <typename M>
WICK_HD inline RopePair<M> rope_pair(M a, M b, M c, M s) {
  return {a * c - b * s, a * s + b * c};
}

// Where pair i of a head of d = 2 * half features lies: (i, i + half), or (2i, 2i + 1) when
// interleaved. I: the kernel's index type.
template <typename I>
WICK_HD inline I rope_first(I i, bool interleaved) {
  return interleaved ? 2 * i : i;
}
template <typename I>
WICK_HD inline I rope_second(I i, I half, bool interleaved) {
  return interleaved ? 2 * i + 1 : i + half;
}

}  // namespace wick::kernels
