// The products of arranged weights (arranged.h) on x86-64 machines. Lane r of every vector holds
// row r's bytes, so that a product adds 4 of x's bytes, broadcast, times 4 bytes of each row at once:
// nothing is summed across lanes and nothing is repacked per call.
//
// AVX-512 VNNI (Q4_0): a block of a group is four 64-byte vectors; masked and shifted, they are the 8
// vectors of the unit's bytes, each a dpbusd with 4 bytes of a row of x. Q4_0's values are q - 8
// with q unsigned below 16, so 8 times the sum of x's bytes starts each integer sum. Where the
// processor has AMX, many rows of x take its tiles instead (amx.h), with the same integer sums and
// the same float arithmetic after them.
//
// AVX2 (Q4_0, Q8_0, Q4_K and Q6_K), 8 rows a vector: maddubs of the unpacked bytes by x's bytes
// gives 16-bit sums of two products (Q8_0's signed bytes: |w| times x signed as w, each maddubs made
// 32 bits by its own madd). For the 4-bit formats the sums of a unit's 8 maddubs (16 products of at
// most 15 * 127 each: below 2^15) are added in 16 bits and made 32 by one madd. Q4_0 then meets
// floats as AVX-512's kernel does, so both give the same bits; Q4_K meets them once per group of 32
// (x's unit), its scale and minimum decoded for the run's 8 rows at once from the scale words. Q6_K
// (6-bit values) adds two maddubs in 16 bits and multiplies by each 16-value group's scale in the
// madd, so that a unit's integer sum meets floats once.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "cpu/prefetch.h"
#include "cpu/quant/amx.h"
#include "cpu/quant/arranged.h"
#include "cpu/scratch.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define WICK_ARRANGED_X86 1
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // as in qdot_x86.cpp: GCC 12's AVX-512 intrinsics
#endif
#include <immintrin.h>
#else
#define WICK_ARRANGED_X86 0
#endif

namespace wick::cpu::arranged {

using quant::QType;

#if WICK_ARRANGED_X86

namespace {

#define WICK_AVX2 __attribute__((target("avx2,fma,f16c")))

// The 4 bytes of x at a, in every lane.
WICK_AVX2 inline __m256i splat4(const int8_t* a) {
  int32_t v;
  std::memcpy(&v, a, 4);
  return _mm256_set1_epi32(v);
}

// (v >> shift) & mask in every byte (shift below 8).
WICK_AVX2 inline __m256i bits(__m256i v, int shift, int mask) {
  return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8(static_cast<char>(mask)));
}

WICK_AVX2 inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

WICK_AVX2 inline __m256 halves(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Adds the products of 32 bytes of 8 rows (lane r: 4 bytes of row r; low nibbles times x's 4 bytes
// at lo, high nibbles times those at hi) to the 16-bit sums `sum` (set by the first of a unit).
template <bool kFirst>
WICK_AVX2 inline void add_nibbles(__m256i w, const int8_t* lo, const int8_t* hi, __m256i& sum) {
  const __m256i low = _mm256_set1_epi8(0x0f);
  const __m256i l = _mm256_and_si256(w, low), h = _mm256_and_si256(_mm256_srli_epi16(w, 4), low);
  const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(l, splat4(lo)), _mm256_maddubs_epi16(h, splat4(hi)));
  sum = kFirst ? p : _mm256_add_epi16(sum, p);
}

WICK_AVX2 inline __m256 widen(__m256i sum16) {
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(sum16, _mm256_set1_epi16(1)));
}

// A Q4_0 group (nb blocks per row) times the T rows of x: out[t * n + r] for its rows r < 16, with
// the bits of q4_0_group (AVX-512) below.
template <int T>
WICK_AVX2 void q4_0_group_avx2(const uint8_t* g, int64_t nb, qdot::XRows x, int64_t k, float* out, int64_t n) {
  __m256 acc[2][T];
  for (int h = 0; h < 2; ++h)
    for (int t = 0; t < T; ++t) acc[h][t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const Q4_0Block at = q4_0_block(i, nb);
    prefetch_ahead<kRows * 18>(g + i * kRows * 18);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256 d = halves(g + at.d + 16 * h);
      __m256i sum[T];
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) {
        const __m256i w = load32(g + at.q + 64 * v + 32 * h);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const int8_t* a = x.q + t * k + 32 * i + 4 * v;
          v == 0 ? add_nibbles<true>(w, a, a + 16, sum[t]) : add_nibbles<false>(w, a, a + 16, sum[t]);
        }
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const int64_t u = t * nb + i;
        const __m256i offset = _mm256_set1_epi32(-8 * (x.qsum[2 * u] + x.qsum[2 * u + 1]));
        const __m256i s = _mm256_add_epi32(offset, _mm256_madd_epi16(sum[t], _mm256_set1_epi16(1)));
        acc[h][t] = _mm256_fmadd_ps(d, _mm256_mul_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(x.d[u])), acc[h][t]);
      }
    }
  }
  for (int h = 0; h < 2; ++h)
    for (int t = 0; t < T; ++t) _mm256_storeu_ps(out + t * n + 8 * h, acc[h][t]);
}

