// x86-64 products of the block formats with x rounded to 8 bits, chosen at run time: AVX2 with FMA,
// and AVX-512 with VNNI. Each unit of 32 weights is unpacked to 32 bytes in a vector register
// (Q4_0, Q8_0, Q4_K, Q5_K and Q6_K with their own shifts and masks; the other formats through
// kernels/quant.h's group_word), multiplied with each row of x's 32 bytes by maddubs (unsigned times
// signed bytes, pairs summed to 16 bits, never saturating for these ranges) and madd (to 8 sums of
// 32 bits: the first 4 cover values 0-15, the last 4 values 16-31), and accumulated in floats per
// lane with each half's scale. The AVX-512 kernel takes two units per 64-byte vector and one dpbusd
// (unsigned times signed bytes, 4 products summed into 32 bits) in place of maddubs and madd; the
// signed 8-bit weights are offset by 128 there, the offset's product taken back through x's sums.
// The value is unit_dot's: d_w * d_x * dot - bias * s, summed in another order.
//
// On AVX-512 machines, more kernels below: decode kernels of their own for Q4_0, Q8_0, Q4_K, Q5_K
// and Q6_K, which fill whole vectors with several blocks, and panels of 16 weight rows for many rows
// of x. x's rounding (round_row) is here too, with its portable loop for other machines.
#include "cpu/quant/qdot.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "cpu/prefetch.h"
#include "cpu/scratch.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define WICK_QDOT_X86 1
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wmaybe-uninitialized reports
// once they are inlined here: a false report, silenced for this file from the header on.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <cpuid.h>
#include <immintrin.h>
#else
#define WICK_QDOT_X86 0
#endif
// aarch64's kernels, best_isa() and simd_rows are qdot_arm.cpp's.
#if defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#define WICK_QDOT_ARM 1
#else
#define WICK_QDOT_ARM 0
#endif

namespace wick::cpu::qdot {

bool isa_named(std::string_view name, Isa* isa) {
  for (Isa i : {Isa::None, Isa::Neon, Isa::Avx2, Isa::Avx512Vnni})
    if (name == isa_name(i)) {
      *isa = i;
      return true;
    }
  return false;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::None: return "none";
    case Isa::Neon: return "neon";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512Vnni: return "avx512_vnni";
  }
  return "none";
}

namespace {
// WICK_CPU_ISA's limit; a value that names none is refused where the CPU backend is made.
Isa limit_from_environment() {
  const char* v = std::getenv("WICK_CPU_ISA");
  Isa isa = Isa::Avx512Vnni;
  if (v != nullptr) (void)isa_named(v, &isa);
  return isa;
}
std::atomic<Isa> isa_limit{limit_from_environment()};
}  // namespace

Isa set_isa_limit(Isa limit) { return isa_limit.exchange(limit); }

namespace {
// Whether this build has kernels of `isa` (None: the portable loops, always).
constexpr bool built(Isa isa) {
  if (isa == Isa::Neon) return WICK_QDOT_ARM;
  if (isa == Isa::Avx2 || isa == Isa::Avx512Vnni) return WICK_QDOT_X86;
  return true;
}
}  // namespace

Isa active_isa() {
  const Isa isa = std::min(best_isa(), isa_limit.load(std::memory_order_relaxed));
  return built(isa) ? isa : Isa::None;
}

#if WICK_QDOT_X86

namespace {

namespace kq = kernels::quant;
using quant::QType;

#define WICK_AVX2 __attribute__((target("avx2,fma")))

WICK_AVX2 inline __m256i load32b(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// (v >> shift) & mask in every byte (shift below 8: the bits a 16-bit shift moves in from the next
// byte land above the mask).
WICK_AVX2 inline __m256i bits(__m256i v, int shift, int mask) {
  return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(shift)), _mm256_set1_epi8(static_cast<char>(mask)));
}

// Eight groups' d and m into to[0..7], interleaved as GroupScale holds them.
WICK_AVX2 inline void store_scales(__m256 d, __m256 m, kq::GroupScale* to) {
  const __m256 lo = _mm256_unpacklo_ps(d, m), hi = _mm256_unpackhi_ps(d, m);  // groups 0 1 4 5, 2 3 6 7
  _mm256_storeu_ps(&to[0].d, _mm256_permute2f128_ps(lo, hi, 0x20));
  _mm256_storeu_ps(&to[4].d, _mm256_permute2f128_ps(lo, hi, 0x31));
}

// The eight bytes of two little-endian words as floats.
WICK_AVX2 inline __m256 byte_floats(uint32_t low, uint32_t high) {
  const __m128i bytes = _mm_setr_epi32(static_cast<int>(low), static_cast<int>(high), 0, 0);
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
}

// kq::block_scales in vectors for the K-quants whose scales are integers under one f16 d (Q4_K and
// Q5_K: six bits, with minimums under dmin; Q6_K: signed bytes): the same products d * sc, the same
// bits, without a branch per group. Other formats: kq::block_scales.
template <QType Q>
WICK_AVX2 inline void scales_of(const typename kq::Format<Q>::Block& b, kq::GroupScale* s) {
  if constexpr (Q == QType::Q4_K || Q == QType::Q5_K) {
    uint32_t w[3];
    std::memcpy(w, b.scales, sizeof(w));
    const __m256 sc = byte_floats(kq::k4_scale_word(w, false, 0), kq::k4_scale_word(w, false, 1));
    const __m256 mn = byte_floats(kq::k4_scale_word(w, true, 0), kq::k4_scale_word(w, true, 1));
    store_scales(_mm256_mul_ps(_mm256_set1_ps(kq::ExactHalf{}(b.d)), sc),
                 _mm256_mul_ps(_mm256_set1_ps(kq::ExactHalf{}(b.dmin)), mn), s);
  } else if constexpr (Q == QType::Q6_K) {
    const __m256 d = _mm256_set1_ps(kq::ExactHalf{}(b.d));
    for (int h = 0; h < 2; ++h) {
      const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.scales + 8 * h));
      store_scales(_mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes))), _mm256_setzero_ps(), s + 8 * h);
    }
  } else {
    kq::block_scales<Q>(b, s);
  }
}

