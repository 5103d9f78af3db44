// AVX2 products of the block formats with x rounded to 8 bits, chosen at run time on x86-64 CPUs
// that have AVX2 and FMA. Each unit of 32 weights is unpacked to 32 bytes in a vector register
// (Q4_0, Q8_0, Q4_K, Q5_K and Q6_K with their own shifts and masks; the other formats through
// kernels/quant.h's group_word), multiplied with each row of x's 32 bytes by maddubs (unsigned times
// signed bytes, pairs summed to 16 bits, never saturating for these ranges) and madd (to 8 sums of
// 32 bits: the first 4 cover values 0-15, the last 4 values 16-31), and accumulated in floats per
// lane with each half's scale. The value is unit_dot's: d_w * d_x * dot - bias * s, summed in another
// order.
#include "cpu/quant/qdot.h"

#include <atomic>
#include <utility>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define WICK_QDOT_X86 1
#include <immintrin.h>
#else
#define WICK_QDOT_X86 0
#endif

namespace wick::cpu::qdot {

namespace {
std::atomic<bool> simd_on{true};
}  // namespace

bool set_simd(bool enabled) { return simd_on.exchange(enabled); }

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

// Unit j of block b (unit `unit` of the row, its groups' scales s0 and s1) times the M rows of x,
// into acc and bias.
template <QType Q, int M>
WICK_AVX2 inline void add_unit(const typename kq::Format<Q>::Block& b, int j, kq::GroupScale s0, kq::GroupScale s1,
                               int64_t unit, int64_t k, const RoundedX& x, __m256* acc, float* bias) {
  using F = kq::Format<Q>;
  const int64_t units = k / kq::kUnit;
  const __m256i u = unit_bytes<Q>(b, j);
  const float b0 = kq::group_bias<Q>(s0), b1 = kq::group_bias<Q>(s1);
  for (int t = 0; t < M; ++t) {
    const kq::ActScale& a = x.scale[static_cast<size_t>(t * units + unit)];
    const __m256i p = dot_bytes<F::kSigned>(u, load32b(x.q.data() + t * k + unit * kq::kUnit));
    const __m256 scale = _mm256_set_m128(_mm_set1_ps(s1.d * a.d), _mm_set1_ps(s0.d * a.d));
    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), scale, acc[t]);
    bias[t] += b0 * a.s0 + b1 * a.s1;
  }
}

// Rows [r0, r1) times the M rows of x. A block's group scales are read once; units alternate between
// two sets of accumulators, so that consecutive units do not wait on each other's sums.
template <QType Q, int M>
WICK_AVX2 void rows_avx2(const uint8_t* w, int64_t r0, int64_t r1, int64_t k, const RoundedX& x, float* out,
                         int64_t n) {
  using F = kq::Format<Q>;
  constexpr int kUnits = F::kValues / kq::kUnit;
  const int64_t nb = k / F::kValues;
  const auto* blocks = reinterpret_cast<const typename F::Block*>(w);
  for (int64_t r = r0; r < r1; ++r) {
    __m256 acc[2][M];
    float bias[2][M];
    for (int e = 0; e < 2; ++e)
      for (int t = 0; t < M; ++t) acc[e][t] = _mm256_setzero_ps(), bias[e][t] = 0.f;
    const typename F::Block* row = blocks + r * nb;
    if constexpr (kUnits == 1) {
      int64_t i = 0;
      for (; i + 1 < nb; i += 2) {
        const kq::GroupScale s = kq::group_scale<Q>(row[i], 0), t = kq::group_scale<Q>(row[i + 1], 0);
        add_unit<Q, M>(row[i], 0, s, s, i, k, x, acc[0], bias[0]);
        add_unit<Q, M>(row[i + 1], 0, t, t, i + 1, k, x, acc[1], bias[1]);
      }
      if (i < nb) {
        const kq::GroupScale s = kq::group_scale<Q>(row[i], 0);
        add_unit<Q, M>(row[i], 0, s, s, i, k, x, acc[0], bias[0]);
      }
    } else {
      for (int64_t i = 0; i < nb; ++i) {
        kq::GroupScale s[F::kGroups];
        kq::block_scales<Q>(row[i], s);
        constexpr int kStep = F::kGroup == 32 ? 1 : 2;  // groups per unit
#pragma GCC unroll 8
        for (int j = 0; j < kUnits; ++j)
          add_unit<Q, M>(row[i], j, s[kStep * j], s[kStep * j + kStep - 1], i * kUnits + j, k, x, acc[j % 2],
                         bias[j % 2]);
      }
    }
    for (int t = 0; t < M; ++t) out[t * n + r] = sum8(_mm256_add_ps(acc[0][t], acc[1][t])) - (bias[0][t] + bias[1][t]);
  }
}

bool has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

}  // namespace

bool simd_rows(QType qtype, const uint8_t* w, int64_t r0, int64_t r1, int64_t k, const RoundedX& x, int64_t m,
               float* out, int64_t n) {
  if (!simd_on.load(std::memory_order_relaxed) || !has_avx2() || m > kMaxRows) return false;
  kq::dispatch_qtype(qtype, [&]<QType Q>() {
    [&]<int... M>(std::integer_sequence<int, M...>) {
      ((m == M + 1 ? rows_avx2<Q, M + 1>(w, r0, r1, k, x, out, n) : void()), ...);
    }(std::make_integer_sequence<int, kMaxRows>{});
  });
  return true;
}

#else

bool simd_rows(quant::QType, const uint8_t*, int64_t, int64_t, int64_t, const RoundedX&, int64_t, float*, int64_t) {
  return false;
}

#endif

}  // namespace wick::cpu::qdot