// Byte b of every 32-bit lane of s, as floats.
template <int B>
WICK_AVX2 inline __m256 byte_floats(__m256i s) {
  return _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(s, 8 * B), _mm256_set1_epi32(0xff)));
}

// A Q4_K run of 8 rows (nb blocks per row) times the T rows of x: out[t * n + r] for its rows r < 8.
// Each group of 32 values adds d * sc * (x's d) times its integer sum and takes dmin * m times x's
// sum, per row and row of x, in the kernels' order of groups.
template <int T>
WICK_AVX2 void q4_k_run_avx2(const uint8_t* g, int64_t nb, qdot::XRows x, int64_t k, float* out, int64_t n) {
  const int64_t units = k / 32;
  __m256 acc[T], bias[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps(), bias[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* b = g + i * q4_k::kBlockBytes;
    prefetch_ahead<q4_k::kBlockBytes>(b);
    // The 8 rows' scales and minimums of the block's 8 groups, as kq::k4_scale_word gives them.
    alignas(32) float dsc[8][8], dmn[8][8];
    {
      const __m256i w0 = load32(b + q4_k::kScales), w1 = load32(b + q4_k::kScales + 32),
                    w2 = load32(b + q4_k::kScales + 64);
      const __m256i six = _mm256_set1_epi32(0x3f3f3f3f), four = _mm256_set1_epi32(0x0f0f0f0f),
                    top = _mm256_set1_epi32(0x30303030);
      const __m256i words[2][2] = {
          {_mm256_and_si256(w0, six),
           _mm256_or_si256(_mm256_and_si256(w2, four), _mm256_and_si256(_mm256_srli_epi32(w0, 2), top))},
          {_mm256_and_si256(w1, six), _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(w2, 4), four),
                                                      _mm256_and_si256(_mm256_srli_epi32(w1, 2), top))}};
      const __m256 d[2] = {halves(b + q4_k::kD), halves(b + q4_k::kDmin)};
      for (int m = 0; m < 2; ++m) {
        float(*to)[8] = m == 0 ? dsc : dmn;
        for (int h = 0; h < 2; ++h) {
          _mm256_store_ps(to[4 * h], _mm256_mul_ps(d[m], byte_floats<0>(words[m][h])));
          _mm256_store_ps(to[4 * h + 1], _mm256_mul_ps(d[m], byte_floats<1>(words[m][h])));
          _mm256_store_ps(to[4 * h + 2], _mm256_mul_ps(d[m], byte_floats<2>(words[m][h])));
          _mm256_store_ps(to[4 * h + 3], _mm256_mul_ps(d[m], byte_floats<3>(words[m][h])));
        }
      }
    }
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      __m256i lo[T], hi[T];
#pragma GCC unroll 8
      for (int v = 0; v < 8; ++v) {
        const __m256i w = load32(b + q4_k::quants(p, v));
        const __m256i low = _mm256_set1_epi8(0x0f);
        const __m256i l = _mm256_and_si256(w, low), h = _mm256_and_si256(_mm256_srli_epi16(w, 4), low);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const int8_t* a = x.q + t * k + 256 * i + 64 * p + 4 * v;
          const __m256i pl = _mm256_maddubs_epi16(l, splat4(a)), ph = _mm256_maddubs_epi16(h, splat4(a + 32));
          lo[t] = v == 0 ? pl : _mm256_add_epi16(lo[t], pl);
          hi[t] = v == 0 ? ph : _mm256_add_epi16(hi[t], ph);
        }
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const int64_t u = t * units + 8 * i + 2 * p;
        for (int e = 0; e < 2; ++e) {
          const __m256 scale = _mm256_mul_ps(_mm256_load_ps(dsc[2 * p + e]), _mm256_set1_ps(x.d[u + e]));
          acc[t] = _mm256_fmadd_ps(widen(e == 0 ? lo[t] : hi[t]), scale, acc[t]);
          bias[t] = _mm256_fmadd_ps(_mm256_load_ps(dmn[2 * p + e]), _mm256_set1_ps(x.sum[u + e]), bias[t]);
        }
      }
    }
  }
  for (int t = 0; t < T; ++t) _mm256_storeu_ps(out + t * n, _mm256_sub_ps(acc[t], bias[t]));
}