// Unit j of block b as 32 bytes: u, unsigned below 64, or signed for the 8-bit formats.
template <QType Q>
WICK_AVX2 inline __m256i unit_bytes(const typename kq::Format<Q>::Block& b, int j) {
  if constexpr (Q == QType::Q4_0) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m128i low = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), low), _mm_and_si128(q, low));
  } else if constexpr (Q == QType::Q8_0) {
    return load32b(b.qs);
  } else if constexpr (Q == QType::Q4_K || Q == QType::Q5_K) {
    const __m256i u = bits(load32b(b.qs + 32 * (j / 2)), 4 * (j % 2), 0x0f);
    if constexpr (Q == QType::Q4_K) {
      return u;
    } else {
      return _mm256_or_si256(u, _mm256_slli_epi16(bits(load32b(b.qh), j, 0x01), 4));
    }
  } else if constexpr (Q == QType::Q6_K) {
    const int h = j / 4, k = j % 4;
    const __m256i low = bits(load32b(b.ql + 64 * h + 32 * (k % 2)), 4 * (k / 2), 0x0f);
    return _mm256_or_si256(low, _mm256_slli_epi16(bits(load32b(b.qh + 32 * h), 2 * k, 0x03), 4));
  } else {
    using F = kq::Format<Q>;
    alignas(32) uint32_t words[8];
    if constexpr (F::kGroup == 32) {
      for (int w = 0; w < 8; ++w) words[w] = kq::group_word<Q>(b, j, w);
    } else {
      for (int w = 0; w < 4; ++w) words[w] = kq::group_word<Q>(b, 2 * j, w), words[w + 4] = kq::group_word<Q>(b, 2 * j + 1, w);
    }
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(words));
  }
}

// The 8 sums of 4 byte products of u and a (u signed where the format is).
template <bool kSigned>
WICK_AVX2 inline __m256i dot_bytes(__m256i u, __m256i a) {
  __m256i pairs;
  if constexpr (kSigned) {
    pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(u, u), _mm256_sign_epi8(a, u));
  } else {
    pairs = _mm256_maddubs_epi16(u, a);
  }
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

WICK_AVX2 inline float sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The two floats at p as the low half of a vector, the high half zero.
WICK_AVX2 inline __m128 load2(const float* p) { return _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }

WICK_AVX2 inline float sum4(__m128 s) {
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Unit j of block b (unit `unit` of the row, its groups' scales s0 and s1) times the M rows of x,
// into acc and bias (bias: lanes 0 and 1 hold the terms of the unit's two halves).
template <QType Q, int M>
WICK_AVX2 inline void add_unit(const typename kq::Format<Q>::Block& b, int j, kq::GroupScale s0, kq::GroupScale s1,
                               int64_t unit, int64_t k, XRows x, __m256* acc, __m128* bias) {
  using F = kq::Format<Q>;
  const int64_t units = k / kq::kUnit;
  const __m256i u = unit_bytes<Q>(b, j);
  const __m128 bs = _mm_setr_ps(kq::group_bias<Q>(s0), kq::group_bias<Q>(s1), 0.f, 0.f);
  for (int t = 0; t < M; ++t) {
    const int64_t at = t * units + unit;
    const float d = x.d[at];
    const __m256i p = dot_bytes<F::kSigned>(u, load32b(x.q + t * k + unit * kq::kUnit));
    const __m256 scale = _mm256_set_m128(_mm_set1_ps(s1.d * d), _mm_set1_ps(s0.d * d));
    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), scale, acc[t]);
    bias[t] = _mm_fmadd_ps(bs, load2(x.s + 2 * at), bias[t]);
  }
}

// Rows [r0, r1) times the M rows of x. A block's group scales are read once. For few rows of x,
// units alternate between two sets of accumulators, so that consecutive units do not wait on each
// other's sums; more rows are independent sums already (and two sets would not fit the 16 vector
// registers).
template <QType Q, int M>
WICK_AVX2 void rows_avx2(const uint8_t* w, int64_t r0, int64_t r1, int64_t k, XRows x, float* out, int64_t n) {
  using F = kq::Format<Q>;
  constexpr int kUnits = F::kValues / kq::kUnit;
  constexpr int kSets = M <= 4 ? 2 : 1;
  const int64_t nb = k / F::kValues;
  const auto* blocks = reinterpret_cast<const typename F::Block*>(w);
  for (int64_t r = r0; r < r1; ++r) {
    __m256 acc[kSets][M];
    __m128 bias[kSets][M];
    for (int e = 0; e < kSets; ++e)
      for (int t = 0; t < M; ++t) acc[e][t] = _mm256_setzero_ps(), bias[e][t] = _mm_setzero_ps();
    const typename F::Block* row = blocks + r * nb;
    if constexpr (kUnits == 1) {
      int64_t i = 0;
      for (; i + kSets <= nb; i += kSets) {
        prefetch_ahead<kSets * sizeof(typename F::Block)>(row + i);
#pragma GCC unroll 2
        for (int e = 0; e < kSets; ++e) {
          const kq::GroupScale s = kq::group_scale<Q>(row[i + e], 0);
          add_unit<Q, M>(row[i + e], 0, s, s, i + e, k, x, acc[e], bias[e]);
        }
      }
      for (; i < nb; ++i) {
        const kq::GroupScale s = kq::group_scale<Q>(row[i], 0);
        add_unit<Q, M>(row[i], 0, s, s, i, k, x, acc[0], bias[0]);
      }
    } else {
      for (int64_t i = 0; i < nb; ++i) {
        prefetch_ahead<sizeof(typename F::Block)>(row + i);
        kq::GroupScale s[F::kGroups];
        scales_of<Q>(row[i], s);
        constexpr int kStep = F::kGroup == 32 ? 1 : 2;  // groups per unit
#pragma GCC unroll 8
        for (int j = 0; j < kUnits; ++j)
          add_unit<Q, M>(row[i], j, s[kStep * j], s[kStep * j + kStep - 1], i * kUnits + j, k, x, acc[j % kSets],
                         bias[j % kSets]);
      }
    }
    for (int t = 0; t < M; ++t) {
      __m256 sum = acc[0][t];
      __m128 b = bias[0][t];
      for (int e = 1; e < kSets; ++e) sum = _mm256_add_ps(sum, acc[e][t]), b = _mm_add_ps(b, bias[e][t]);
      out[t * n + r] = sum8(sum) - sum4(b);
    }
  }
}

#define WICK_AVX512 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")))

