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

// ---- attention ------------------------------------------------------------------------------

// The keys [lo, hi) that a query at position pos sees among t_kv: up to its own position when
// causal, above pos - window when window > 0. Empty (lo == hi) when none is left.
struct KeyRange {
  int64_t lo;
  int64_t hi;
};
WICK_HD inline KeyRange attention_keys(int64_t pos, int64_t t_kv, bool causal, int64_t window) {
  int64_t hi = causal && pos + 1 < t_kv ? pos + 1 : t_kv;
  const int64_t lo = window > 0 && pos >= window ? pos - window + 1 : 0;  // pos - window cannot wrap
  if (hi < lo) hi = lo;
  return {lo, hi};
}

// The online softmax of one query row of attention (flash attention), fed a block of scores at a
// time: the running maximum, the running sum of exp(score - max), and the factor by which the sum
// and the row's weighted sum of values shrink when a block raises the maximum. Special values come
// out as in the composition (src/nn/attention.cpp): a NaN score, or exp(inf - inf), makes the row
// NaN; -inf scores weigh 0; a row without a finite score (or with no key) is empty, and gives zeros.
template <typename M>
struct AttentionAcc {
  M max;
  M sum;

  static WICK_HD AttentionAcc init() { return {-std::numeric_limits<M>::infinity(), M(0)}; }

  // Takes the largest score of the next block (NaNs left out of it: they reach the sum through
  // weight()); returns the factor for the weighted sum of values, 1 when the maximum stays.
  WICK_HD M raise_max(M block_max) {
    if (!(block_max > max)) return M(1);
    // exp(-inf - block_max) = 0 while the row had no finite score: what was summed was 0 (or NaN).
    const M factor = math::exp(max - block_max);
    max = block_max;
    sum *= factor;
    return factor;
  }
  // What scores are shifted by: the maximum, or 0 while it is -inf, so that -inf scores weigh
  // exp(-inf) = 0 rather than exp(-inf + inf) = NaN (the composition's guard).
  WICK_HD M shift() const { return max == -std::numeric_limits<M>::infinity() ? M(0) : max; }
  // A score's weight, exp(score - shift()).
  WICK_HD M weight(M score) const { return math::exp(score - shift()); }
  // Adds weights (one, or the sum of a block's) to the running sum.
  WICK_HD void add(M w) { sum += w; }
};

// One output element from the row's weighted sum of values: zero for an empty row.
template <typename M>
WICK_HD inline M attention_value(M weighted, AttentionAcc<M> acc) {
  return acc.sum == M(0) ? M(0) : weighted / acc.sum;
}

}  // namespace wick::kernels