// Byte B of every 32-bit lane of s, a signed scale, as 16 bits in both halves of the lane (madd's
// second operand): the byte put in bytes 1 and 3 (the others zero), then each 16 bits shifted down.
template <int B>
WICK_AVX2 inline __m256i scale_pairs(__m256i s) {
  constexpr char z = -128;  // a shuffle index with its top bit set gives 0
  const __m256i pick = _mm256_setr_epi8(z, B, z, B, z, 4 + B, z, 4 + B, z, 8 + B, z, 8 + B, z, 12 + B, z, 12 + B,  //
                                        z, B, z, B, z, 4 + B, z, 4 + B, z, 8 + B, z, 8 + B, z, 12 + B, z, 12 + B);
  return _mm256_srai_epi16(_mm256_shuffle_epi8(s, pick), 8);
}

// Bits 2K and 2K + 1 of every byte of qh, as bits 4 and 5.
template <int K>
WICK_AVX2 inline __m256i high_pair(__m256i qh) {
  const __m256i mask = _mm256_set1_epi8(0x30);
  if constexpr (K < 2) return _mm256_and_si256(_mm256_slli_epi16(qh, 4 - 2 * K), mask);
  if constexpr (K == 2) return _mm256_and_si256(qh, mask);
  return _mm256_and_si256(_mm256_srli_epi16(qh, 2), mask);
}