// Units j0 of b0 and j1 of b1 (units `unit` and unit + 1 of the row; s: the scales of their groups,
// two per unit) times the M rows of x, into acc and bias (bias: one lane per half unit).
template <QType Q, int M>
WICK_AVX512 inline void add_pair(const typename kq::Format<Q>::Block& b0, int j0, const typename kq::Format<Q>::Block& b1,
                                 int j1, const kq::GroupScale* s, int64_t unit, int64_t k, XRows x, __m512* acc,
                                 __m128* bias) {
  using F = kq::Format<Q>;
  const int64_t units = k / kq::kUnit;
  __m512i u = _mm512_inserti64x4(_mm512_castsi256_si512(unit_bytes<Q>(b0, j0)), unit_bytes<Q>(b1, j1), 1);
  __m128 bs = _mm_setr_ps(kq::group_bias<Q>(s[0]), kq::group_bias<Q>(s[1]), kq::group_bias<Q>(s[2]),
                          kq::group_bias<Q>(s[3]));
  const __m128 ws = _mm_setr_ps(s[0].d, s[1].d, s[2].d, s[3].d);
  if constexpr (F::kSigned) {  // u + 128, unsigned; the extra 128 * d_w * d_x * sum(q) leaves through the bias
    u = _mm512_xor_si512(u, _mm512_set1_epi8(static_cast<char>(0x80)));
    bs = _mm_fmadd_ps(_mm_set1_ps(128.f), ws, bs);
  }
  const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  for (int t = 0; t < M; ++t) {
    const int64_t at = t * units + unit;
    const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, _mm512_loadu_si512(x.q + t * k + unit * kq::kUnit));
    const __m128 d = load2(x.d + at);                        // d of the two units
    const __m128 sc = _mm_mul_ps(ws, _mm_unpacklo_ps(d, d));  // each half's d_w * d_x
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(sc)), acc[t]);
    bias[t] = _mm_fmadd_ps(bs, _mm_loadu_ps(x.s + 2 * at), bias[t]);
  }
}

// As rows_avx2, two units at a time; pairs alternate between two sets of accumulators. A row of a
// 32-value format with an odd count of blocks ends with one unit through the AVX2 step.
template <QType Q, int M>
WICK_AVX512 void rows_avx512(const uint8_t* w, int64_t r0, int64_t r1, int64_t k, XRows x, float* out, int64_t n) {
  using F = kq::Format<Q>;
  constexpr int kUnits = F::kValues / kq::kUnit;
  constexpr int kStep = F::kGroup == 32 ? 1 : 2;  // groups per unit
  const int64_t nb = k / F::kValues;
  const auto* blocks = reinterpret_cast<const typename F::Block*>(w);
  for (int64_t r = r0; r < r1; ++r) {
    __m512 acc[2][M];
    __m128 bias[2][M];
    for (int e = 0; e < 2; ++e)
      for (int t = 0; t < M; ++t) acc[e][t] = _mm512_setzero_ps(), bias[e][t] = _mm_setzero_ps();
    const typename F::Block* row = blocks + r * nb;
    if constexpr (kUnits == 1) {
      int64_t i = 0;
      for (; i + 4 <= nb; i += 4) {
        prefetch_ahead<4 * sizeof(typename F::Block)>(row + i);
#pragma GCC unroll 2
        for (int e = 0; e < 2; ++e) {
          const kq::GroupScale g0 = kq::group_scale<Q>(row[i + 2 * e], 0), g1 = kq::group_scale<Q>(row[i + 2 * e + 1], 0);
          const kq::GroupScale s[4] = {g0, g0, g1, g1};
          add_pair<Q, M>(row[i + 2 * e], 0, row[i + 2 * e + 1], 0, s, i + 2 * e, k, x, acc[e], bias[e]);
        }
      }
      __m256 tail[M];
      __m128 tail_bias[M];
      for (int t = 0; t < M; ++t) tail[t] = _mm256_setzero_ps(), tail_bias[t] = _mm_setzero_ps();
      for (; i < nb; ++i) {
        const kq::GroupScale g = kq::group_scale<Q>(row[i], 0);
        add_unit<Q, M>(row[i], 0, g, g, i, k, x, tail, tail_bias);
      }
      for (int t = 0; t < M; ++t) {
        acc[0][t] = _mm512_add_ps(acc[0][t], _mm512_castps256_ps512(tail[t]));  // upper half: zero
        bias[0][t] = _mm_add_ps(bias[0][t], tail_bias[t]);
      }
    } else {
      for (int64_t i = 0; i < nb; ++i) {
        prefetch_ahead<sizeof(typename F::Block)>(row + i);
        kq::GroupScale g[F::kGroups];
        scales_of<Q>(row[i], g);
        kq::GroupScale s[kUnits][2];  // the two scales of each unit (one group twice for 32-value groups)
        for (int j = 0; j < kUnits; ++j) s[j][0] = g[kStep * j], s[j][1] = g[kStep * j + kStep - 1];
#pragma GCC unroll 4
        for (int j = 0; j < kUnits; j += 2)
          add_pair<Q, M>(row[i], j, row[i], j + 1, &s[j][0], i * kUnits + j, k, x, acc[j / 2 % 2], bias[j / 2 % 2]);
      }
    }
    for (int t = 0; t < M; ++t)
      out[t * n + r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[0][t], acc[1][t])) - sum4(_mm_add_ps(bias[0][t], bias[1][t]));
  }
}

// ---- Q4_0 and Q8_0, few rows of x: several blocks per vector -----------------------------------
// A Q4_0 block's 16 bytes hold its values 0-15 in their low nibbles and 16-31 in their high ones. The
// bytes of four blocks, one per 16-byte lane, masked give one vector of the four blocks' low values
// and shifted another of their high values; x's offset bytes in halves order (Offset::Halves) line
// up with them as they lie, so two dpbusd take four blocks at once. Q8_0 puts two blocks in a
// vector against x's offset bytes in their natural order. The weights are signed (Q4_0's q - 8) and
// x unsigned (q + 128): the offset's product, 128 * sum(w) in each lane, belongs to the weight
// alone, so it is made once per weight row and starts every row of x's integer sum. Each 32-bit
// lane then holds part of one block's sum and is scaled by its block's d_w * d_x before one sum
// across lanes at the end of the row. A step's 16 f16 scales are gathered and converted at once.

// acc plus 128 * the sum of each lane's 4 signed bytes of w: the offset's product, of which minus
// starts an offset x's integer sums.
WICK_AVX512 inline __m512i add_offset(__m512i acc, __m512i w) {
  return _mm512_dpbusd_epi32(acc, _mm512_set1_epi8(static_cast<char>(0x80)), w);
}

// Rows of k values that rows_step16_avx512 takes: whole steps of 16 blocks.
inline bool stepped(int64_t k) { return k % (16 * kq::kUnit) == 0; }

