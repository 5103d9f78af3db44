// The per-element math of attention, in plain C++ with WICK_HD so that a host loop can share it
// with the GPU kernels: which keys a query sees, and the guarded steps of the online softmax
// (running maximum from -inf, rescaling, the final division), so that a query that sees no key
// gives zeros and no step ever computes -inf - -inf.
#pragma once

#include <cstdint>
#include <limits>

#include "kernels/numeric.h"

namespace wick::kernels {

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

// a * b + c in one rounding (dot products and accumulations).
WICK_HD inline float attention_fma(float a, float b, float c) { return ::fmaf(a, b, c); }
WICK_HD inline double attention_fma(double a, double b, double c) { return ::fma(a, b, c); }

}  // namespace wick::kernels