// Unit J (32 values, groups 2J and 2J + 1) of block i of a Q6_K run times the T rows of x, into acc:
// per group, madd of the 16-bit sums of two maddubs (63 * 127 * 4 < 2^15) by the group's scale, and
// the offset of 32 as one more madd of the scale by -16 times x's sum of 16 (doubled by madd).
template <int J, int T>
WICK_AVX2 inline void q6_k_unit(const uint8_t* b, const __m256i (&scale)[16], int64_t i, qdot::XRows x, int64_t k,
                                __m256 d, __m256 (&acc)[T]) {
  constexpr int h = J / 4, kk = J % 4;
  const int64_t units = k / 32;
  __m256i sum[T];
#pragma GCC unroll 2
  for (int e = 0; e < 2; ++e) {
    __m256i pair[2][T];
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      const int v = 4 * e + q;
      const __m256i u = _mm256_or_si256(bits(load32(b + q6_k::low(h, kk % 2, v)), 4 * (kk / 2), 0x0f),
                                        high_pair<kk>(load32(b + q6_k::high(h, v))));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256i p = _mm256_maddubs_epi16(u, splat4(x.q + t * k + 256 * i + 32 * J + 4 * v));
        pair[q / 2][t] = q % 2 == 0 ? p : _mm256_add_epi16(pair[q / 2][t], p);
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const int64_t at = t * units + 8 * i + J;
      const __m256i offset = _mm256_set1_epi16(static_cast<int16_t>(-16 * x.qsum[2 * at + e]));
      const __m256i g = _mm256_add_epi32(_mm256_add_epi32(_mm256_madd_epi16(pair[0][t], scale[2 * J + e]),
                                                          _mm256_madd_epi16(pair[1][t], scale[2 * J + e])),
                                         _mm256_madd_epi16(scale[2 * J + e], offset));
      sum[t] = e == 0 ? g : _mm256_add_epi32(sum[t], g);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const int64_t at = t * units + 8 * i + J;
    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[t]), _mm256_mul_ps(d, _mm256_set1_ps(x.d[at])), acc[t]);
  }
}

// A Q6_K run of 8 rows (nb blocks per row) times the T rows of x: out[t * n + r] for its rows r < 8.
// Each unit of 32 values meets floats once: its integer sum times d and x's d.
template <int T>
WICK_AVX2 void q6_k_run_avx2(const uint8_t* g, int64_t nb, qdot::XRows x, int64_t k, float* out, int64_t n) {
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* b = g + i * q6_k::kBlockBytes;
    prefetch_ahead<q6_k::kBlockBytes>(b);
    __m256i scale[16];
    for (int c = 0; c < 4; ++c) {
      const __m256i s = load32(b + q6_k::kScales + 32 * c);
      scale[4 * c] = scale_pairs<0>(s), scale[4 * c + 1] = scale_pairs<1>(s);
      scale[4 * c + 2] = scale_pairs<2>(s), scale[4 * c + 3] = scale_pairs<3>(s);
    }
    const __m256 d = halves(b + q6_k::kD);
    q6_k_unit<0, T>(b, scale, i, x, k, d, acc);
    q6_k_unit<1, T>(b, scale, i, x, k, d, acc);
    q6_k_unit<2, T>(b, scale, i, x, k, d, acc);
    q6_k_unit<3, T>(b, scale, i, x, k, d, acc);
    q6_k_unit<4, T>(b, scale, i, x, k, d, acc);
    q6_k_unit<5, T>(b, scale, i, x, k, d, acc);
    q6_k_unit<6, T>(b, scale, i, x, k, d, acc);
    q6_k_unit<7, T>(b, scale, i, x, k, d, acc);
  }
  for (int t = 0; t < T; ++t) _mm256_storeu_ps(out + t * n, acc[t]);
}

// A Q8_0 run of 8 rows (nb blocks per row) times the T rows of x: out[t * n + r] for its rows r < 8.
// Signed bytes times signed bytes: maddubs of |w| by x with w's sign (at most 2 * 128 * 127, so each
// maddubs is made 32 bits by its own madd), one float step per block.
template <int T>
WICK_AVX2 void q8_0_run_avx2(const uint8_t* g, int64_t nb, qdot::XRows x, int64_t k, float* out, int64_t n) {
  const int64_t units = k / 32;
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* b = g + i * q8_0::kBlockBytes;
    prefetch_ahead<q8_0::kBlockBytes>(b);
    __m256i sum[T];
#pragma GCC unroll 8
    for (int v = 0; v < 8; ++v) {
      const __m256i w = load32(b + q8_0::kQuants + 32 * v), magnitude = _mm256_sign_epi8(w, w);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256i p = _mm256_madd_epi16(
            _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(splat4(x.q + t * k + 32 * i + 4 * v), w)), ones);
        sum[t] = v == 0 ? p : _mm256_add_epi32(sum[t], p);
      }
    }
    const __m256 d = halves(b + q8_0::kD);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t)
      acc[t] =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[t]), _mm256_mul_ps(d, _mm256_set1_ps(x.d[t * units + i])), acc[t]);
  }
  for (int t = 0; t < T; ++t) _mm256_storeu_ps(out + t * n, acc[t]);
}