template <QType Q, int M>
WICK_AVX512 void rows_step16_avx512(const uint8_t* w, int64_t r0, int64_t r1, int64_t k, XRows x, float* out,
                                    int64_t n) {
  static_assert(Q == QType::Q4_0 || Q == QType::Q8_0);
  using Block = typename kq::Format<Q>::Block;
  constexpr int kStep = 16;                       // blocks per step: their scales gathered at once
  constexpr int kPer = Q == QType::Q4_0 ? 4 : 2;  // blocks per vector
  constexpr int kLanes = 16 / kPer;               // 32-bit lanes per block
  constexpr int kVectors = Q == QType::Q4_0 ? 2 : 1;
  const int64_t nb = k / kq::kUnit, units = nb;
  alignas(64) int32_t lanes[16];
  for (int l = 0; l < 16; ++l) lanes[l] = l * static_cast<int32_t>(sizeof(Block));
  const __m512i d_at = _mm512_load_si512(lanes);  // the byte offsets of a step's 16 scales
  __m512i spread[kStep / kPer];                   // lane l of vector g reads block kPer * g + l / kLanes's scale
  for (int g = 0; g < kStep / kPer; ++g) {
    for (int l = 0; l < 16; ++l) lanes[l] = kPer * g + l / kLanes;
    spread[g] = _mm512_load_si512(lanes);
  }
  for (int64_t r = r0; r < r1; ++r) {
    const auto* row = reinterpret_cast<const Block*>(w) + r * nb;
    __m512 acc[M];
    for (int t = 0; t < M; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i += kStep) {
      const Block* b = row + i;
      prefetch_ahead<kStep * sizeof(Block)>(b);
      const __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(d_at, &b->d, 1)));
      __m512 dwx[M];
      for (int t = 0; t < M; ++t) dwx[t] = _mm512_mul_ps(dw, _mm512_loadu_ps(x.d + t * units + i));
#pragma GCC unroll 8
      for (int g = 0; g < kStep / kPer; ++g) {
        const Block* q = b + kPer * g;
        __m512i v[kVectors];  // Q4_0: the low and the high values of four blocks, - 8; Q8_0: two blocks
        if constexpr (Q == QType::Q4_0) {
          auto bytes = [&](int j) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(q[j].qs)); };
          __m512i packed = _mm512_castsi128_si512(bytes(0));
          packed = _mm512_inserti32x4(packed, bytes(1), 1);  // the lane must be a constant (clang)
          packed = _mm512_inserti32x4(packed, bytes(2), 2);
          packed = _mm512_inserti32x4(packed, bytes(3), 3);
          const __m512i low = _mm512_set1_epi8(0x0f), eight = _mm512_set1_epi8(8);
          v[0] = _mm512_sub_epi8(_mm512_and_si512(packed, low), eight);
          v[1] = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(packed, 4), low), eight);
        } else {
          const __m512i first = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q[0].qs)));
          v[0] = _mm512_inserti64x4(first, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q[1].qs)), 1);
        }
        __m512i offset = _mm512_setzero_si512();
        for (const __m512i u : v) offset = add_offset(offset, u);
        const __m512i start = _mm512_sub_epi32(_mm512_setzero_si512(), offset);
        for (int t = 0; t < M; ++t) {
          const uint8_t* a = x.u + (t * units + i + kPer * g) * kq::kUnit;  // the vector's first unit of row t
          __m512i sum = _mm512_dpbusd_epi32(start, _mm512_loadu_si512(a), v[0]);
          if constexpr (kVectors == 2) sum = _mm512_dpbusd_epi32(sum, _mm512_loadu_si512(a + 64), v[1]);
          acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_permutexvar_ps(spread[g], dwx[t]), acc[t]);
        }
      }
    }
    for (int t = 0; t < M; ++t) out[t * n + r] = _mm512_reduce_add_ps(acc[t]);
  }
}

// ---- Q6_K, few rows of x: a block as four vectors ---------------------------------------------
// A Q6_K block's 256 values unpack to four 64-byte vectors in value order: each half of 128 values
// from 64 bytes of low nibbles and 32 bytes of high bit pairs (the low nibbles of bytes 0-63 with
// bit pairs 0 and 1, then the high nibbles with bit pairs 2 and 3), less 32 to be signed. Against x's
// offset bytes as they lie (Offset::Natural), a dpbusd per vector leaves 4 lanes per 16-value group,
// started from minus the offset's product, which the block's weights alone give (as in the Q4_0
// kernel); each lane is scaled by d * scale of its group times d_x of its unit before one sum
// across lanes at the end of the row.
template <int M>
WICK_AVX512 void rows_q6_k_avx512(const uint8_t* w, int64_t r0, int64_t r1, int64_t k, XRows x, float* out, int64_t n) {
  using Block = kq::BlockQ6_K;
  const int64_t nb = k / 256, units = k / kq::kUnit;
  const __m512i low4 = _mm512_set1_epi8(0x0f), low2 = _mm512_set1_epi8(0x03), bias = _mm512_set1_epi8(32);
  alignas(64) int32_t lanes[16];
  __m512i group_of[4];  // lane l of vector j belongs to group 4j + l / 4
  for (int j = 0; j < 4; ++j) {
    for (int l = 0; l < 16; ++l) lanes[l] = 4 * j + l / 4;
    group_of[j] = _mm512_load_si512(lanes);
  }
  for (int l = 0; l < 16; ++l) lanes[l] = l / 2;
  const __m512i unit_of = _mm512_load_si512(lanes);  // group g lies in unit g / 2
  for (int64_t r = r0; r < r1; ++r) {
    const Block* row = reinterpret_cast<const Block*>(w) + r * nb;
    __m512 acc[M];
    for (int t = 0; t < M; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      const Block& b = row[i];
      prefetch_ahead<sizeof(Block)>(&b);
      __m512i v[4], start[4];
      for (int h = 0; h < 2; ++h) {
        const __m512i lo = _mm512_loadu_si512(b.ql + 64 * h);
        const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
        const __m512i bits = _mm512_inserti64x4(_mm512_castsi256_si512(hi), _mm256_srli_epi16(hi, 2), 1);
        v[2 * h] = _mm512_or_si512(_mm512_and_si512(lo, low4), _mm512_slli_epi16(_mm512_and_si512(bits, low2), 4));
        v[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(lo, 4), low4),
                                       _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(bits, 4), low2), 4));
      }
      for (int j = 0; j < 4; ++j) {
        v[j] = _mm512_sub_epi8(v[j], bias);
        start[j] = _mm512_sub_epi32(_mm512_setzero_si512(), add_offset(_mm512_setzero_si512(), v[j]));
      }
      const __m512 scales = _mm512_mul_ps(
          _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)))),
          _mm512_set1_ps(kq::half(b.d)));
      for (int t = 0; t < M; ++t) {
        const int64_t u0 = t * units + 8 * i;  // the block's first unit of row t
        const __m512 group_scale =
            _mm512_mul_ps(scales, _mm512_permutexvar_ps(unit_of, _mm512_castps256_ps512(_mm256_loadu_ps(x.d + u0))));
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const __m512i sum = _mm512_dpbusd_epi32(start[j], _mm512_loadu_si512(x.u + (u0 + 2 * j) * kq::kUnit), v[j]);
          acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_permutexvar_ps(group_of[j], group_scale), acc[t]);
        }
      }
    }
    for (int t = 0; t < M; ++t) out[t * n + r] = _mm512_reduce_add_ps(acc[t]);
  }
}

