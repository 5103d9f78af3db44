// Many rows of x times K-quant weights (Q4_K, Q5_K, Q6_K) on machines whose best kernels are
// AVX2's: x rounded to 8 bits per super-block of 256 values (one scale per super-block, as ggml's
// Q8_K), so that a super-block's groups are summed in integers, each weighted by its integer scale,
// and meet floats once. For Q4_K and Q5_K (eight 32-value groups, 6-bit scales sc_j and minimums
// m_j):
//
//   row . x = sum over super-blocks of  (d * dx) * sum_j sc_j dot_j  -  sum_j (dmin * m_j) * (dx * xsum_j)
//
// with dot_j the integer dot product of group j's unsigned values with x's bytes and xsum_j the sum
// of those bytes; for Q6_K (sixteen 16-value groups, 8-bit signed scales, values u - 32):
//
//   row . x = sum over super-blocks of  (d * dx) * sum_g sc_g (dot_g - 32 xsum_g).
//
// Per 32 values and pair of rows that is one maddubs (bytes to 16-bit pairs) and one madd by the
// scales (to 32 bits), where qdot.h's per-32 rounding of x takes a float multiply per group as
// well. x's coarser rounding is llama.cpp's for every K-quant product; the decode kernels (at most
// qdot::kMaxRows rows of x) and batch-invariant mode keep qdot.h's per-32 rounding. Arranged Q4_K
// and Q6_K (arranged.h: a model's own copy of its weights) take their own kernel for every row
// count instead; this one takes those read in place from a file, and Q5_K.
#pragma once

#include <cstdint>
#include <vector>

#include "wick/quant.h"

namespace wick::cpu::superblock {

inline constexpr int64_t kValues = 256;  // a super-block
inline constexpr int64_t kGroup = 32;    // values per sum of s (and under one Q4_K or Q5_K scale)

// x (m, k) rounded per super-block: q (m * k bytes), d (one per super-block: max |x| / 127), s
// (d times the sum of each group's 32 q: m * k / 32) and sum16 (the sum of each 16 q: m * k / 16).
struct RoundedX {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<float> s;
  std::vector<int16_t> sum16;

  RoundedX(int64_t m, int64_t k);
};

// Rounds row t of x (k values, a multiple of kValues) into r: q = round(x / d), halves away from
// zero, with d = max |x| / 127 over each super-block (q = 0 where the super-block is all zeros).
void round_row(const float* x, int64_t k, RoundedX& r, int64_t t);

// Whether rows of k values of qtype take this kernel on this machine: Q4_K, Q5_K and Q6_K where
// qdot::active_isa() is exactly Avx2 (AVX-512 VNNI machines have panels of their own).
bool takes(quant::QType qtype, int64_t k);

// Rows [r0, r1) of the weight w (rows of k values of qtype, which takes() allows) times the m rows
// of x: out[t * n + r].
void rows(quant::QType qtype, const uint8_t* w, int64_t r0, int64_t r1, int64_t k, const RoundedX& x, int64_t m,
          float* out, int64_t n);

// The same sums in plain loops (Q4_K, Q5_K and Q6_K, any machine): the reference the tests hold rows()
// to, equal up to the order of the float sums.
void rows_portable(quant::QType qtype, const uint8_t* w, int64_t r0, int64_t r1, int64_t k, const RoundedX& x,
                   int64_t m, float* out, int64_t n);

}  // namespace wick::cpu::superblock