// A run of 8 rows of Q8_0, Q4_K or Q6_K (nb blocks per row) times the T rows of x.
constexpr int64_t kRunRows = 8;
static_assert(q8_0::kRunRows == kRunRows && q4_k::kRunRows == kRunRows && q6_k::kRunRows == kRunRows);
template <QType Q, int T>
WICK_AVX2 void run_avx2(const uint8_t* g, int64_t nb, qdot::XRows x, int64_t k, float* out, int64_t n) {
  if constexpr (Q == QType::Q8_0) q8_0_run_avx2<T>(g, nb, x, k, out, n);
  if constexpr (Q == QType::Q4_K) q4_k_run_avx2<T>(g, nb, x, k, out, n);
  if constexpr (Q == QType::Q6_K) q6_k_run_avx2<T>(g, nb, x, k, out, n);
}

// Rows of x per call of the AVX2 kernels: two where their sums of a tile stay in the 16 vector
// registers, four for Q4_K and Q6_K, so that a block's unpacked quants and scales serve four rows of
// x (some sums then live on the stack, which costs less: on a Zen 1 core, 64 and 512 rows of x times
// Q6_K weights of Llama 3.2 1B's shapes took 2-10% less time, Q4_K up to 11%; Q8_0 took 22% more).
// Each row of x has sums of its own: the same bits from any tile.
template <QType Q>
constexpr int kAvx2Tile = Q == QType::Q4_K || Q == QType::Q6_K ? 4 : 2;

// Rows [r0, r1) (whole groups) times the m rows of x on AVX2, in tiles of up to kAvx2Tile<Q> rows of x.
template <QType Q>
WICK_AVX2 void rows_avx2(const uint8_t* w, int64_t r0, int64_t r1, int64_t k, const qdot::RoundedX& x, int64_t m,
                         float* out, int64_t n) {
  constexpr int64_t kValues = Q == QType::Q4_0 || Q == QType::Q8_0 ? 32 : 256;
  constexpr int64_t kRunBytes = Q == QType::Q8_0   ? q8_0::kBlockBytes
                                : Q == QType::Q4_K ? q4_k::kBlockBytes
                                                   : q6_k::kBlockBytes;
  const int64_t nb = k / kValues, group_bytes = kRows * quant::row_bytes(Q, k);
  for (int64_t r = r0; r < r1; r += kRows) {
    const uint8_t* g = w + r / kRows * group_bytes;
    for (int64_t t0 = 0; t0 < m; t0 += kAvx2Tile<Q>) {
      const qdot::XRows xt(x, t0, k);
      float* o = out + t0 * n + r;
      const bool two = m - t0 >= 2;
      if constexpr (Q == QType::Q4_0) {
        two ? q4_0_group_avx2<2>(g, nb, xt, k, o, n) : q4_0_group_avx2<1>(g, nb, xt, k, o, n);
      } else {
        // Two runs of 8 rows (Q8_0, Q4_K, Q6_K: arranged.h).
        const int64_t tile = std::min<int64_t>(kAvx2Tile<Q>, m - t0);
        for (int64_t run = 0; run < kRows / kRunRows; ++run) {
          const uint8_t* rg = g + run * nb * kRunBytes;
          float* ro = o + run * kRunRows;
          [&]<int... T>(std::integer_sequence<int, T...>) {
            ((tile == T + 1 ? run_avx2<Q, T + 1>(rg, nb, xt, k, ro, n) : void()), ...);
          }
          (std::make_integer_sequence<int, kAvx2Tile<Q>>{});
        }
      }
    }
  }
}