// ---- Q4_K and Q5_K, few rows of x: a block as four vectors ------------------------------------
// A Q4_K block's 128 bytes, as two vectors, masked and shifted give four: the low nibbles of bytes
// 0-63 are groups 0 and 2, their high nibbles groups 1 and 3 (then 4-7 from bytes 64-127). Q5_K adds
// each group's fifth bit, bit g of its 32 bytes qh. x's bytes, regrouped by one shuffle per vector,
// line up with them; each lane is scaled by its group's d * scale * d_x, and the minimums' part,
// dmin * m times x's sum over the group, is summed apart in eight lanes. The 6-bit scales and
// minimums unpack in 32-bit words, four at a time.
template <QType Q, int M>
WICK_AVX512 void rows_k4_avx512(const uint8_t* w, int64_t r0, int64_t r1, int64_t k, XRows x, float* out, int64_t n) {
  static_assert(Q == QType::Q4_K || Q == QType::Q5_K);
  using Block = typename kq::Format<Q>::Block;
  const int64_t nb = k / 256, units = k / kq::kUnit;
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  alignas(64) int32_t lanes[16];
  __m512i group_of[4];  // vector j: lanes 0-7 group a, 8-15 group a + 2, a = (0, 1, 4, 5)[j]
  for (int j = 0; j < 4; ++j) {
    const int a = (j / 2) * 4 + j % 2;
    for (int l = 0; l < 16; ++l) lanes[l] = a + 2 * (l / 8);
    group_of[j] = _mm512_load_si512(lanes);
  }
  for (int64_t r = r0; r < r1; ++r) {
    const Block* row = reinterpret_cast<const Block*>(w) + r * nb;
    __m512 acc[M];
    __m256 mins_acc[M];
    for (int t = 0; t < M; ++t) acc[t] = _mm512_setzero_ps(), mins_acc[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      const Block& b = row[i];
      prefetch_ahead<sizeof(Block)>(&b);
      uint32_t s[3];
      __builtin_memcpy(s, b.scales, sizeof s);
      const uint64_t scale_bytes = kq::k4_scale_word(s, false, 0) | uint64_t{kq::k4_scale_word(s, false, 1)} << 32;
      const uint64_t min_bytes = kq::k4_scale_word(s, true, 0) | uint64_t{kq::k4_scale_word(s, true, 1)} << 32;
      const __m256 scale =
          _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(scale_bytes)))),
                        _mm256_set1_ps(kq::half(b.d)));
      const __m256 min =
          _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(min_bytes)))),
                        _mm256_set1_ps(kq::half(b.dmin)));
      __m512i v[4];
      for (int h = 0; h < 2; ++h) {
        const __m512i q = _mm512_loadu_si512(b.qs + 64 * h);
        v[2 * h] = _mm512_and_si512(q, low4);
        v[2 * h + 1] = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
      }
      if constexpr (Q == QType::Q5_K) {
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh));
        const __m512i one = _mm512_set1_epi8(1);
        for (int j = 0; j < 4; ++j) {  // vector j holds groups a and a + 2
          const int a = (j / 2) * 4 + j % 2;
          const __m256i first = _mm256_srl_epi16(qh, _mm_cvtsi32_si128(a)),
                        second = _mm256_srl_epi16(qh, _mm_cvtsi32_si128(a + 2));
          const __m512i fifth = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(first), second, 1), one);
          v[j] = _mm512_or_si512(v[j], _mm512_slli_epi16(fifth, 4));
        }
      }
      for (int t = 0; t < M; ++t) {
        const int64_t u0 = t * units + 8 * i;  // the block's first unit of row t
        const __m512 group_scale = _mm512_castps256_ps512(_mm256_mul_ps(scale, _mm256_loadu_ps(x.d + u0)));
        mins_acc[t] = _mm256_fmadd_ps(min, _mm256_loadu_ps(x.sum + u0), mins_acc[t]);
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          const int8_t* a = x.q + (u0 + 4 * h) * kq::kUnit;
          const __m512i a0 = _mm512_loadu_si512(a), a1 = _mm512_loadu_si512(a + 64);
          const __m512i lo = _mm512_dpbusd_epi32(_mm512_setzero_si512(), v[2 * h], _mm512_shuffle_i64x2(a0, a1, 0x44));
          const __m512i hi =
              _mm512_dpbusd_epi32(_mm512_setzero_si512(), v[2 * h + 1], _mm512_shuffle_i64x2(a0, a1, 0xee));
          acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo), _mm512_permutexvar_ps(group_of[2 * h], group_scale), acc[t]);
          acc[t] =
              _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), _mm512_permutexvar_ps(group_of[2 * h + 1], group_scale), acc[t]);
        }
      }
    }
    for (int t = 0; t < M; ++t) {
      const __m256 m = mins_acc[t];
      __m128 h = _mm_add_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
      out[t * n + r] = _mm512_reduce_add_ps(acc[t]) - sum4(h);
    }
  }
}

// ---- many rows of x: panels of 16 weight rows ------------------------------------------------
// A panel holds 16 weight rows, unit by unit: the unit's 32 bytes of each row (unsigned; the 8-bit
// formats offset by 128) as 8 vectors whose lane r holds 4 consecutive bytes of row r, then for
// each group of the unit (one, or two for 16-value groups) the 16 rows' d and bias as two vectors.
// A dpbusd of such a vector with 4 bytes of a row of x, broadcast, adds 4 products to each of the
// 16 rows' sums: no sum is reduced across lanes, and the unpacking is done once for every row of x.

template <QType Q>
struct Panel {
  static constexpr int kHalves = kq::Format<Q>::kGroup == 32 ? 1 : 2;  // groups per unit
  static constexpr int64_t kUnitBytes = 512 + kHalves * 2 * 64;        // bytes, then d and bias
};

// Lane k of each of s[0..3], in order, for k = 0..3: w[first + 2k] (transpose_units).
WICK_AVX512 inline void lanes_of(const __m512i (&s)[4], __m512i unpair, __m512i* w, int first) {
  const __m512i s01 = _mm512_shuffle_i64x2(s[0], s[1], 0x44), s23 = _mm512_shuffle_i64x2(s[2], s[3], 0x44);
  const __m512i t01 = _mm512_shuffle_i64x2(s[0], s[1], 0xee), t23 = _mm512_shuffle_i64x2(s[2], s[3], 0xee);
  w[first] = _mm512_permutexvar_epi32(unpair, _mm512_shuffle_i64x2(s01, s23, 0x88));
  w[first + 2] = _mm512_permutexvar_epi32(unpair, _mm512_shuffle_i64x2(s01, s23, 0xdd));
  w[first + 4] = _mm512_permutexvar_epi32(unpair, _mm512_shuffle_i64x2(t01, t23, 0x88));
  w[first + 6] = _mm512_permutexvar_epi32(unpair, _mm512_shuffle_i64x2(t01, t23, 0xdd));
}

