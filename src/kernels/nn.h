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
#include "kernels/unary.h"

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

// silu_mul: silu(gate) * up, silu as the unary op computes it, so that the fused kernels give the
// composition's bits (silu, then the product, in the math type).
template <typename M>
WICK_HD inline M silu_mul_value(M gate, M up) {
  return Unary<UnaryOp::Silu>{}(gate)*up;
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

// The position of query i of t_q against t_kv keys: the last t_q positions.
WICK_HD inline int64_t attention_position(int64_t i, int64_t t_q, int64_t t_kv) { return t_kv - t_q + i; }

// Whether the query at position `pos` sees the key at position `key`: causal, keys up to its own
// position; window w > 0, keys above pos - w.
WICK_HD inline bool attention_sees(int64_t key, int64_t pos, bool causal, int64_t window) {
  return (!causal || key <= pos) && (window <= 0 || key > pos - window);
}

// The keys [begin, end) that queries at positions first .. last may see among t_kv (empty when
// end <= begin).
WICK_HD inline int64_t attention_keys_begin(int64_t first, int64_t window) {
  const int64_t b = window > 0 ? first - window + 1 : 0;
  return b > 0 ? b : 0;
}
WICK_HD inline int64_t attention_keys_end(int64_t last, bool causal, int64_t t_kv) {
  if (!causal) return t_kv;
  return last + 1 < t_kv ? last + 1 : t_kv;
}

template <typename M>
WICK_HD inline M attention_neg_inf() {
  return -std::numeric_limits<M>::infinity();
}

// The factor that carries sums accumulated under the running maximum `old_max` to `new_max`
// (new_max >= old_max): 0 while nothing has been seen, where old_max is still -inf.
template <typename M>
WICK_HD inline M attention_rescale(M old_max, M new_max) {
  return old_max == attention_neg_inf<M>() ? M(0) : math::exp(old_max - new_max);
}

// The weight of a score under the running maximum: a hidden key (-inf) weighs 0.
template <typename M>
WICK_HD inline M attention_weight(M score, M max) {
  return score == attention_neg_inf<M>() ? M(0) : math::exp(score - max);
}

// The output of an accumulated row: zeros where no key was seen (sum 0).
template <typename M>
WICK_HD inline M attention_output(M acc, M sum) {
  return sum == M(0) ? M(0) : acc / sum;
}

// Gemma 2's soft-capping of a scaled score: cap * tanh(x / cap); x itself where cap is 0.
template <typename M>
WICK_HD inline M attention_softcap(M x, M cap) {
  return cap > M(0) ? cap * math::tanh(x / cap) : x;
}

// a * b + c in one rounding (dot products and accumulations).
WICK_HD inline float attention_fma(float a, float b, float c) { return ::fmaf(a, b, c); }
WICK_HD inline double attention_fma(double a, double b, double c) { return ::fma(a, b, c); }

// The keys [lo, hi) that a query at position pos sees among t_kv (lo == hi when none is left).
struct KeyRange {
  int64_t lo;
  int64_t hi;
};
WICK_HD inline KeyRange attention_keys(int64_t pos, int64_t t_kv, bool causal, int64_t window) {
  const int64_t lo = attention_keys_begin(pos, window), hi = attention_keys_end(pos, causal, t_kv);
  return {lo, hi > lo ? hi : lo};
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