#define WICK_AVX512 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni,f16c")))

// The 4 bytes of x at a, in every lane.
WICK_AVX512 inline __m512i broadcast4(const int8_t* a) {
  int32_t v;
  std::memcpy(&v, a, 4);
  return _mm512_set1_epi32(v);
}

// A block of a Q4_0 group unpacked: its 8 vectors of bytes below 16, then its 16 rows' d as floats.
constexpr int64_t kUnpackedBytes = 8 * 64 + 64;

// Block i of a Q4_0 group g (nb blocks per row): w, the unit's bytes (lane r: 4 values of row r),
// and d, the rows' scales; from the group itself or from its unpacked copy.
template <bool kUnpacked>
WICK_AVX512 inline void load_block(const uint8_t* g, int64_t nb, int64_t i, __m512i (&w)[8], __m512& d) {
  if constexpr (kUnpacked) {
    const uint8_t* p = g + i * kUnpackedBytes;
    for (int v = 0; v < 8; ++v) w[v] = _mm512_load_si512(p + 64 * v);
    d = _mm512_load_ps(p + 8 * 64);
  } else {
    const Q4_0Block at = q4_0_block(i, nb);
    const uint8_t* q = g + at.q;
    prefetch_ahead<kRows * 18>(g + i * kRows * 18);
    const __m512i low = _mm512_set1_epi8(0x0f);
    for (int v = 0; v < 4; ++v) {
      const __m512i b = _mm512_loadu_si512(q + 64 * v);
      w[v] = _mm512_and_si512(b, low);
      w[v + 4] = _mm512_and_si512(_mm512_srli_epi16(b, 4), low);
    }
    d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + at.d)));
  }
}

// A Q4_0 group (nb blocks per row, or its unpacked copy) times the T rows of x: out[t * n + r] for
// its rows r < 16.
template <int T, bool kUnpacked>
WICK_AVX512 void q4_0_group(const uint8_t* g, int64_t nb, qdot::XRows x, int64_t k, float* out, int64_t n) {
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    __m512i w[8];
    __m512 d;
    load_block<kUnpacked>(g, nb, i, w, d);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const int8_t* a = x.q + t * k + 32 * i;
      const int64_t at = t * nb + i;
      __m512i sum = _mm512_set1_epi32(-8 * (x.qsum[2 * at] + x.qsum[2 * at + 1]));
#pragma GCC unroll 8
      for (int v = 0; v < 8; ++v) sum = _mm512_dpbusd_epi32(sum, w[v], broadcast4(a + 4 * v));
      acc[t] = _mm512_fmadd_ps(d, _mm512_mul_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(x.d[at])), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(out + t * n, acc[t]);
}

// A Q4_0 group unpacked (nb blocks of kUnpackedBytes): load_block's vectors, as they are or, for
// AMX's tiles (amx.h's layout), with 8 taken from every byte (the values q - 8 as signed bytes),
// then the rows' d.
static_assert(kUnpackedBytes == amx::kBlockBytes);
template <bool kSigned>
WICK_AVX512 void unpack_group(const uint8_t* g, int64_t nb, uint8_t* out) {
  const __m512i eight = _mm512_set1_epi8(8);
  for (int64_t i = 0; i < nb; ++i) {
    __m512i w[8];
    __m512 d;
    load_block<false>(g, nb, i, w, d);
    for (int v = 0; v < 8; ++v)
      _mm512_store_si512(out + i * kUnpackedBytes + 64 * v, kSigned ? _mm512_sub_epi8(w[v], eight) : w[v]);
    _mm512_store_ps(out + i * kUnpackedBytes + 8 * 64, d);
  }
}