// The 16 rows' units of 32 bytes (u[e]: row e's, as 8 words) as 8 vectors whose lane e holds row e's
// word v: a 16 x 8 transpose of words in registers. Rows e and e + 8 share a vector, their words
// interleaved in pairs; an 8 x 8 transpose of those 64-bit pairs (unpacks, then 128-bit lanes
// moved twice) puts word v of every pair into w[v], whose pairs are then split back into rows.
WICK_AVX512 inline void transpose_units(const __m256i (&u)[kPanelRows], __m512i (&w)[8]) {
  const __m512i pair = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
  const __m512i unpair = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  __m512i y[8];  // 64-bit element v of y[p]: (row p's word v, row p + 8's word v)
  for (int p = 0; p < 8; ++p)
    y[p] = _mm512_permutexvar_epi32(pair, _mm512_inserti64x4(_mm512_castsi256_si512(u[p]), u[p + 8], 1));
  __m512i even[4], odd[4];  // 128-bit lane k of even[q]: element 2k of y[2q] and of y[2q + 1]; odd: 2k + 1
  for (int q = 0; q < 4; ++q) {
    even[q] = _mm512_unpacklo_epi64(y[2 * q], y[2 * q + 1]);
    odd[q] = _mm512_unpackhi_epi64(y[2 * q], y[2 * q + 1]);
  }
  lanes_of(even, unpair, w, 0);
  lanes_of(odd, unpair, w, 1);
}

// Rows [r, r + 16) of the weight (blocks, nb per row) as a panel at p (64-byte aligned). The
// formats of one f16 scale a block (Q4_0, Q8_0) take the 16 rows' scales in one gather, and Q6_K
// (d times a signed byte per group) its d per block and a group's bytes in one gather each, each
// converted by the hardware (the same floats as kernels/quant.h's conversion, NaN payloads aside).
// The next panel's rows (up to r1) are asked for a block ahead of their use: the packing reads the
// weight from memory, and the panel's products that follow it take as long again, so the
// next panel's bytes arrive meanwhile.
template <QType Q>
WICK_AVX512 void pack_panel(const typename kq::Format<Q>::Block* blocks, int64_t r, int64_t r1, int64_t nb,
                            uint8_t* p) {
  using F = kq::Format<Q>;
  using Block = typename F::Block;
  constexpr int kUnits = F::kValues / kq::kUnit;
  constexpr int kStep = F::kGroup == 32 ? 1 : 2;
  constexpr bool kOneHalf = Q == QType::Q4_0 || Q == QType::Q8_0;
  constexpr bool kByteScales = Q == QType::Q6_K;
  constexpr float kBias = static_cast<float>(F::kOffset) + (F::kSigned ? 128.f : 0.f);  // their bias / d
  const __m512i row_bytes =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int32_t>(nb * static_cast<int64_t>(sizeof(Block)))));
  kq::GroupScale g[kPanelRows][F::kGroups];
  const int64_t ahead = std::min<int64_t>(kPanelRows, r1 - r - kPanelRows);  // rows of the next panel
  for (int64_t i = 0; i < nb; ++i) {
    for (int64_t e = 0; e < ahead; ++e)
      for (size_t o = 0; o < sizeof(Block); o += 64)
        __builtin_prefetch(reinterpret_cast<const char*>(&blocks[(r + kPanelRows + e) * nb + i]) + o, 0, 3);
    if constexpr (!kOneHalf && !kByteScales)
      for (int e = 0; e < kPanelRows; ++e) scales_of<Q>(blocks[(r + e) * nb + i], g[e]);
    __m512 block_d = _mm512_setzero_ps();
    if constexpr (kByteScales) {
      // d, a Q6_K block's last two bytes: the top half of the four bytes before the block's end.
      const auto* end = reinterpret_cast<const uint8_t*>(&blocks[r * nb + i]) + sizeof(Block);
      block_d =
          _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_i32gather_epi32(row_bytes, end - 4, 1), 16)));
    }
    for (int j = 0; j < kUnits; ++j, p += Panel<Q>::kUnitBytes) {
      __m256i u[kPanelRows];
      for (int e = 0; e < kPanelRows; ++e) {
        u[e] = unit_bytes<Q>(blocks[(r + e) * nb + i], j);
        if constexpr (F::kSigned) u[e] = _mm256_xor_si256(u[e], _mm256_set1_epi8(static_cast<char>(0x80)));
      }
      __m512i w[8];
      transpose_units(u, w);
      for (int v = 0; v < 8; ++v) _mm512_store_si512(p + 64 * v, w[v]);
      auto* scale = reinterpret_cast<float*>(p + 512);
      if constexpr (kOneHalf) {
        const __m512i bits = _mm512_i32gather_epi32(row_bytes, &blocks[r * nb + i].d, 1);  // d and 2 bytes after
        const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(bits));
        _mm512_store_ps(scale, d);
        _mm512_store_ps(scale + kPanelRows, _mm512_mul_ps(d, _mm512_set1_ps(kBias)));
      } else if constexpr (kByteScales) {
        for (int h = 0; h < Panel<Q>::kHalves; ++h, scale += 2 * kPanelRows) {
          // Group kStep * j + h's signed byte: the top byte of the four that end with it (the bytes
          // before the scales are the block's own).
          const auto* at = reinterpret_cast<const uint8_t*>(blocks[r * nb + i].scales) + kStep * j + h - 3;
          const __m512 sc = _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_i32gather_epi32(row_bytes, at, 1), 24));
          const __m512 d = _mm512_mul_ps(block_d, sc);
          _mm512_store_ps(scale, d);
          _mm512_store_ps(scale + kPanelRows, _mm512_mul_ps(d, _mm512_set1_ps(kBias)));
        }
      } else {
        for (int h = 0; h < Panel<Q>::kHalves; ++h, scale += 2 * kPanelRows) {
          for (int e = 0; e < kPanelRows; ++e) {
            const kq::GroupScale s = g[e][kStep * j + h];
            scale[e] = s.d;
            scale[kPanelRows + e] = kq::group_bias<Q>(s) + (F::kSigned ? 128.f * s.d : 0.f);
          }
        }
      }
    }
  }
}

// The 4 bytes of x at a, in every lane.
WICK_AVX512 inline __m512i broadcast4(const int8_t* a) {
  int32_t v;
  __builtin_memcpy(&v, a, 4);
  return _mm512_set1_epi32(v);
}

// A panel (units units) times the T rows of x: out[t * n + e] for the panel's rows e < 16. Where
// the format has no minimum, its bias is offset * d (the 8-bit formats' offset: 128), so the
// offset's product, offset * sum(q), starts the integer sum instead of costing a float step.
template <QType Q, int T>
WICK_AVX512 void panel_rows(const uint8_t* p, int64_t units, int64_t k, XRows x, float* out, int64_t n) {
  using F = kq::Format<Q>;
  constexpr bool kBiasInSum = F::kMin == kq::MinForm::None;
  constexpr int32_t kOffset = F::kOffset + (F::kSigned ? 128 : 0);
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t u = 0; u < units; ++u, p += Panel<Q>::kUnitBytes) {
    __m512i w[8];
    for (int v = 0; v < 8; ++v) w[v] = _mm512_load_si512(p + 64 * v);
    const auto* scale = reinterpret_cast<const float*>(p + 512);
    if constexpr (Panel<Q>::kHalves == 1) {
      const __m512 d = _mm512_load_ps(scale), bias = _mm512_load_ps(scale + kPanelRows);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const int8_t* a = x.q + t * k + u * kq::kUnit;
        const int64_t at = t * units + u;
        __m512i sum =
            kBiasInSum ? _mm512_set1_epi32(-kOffset * (x.qsum[2 * at] + x.qsum[2 * at + 1])) : _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int v = 0; v < 8; ++v) sum = _mm512_dpbusd_epi32(sum, w[v], broadcast4(a + 4 * v));
        const __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(x.d[at]));
        acc[t] = _mm512_fmadd_ps(d, f, acc[t]);
        if constexpr (!kBiasInSum) acc[t] = _mm512_fnmadd_ps(bias, _mm512_set1_ps(x.sum[at]), acc[t]);
      }
    } else {
      const __m512 d0 = _mm512_load_ps(scale), bias0 = _mm512_load_ps(scale + kPanelRows);
      const __m512 d1 = _mm512_load_ps(scale + 2 * kPanelRows), bias1 = _mm512_load_ps(scale + 3 * kPanelRows);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const int8_t* a = x.q + t * k + u * kq::kUnit;
        const int64_t at = t * units + u;
        __m512i s0 = kBiasInSum ? _mm512_set1_epi32(-kOffset * x.qsum[2 * at]) : _mm512_setzero_si512();
        __m512i s1 = kBiasInSum ? _mm512_set1_epi32(-kOffset * x.qsum[2 * at + 1]) : _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) {
          s0 = _mm512_dpbusd_epi32(s0, w[v], broadcast4(a + 4 * v));
          s1 = _mm512_dpbusd_epi32(s1, w[v + 4], broadcast4(a + 16 + 4 * v));
        }
        const __m512 dx = _mm512_set1_ps(x.d[at]);
        __m512 r = _mm512_fmadd_ps(d0, _mm512_mul_ps(_mm512_cvtepi32_ps(s0), dx), acc[t]);
        r = _mm512_fmadd_ps(d1, _mm512_mul_ps(_mm512_cvtepi32_ps(s1), dx), r);
        if constexpr (!kBiasInSum) {
          r = _mm512_fnmadd_ps(bias0, _mm512_set1_ps(x.s[2 * at]), r);
          r = _mm512_fnmadd_ps(bias1, _mm512_set1_ps(x.s[2 * at + 1]), r);
        }
        acc[t] = r;
      }
    }
  }
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(out + t * n, acc[t]);
}

// Panels over rows [r0, r1) of the weight, each packed once and met by every tile of kMaxRows rows
// of x. Returns the first row not taken: r0 where a panel's 16 rows span more bytes than the
// packing's 32-bit gather offsets reach (rows of over 100 million values), which the row kernels
// then take.
template <QType Q>
WICK_AVX512 int64_t panels_avx512(const uint8_t* w, int64_t r0, int64_t r1, int64_t k, const RoundedX& x, int64_t m,
                                  float* out, int64_t n) {
  using F = kq::Format<Q>;
  const int64_t nb = k / F::kValues, units = k / kq::kUnit;
  if (nb * static_cast<int64_t>(sizeof(typename F::Block)) * kPanelRows > INT32_MAX) return r0;
  const auto* blocks = reinterpret_cast<const typename F::Block*>(w);
  Scratch<uint8_t> storage(units * Panel<Q>::kUnitBytes + 64);  // the backend's cached blocks, reused per call
  uint8_t* panel = storage.data() + (-reinterpret_cast<uintptr_t>(storage.data()) & 63);
  int64_t r = r0;
  for (; r + kPanelRows <= r1; r += kPanelRows) {
    pack_panel<Q>(blocks, r, r1, nb, panel);
    for (int64_t t0 = 0; t0 < m; t0 += kMaxRows) {
      const XRows xt(x, t0, k);
      [&]<int... T>(std::integer_sequence<int, T...>) {
        ((std::min(kMaxRows, m - t0) == T + 1 ? panel_rows<Q, T + 1>(panel, units, k, xt, out + t0 * n + r, n)
                                              : void()),
         ...);
      }
      (std::make_integer_sequence<int, kMaxRows>{});
    }
  }
  return r;
}

// quantize_act on 32 values at a time as two vectors. The maximum of |x| leaves NaNs out, as fmaxf
// does (a maximum is the same in any order); roundf (halves away from zero) is truncation plus a
// step where the dropped part, p - trunc(p), which is exact, is at least one half.
WICK_AVX512 void round_row_avx512(const float* x, int64_t units, int8_t* q, float* d, float* s, float* sum,
                                  int32_t* qsum) {
  const __m512i sign = _mm512_set1_epi32(INT32_MIN), one = _mm512_set1_epi32(0x3f800000);  // -0.f, 1.f
  const __m512 half = _mm512_set1_ps(0.5f);
  for (int64_t u = 0; u < units; ++u, x += kq::kUnit, q += kq::kUnit) {
    const __m512 v[2] = {_mm512_loadu_ps(x), _mm512_loadu_ps(x + 16)};
    __m512 magnitude = _mm512_setzero_ps();
    for (const __m512 a : v)
      magnitude = _mm512_max_ps(magnitude, _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(a, a, _CMP_ORD_Q), _mm512_abs_ps(a)));
    const float scale = _mm512_reduce_max_ps(magnitude) / 127.f;
    const __m512 inv = _mm512_set1_ps(scale != 0.f ? 1.f / scale : 0.f);
    for (int h = 0; h < 2; ++h) {
      const __m512 p = _mm512_mul_ps(v[h], inv);
      const __m512 t = _mm512_roundscale_ps(p, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      const __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(p, t)), half, _CMP_GE_OQ);
      const __m512 step = _mm512_castsi512_ps(_mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(p), sign), one));
      const __m512i n = _mm512_cvttps_epi32(_mm512_mask_add_ps(t, up, t, step));  // t + copysign(1, p) where up
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16 * h), _mm512_cvtepi32_epi8(n));
      qsum[2 * u + h] = _mm512_reduce_add_epi32(n);
    }
    d[u] = scale;
    s[2 * u] = scale * static_cast<float>(qsum[2 * u]);
    s[2 * u + 1] = scale * static_cast<float>(qsum[2 * u + 1]);
    sum[u] = s[2 * u] + s[2 * u + 1];
  }
}

}  // namespace