// Rows [r0, r1) (whole groups) times the m rows of x on AMX's tiles: the integer sums of (q - 8) x are
// q4_0_group's (-8 times x's sum plus q x) and amx::group_products' float arithmetic is q4_0_group's,
// so each row gets the same bits from either kernel.
void q4_0_rows_amx(const uint8_t* w, int64_t r0, int64_t r1, int64_t k, const qdot::RoundedX& x, int64_t m, float* out,
                   int64_t n) {
  const int64_t nb = k / 32, group_bytes = kRows * quant::row_bytes(QType::Q4_0, k);
  Scratch<uint8_t> storage(nb * kUnpackedBytes + 64);
  uint8_t* unpacked = storage.data() + (-reinterpret_cast<uintptr_t>(storage.data()) & 63);
  for (int64_t r = r0; r < r1; r += kRows) {
    unpack_group<true>(w + r / kRows * group_bytes, nb, unpacked);
    amx::group_products(unpacked, nb, x, m, k, out + r, n);
  }
}

// Rows of x past which a group is unpacked once for all their tiles rather than per tile.
constexpr int64_t kUnpackRows = 2 * qdot::kMaxRows;

WICK_AVX512 void q4_0_rows(const uint8_t* w, int64_t r0, int64_t r1, int64_t k, const qdot::RoundedX& x, int64_t m,
                           float* out, int64_t n) {
  const int64_t nb = k / 32, group_bytes = kRows * quant::row_bytes(QType::Q4_0, k);
  const bool unpack = m > kUnpackRows;
  Scratch<uint8_t> storage(unpack ? nb * kUnpackedBytes + 64 : 0);
  uint8_t* unpacked = storage.data() + (-reinterpret_cast<uintptr_t>(storage.data()) & 63);
  for (int64_t r = r0; r < r1; r += kRows) {
    const uint8_t* g = w + r / kRows * group_bytes;
    if (unpack) unpack_group<false>(g, nb, unpacked);
    for (int64_t t0 = 0; t0 < m; t0 += qdot::kMaxRows) {
      const qdot::XRows xt(x, t0, k);
      [&]<int... T>(std::integer_sequence<int, T...>) {
        ((std::min(qdot::kMaxRows, m - t0) == T + 1
              ? (unpack ? q4_0_group<T + 1, true>(unpacked, nb, xt, k, out + t0 * n + r, n)
                        : q4_0_group<T + 1, false>(g, nb, xt, k, out + t0 * n + r, n))
              : void()),
         ...);
      }
      (std::make_integer_sequence<int, qdot::kMaxRows>{});
    }
  }
}

}  // namespace

int64_t simd_rows(QType qtype, const uint8_t* w, int64_t r0, int64_t r1, int64_t k, const qdot::RoundedX& x, int64_t m,
                  float* out, int64_t n) {
  if (!arranges(qtype, k)) return r0;
  const int64_t end = r0 + (r1 - r0) / kRows * kRows;
  if (qtype == QType::Q8_0)
    rows_avx2<QType::Q8_0>(w, r0, end, k, x, m, out, n);
  else if (qtype == QType::Q4_K)
    rows_avx2<QType::Q4_K>(w, r0, end, k, x, m, out, n);
  else if (qtype == QType::Q6_K)
    rows_avx2<QType::Q6_K>(w, r0, end, k, x, m, out, n);
  else if (qdot::active_isa() == qdot::Isa::Avx2)
    rows_avx2<QType::Q4_0>(w, r0, end, k, x, m, out, n);
  else if (m >= amx::kMinRows && amx::active())
    q4_0_rows_amx(w, r0, end, k, x, m, out, n);
  else
    q4_0_rows(w, r0, end, k, x, m, out, n);
  return end;
}

#else

int64_t simd_rows(QType, const uint8_t*, int64_t r0, int64_t, int64_t, const qdot::RoundedX&, int64_t, float*,
                  int64_t) {
  return r0;
}

#endif

}  // namespace wick::cpu::arranged