Isa best_isa() {
  static const Isa best = [] {
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512vnni"))
      return Isa::Avx512Vnni;
    // F16C (the AVX2 kernels' conversions of f16 scales) from CPUID leaf 1, ECX bit 29: not every
    // compiler's __builtin_cpu_supports knows it.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c) return Isa::Avx2;
    return Isa::None;
  }();
  return best;
}

bool simd_rows(QType qtype, const uint8_t* w, int64_t r0, int64_t r1, int64_t k, XRows x, int64_t m, float* out,
               int64_t n) {
  const Isa isa = active_isa();
  if (isa == Isa::None || m > kMaxRows) return false;
  kq::dispatch_qtype(qtype, [&]<QType Q>() {
    [&]<int... M>(std::integer_sequence<int, M...>) {
      constexpr bool kStepped = Q == QType::Q4_0 || Q == QType::Q8_0;
      if (x.u != nullptr && isa == Isa::Avx512Vnni && kStepped && stepped(k)) {
        if constexpr (kStepped) ((m == M + 1 ? rows_step16_avx512<Q, M + 1>(w, r0, r1, k, x, out, n) : void()), ...);
      } else if (x.u != nullptr && isa == Isa::Avx512Vnni && Q == QType::Q6_K) {
        ((m == M + 1 ? rows_q6_k_avx512<M + 1>(w, r0, r1, k, x, out, n) : void()), ...);
      } else if (isa == Isa::Avx512Vnni && (Q == QType::Q4_K || Q == QType::Q5_K)) {
        if constexpr (Q == QType::Q4_K || Q == QType::Q5_K)
          ((m == M + 1 ? rows_k4_avx512<Q, M + 1>(w, r0, r1, k, x, out, n) : void()), ...);
      } else if (isa == Isa::Avx512Vnni) {
        ((m == M + 1 ? rows_avx512<Q, M + 1>(w, r0, r1, k, x, out, n) : void()), ...);
      } else {
        ((m == M + 1 ? rows_avx2<Q, M + 1>(w, r0, r1, k, x, out, n) : void()), ...);
      }
    }(std::make_integer_sequence<int, kMaxRows>{});
  });
  return true;
}

Offset offset_order(QType qtype, int64_t k) {
  if (active_isa() < Isa::Avx512Vnni) return Offset::None;
  if (qtype == QType::Q4_0 && stepped(k)) return Offset::Halves;
  if ((qtype == QType::Q8_0 && stepped(k)) || qtype == QType::Q6_K) return Offset::Natural;
  return Offset::None;
}

int64_t simd_panels(QType qtype, const uint8_t* w, int64_t r0, int64_t r1, int64_t k, const RoundedX& x, int64_t m,
                    float* out, int64_t n) {
  if (active_isa() < Isa::Avx512Vnni) return r0;
  return kq::dispatch_qtype(qtype, [&]<QType Q>() { return panels_avx512<Q>(w, r0, r1, k, x, m, out, n); });
}

#elif !WICK_QDOT_ARM

Isa best_isa() { return Isa::None; }

Offset offset_order(quant::QType, int64_t) { return Offset::None; }

int64_t simd_panels(quant::QType, const uint8_t*, int64_t r0, int64_t, int64_t, const RoundedX&, int64_t, float*,
                    int64_t) {
  return r0;
}

bool simd_rows(quant::QType, const uint8_t*, int64_t, int64_t, int64_t, XRows, int64_t, float*, int64_t) {
  return false;
}

#endif

RoundedX::RoundedX(int64_t m, int64_t k, Offset order)
    : q(static_cast<size_t>(m * k)),
      d(static_cast<size_t>(m * (k / kernels::quant::kUnit))),
      s(2 * d.size()),
      sum(d.size()),
      qsum(2 * d.size()),
      u(order == Offset::None ? 0 : q.size()),
      order(order) {}

namespace {

// Row t's offset bytes (k of them) from its q, in r.order.
void offset_row(RoundedX& r, int64_t k, int64_t t) {
  const int8_t* q = r.q.data() + t * k;
  uint8_t* u = r.u.data() + t * k;
  auto run = [&](int64_t from, int64_t to) {  // 16 bytes
    for (int i = 0; i < 16; ++i) u[to + i] = static_cast<uint8_t>(q[from + i] ^ 0x80);
  };
  constexpr int64_t kGroup = 4 * kernels::quant::kUnit;
  const int64_t grouped = r.order == Offset::Halves ? k / kGroup * kGroup : 0;
  for (int64_t g = 0; g < grouped; g += kGroup)
    for (int j = 0; j < 4; ++j)
      for (int h = 0; h < 2; ++h) run(g + 32 * j + 16 * h, g + 64 * h + 16 * j);
  for (int64_t i = grouped; i < k; i += 16) run(i, i);
}

}  // namespace

void round_row(const float* x, int64_t k, RoundedX& r, int64_t t) {
  namespace kq = kernels::quant;
  const int64_t units = k / kq::kUnit;
  int8_t* q = r.q.data() + t * k;
  float *d = r.d.data() + t * units, *s = r.s.data() + 2 * t * units, *sum = r.sum.data() + t * units;
  int32_t* qsum = r.qsum.data() + 2 * t * units;
  bool simd = false;
#if WICK_QDOT_X86
  simd = active_isa() >= Isa::Avx512Vnni;
  if (simd) round_row_avx512(x, units, q, d, s, sum, qsum);
#endif
  for (int64_t u = 0; u < units && !simd; ++u) {
    const kq::ActScale a = kq::quantize_act(x + u * kq::kUnit, q + u * kq::kUnit);
    d[u] = a.d;
    s[2 * u] = a.s0;
    s[2 * u + 1] = a.s1;
    sum[u] = a.s0 + a.s1;
    for (int h = 0; h < 2; ++h) {
      qsum[2 * u + h] = 0;
      for (int i = 0; i < 16; ++i) qsum[2 * u + h] += q[u * kq::kUnit + 16 * h + i];
    }
  }
  if (r.order != Offset::None) offset_row(r, k, t);
}

}  // namespace wick::cpu::qdot
