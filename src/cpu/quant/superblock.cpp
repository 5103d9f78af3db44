// superblock.h's products: x's rounding, the portable loops, and the AVX2 kernel.
//
// The kernel takes a tile of up to 4 rows of x against 2 weight rows at a time, so that each 32
// bytes of unpacked weight meet 4 rows of x and each 32 bytes of x 2 weight rows, in 8 integer sums
// of 32 bits that stay in registers through a super-block. Per 32 values it unpacks the weight's
// bytes (a 16-bit shift and a mask of 32 bytes holding two groups' nibbles; Q5_K's fifth bits and
// Q6_K's fifth and sixth from qh), broadcasts the scale as 16 bits in both halves of each 32-bit
// lane (Q6_K: its two 16-value groups' scales, one per 128-bit half), and adds
// madd(maddubs(w, x), scale) to each sum. At the end of a super-block each sum becomes floats once:
// times dx (x's scale, broadcast from memory) and d (the weight's), with Q4_K's and Q5_K's
// minimums an f32 product of 8 lanes and Q6_K's offset of 32 one more madd of its sixteen scales by
// x's sums of 16. A weight row's scales are decoded once per run of rows (about kRunBytes of
// weight, kept in cache while every tile of x passes over it), not once per tile.
#include "cpu/quant/superblock.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu/quant/qdot.h"
#include "cpu/scratch.h"
#include "kernels/quant.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define WICK_SUPERBLOCK_X86 1
#include <immintrin.h>
#else
#define WICK_SUPERBLOCK_X86 0
#endif

namespace wick::cpu::superblock {

namespace kq = kernels::quant;
using quant::QType;

RoundedX::RoundedX(int64_t m, int64_t k)
    : q(static_cast<size_t>(m * k)),
      d(static_cast<size_t>(m * (k / kValues))),
      s(static_cast<size_t>(m * (k / kGroup))),
      sum16(static_cast<size_t>(m * (k / 16))) {}

namespace {

// A super-block of x into q, d, s and sum16 as round_row gives them: the plain loop.
void round_block(const float* v, int8_t* q, float* d, float* s, int16_t* sum16) {
  float amax = 0.f;
  for (int64_t e = 0; e < kValues; ++e) amax = std::max(amax, std::fabs(v[e]));
  const float di = amax / 127.f, id = di != 0.f ? 1.f / di : 0.f;
  *d = di;
  for (int64_t g = 0; g < kValues / kGroup; ++g) {
    int half[2] = {0, 0};
    for (int64_t e = 0; e < kGroup; ++e) {
      const int u = static_cast<int>(std::round(v[g * kGroup + e] * id));  // |u| <= 127
      q[g * kGroup + e] = static_cast<int8_t>(u);
      half[e / 16] += u;
    }
    sum16[2 * g] = static_cast<int16_t>(half[0]);
    sum16[2 * g + 1] = static_cast<int16_t>(half[1]);
    s[g] = di * static_cast<float>(half[0] + half[1]);
  }
}

#if WICK_SUPERBLOCK_X86
__attribute__((target("avx2"))) inline int sum_lanes(__m256i v) {
  __m128i t = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4e));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1));
  return _mm_cvtsi128_si32(t);
}

// The same in AVX2 vectors: the same bits (x * id rounded halves away from zero as std::round does:
// its integer part, plus the sign where the fraction's size is at least a half).
__attribute__((target("avx2,fma"))) void round_block_avx2(const float* v, int8_t* q, float* d, float* s,
                                                          int16_t* sum16) {
  const __m256 sign = _mm256_set1_ps(-0.f);
  __m256 m = _mm256_setzero_ps();
  for (int64_t e = 0; e < kValues; e += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(v + e)));
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  const float di = _mm_cvtss_f32(h) / 127.f, id = di != 0.f ? 1.f / di : 0.f;
  *d = di;
  const __m256 scale = _mm256_set1_ps(id), half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.f);
  for (int64_t g = 0; g < kValues / kGroup; ++g) {
    __m256i words[4];
    for (int c = 0; c < 4; ++c) {
      const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(v + g * kGroup + 8 * c), scale);
      const __m256 whole = _mm256_round_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      const __m256 up = _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_sub_ps(x, whole)), half, _CMP_GE_OQ);
      const __m256 step = _mm256_or_ps(_mm256_and_ps(x, sign), one);  // +-1 as x's sign
      words[c] = _mm256_cvttps_epi32(_mm256_add_ps(whole, _mm256_and_ps(up, step)));
    }
    // 32 values of 32 bits to bytes in order: packs work within 128-bit lanes, the permute undoes it.
    const __m256i w16 = _mm256_packs_epi32(words[0], words[1]), w16b = _mm256_packs_epi32(words[2], words[3]);
    const __m256i bytes =
        _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w16, w16b), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + g * kGroup), bytes);
    const int first = sum_lanes(_mm256_add_epi32(words[0], words[1]));
    const int second = sum_lanes(_mm256_add_epi32(words[2], words[3]));
    sum16[2 * g] = static_cast<int16_t>(first);
    sum16[2 * g + 1] = static_cast<int16_t>(second);
    s[g] = di * static_cast<float>(first + second);
  }
}
#endif

}  // namespace

void round_row(const float* x, int64_t k, RoundedX& r, int64_t t) {
  const int64_t nb = k / kValues;
  int8_t* q = r.q.data() + t * k;
  float* d = r.d.data() + t * nb;
  float* s = r.s.data() + t * (k / kGroup);
  int16_t* sum16 = r.sum16.data() + t * (k / 16);
  [[maybe_unused]] const bool avx2 = qdot::active_isa() >= qdot::Isa::Avx2;
  for (int64_t i = 0; i < nb; ++i) {
#if WICK_SUPERBLOCK_X86
    if (avx2) {
      round_block_avx2(x + i * kValues, q + i * kValues, d + i, s + i * (kValues / kGroup), sum16 + i * 16);
      continue;
    }
#endif
    round_block(x + i * kValues, q + i * kValues, d + i, s + i * (kValues / kGroup), sum16 + i * 16);
  }
}

namespace {

// Value e (0..31) of 32-value group j of a Q4_K, Q5_K or Q6_K block, unsigned.
template <QType Q>
int value(const typename kq::Format<Q>::Block& b, int j, int e) {
  if constexpr (Q == QType::Q6_K) {
    const int h = j / 4, quarter = j % 4;
    const int low = (b.ql[64 * h + 32 * (quarter % 2) + e] >> (4 * (quarter / 2))) & 0xf;
    return low | ((b.qh[32 * h + e] >> (2 * quarter)) & 3) << 4;
  } else {
    const int low = (b.qs[32 * (j / 2) + e] >> (4 * (j % 2))) & 0xf;
    if constexpr (Q == QType::Q5_K) return low | ((b.qh[e] >> j) & 1) << 4;
    return low;
  }
}

template <QType Q>
void portable(const uint8_t* w, int64_t r0, int64_t r1, int64_t k, const RoundedX& x, int64_t m, float* out,
              int64_t n) {
  using Block = typename kq::Format<Q>::Block;
  const int64_t nb = k / kValues;
  const auto* blocks = reinterpret_cast<const Block*>(w);
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t t = 0; t < m; ++t) {
      float acc = 0.f;
      for (int64_t i = 0; i < nb; ++i) {
        const Block& b = blocks[r * nb + i];
        const int8_t* a = x.q.data() + t * k + i * kValues;
        const float dx = x.d[static_cast<size_t>(t * nb + i)];
        const float* s = x.s.data() + t * (k / kGroup) + i * (kValues / kGroup);
        const int16_t* sum16 = x.sum16.data() + t * (k / 16) + i * 16;
        int sum = 0;
        float bias = 0.f;
        for (int j = 0; j < 8; ++j) {
          int dot[2] = {0, 0};
          for (int e = 0; e < kGroup; ++e) dot[e / 16] += value<Q>(b, j, e) * a[kGroup * j + e];
          if constexpr (Q == QType::Q6_K) {
            for (int g = 2 * j; g < 2 * j + 2; ++g) sum += b.scales[g] * (dot[g % 2] - 32 * sum16[g]);
          } else {
            int sc, mn;
            kq::k4_scale_min(b.scales, j, sc, mn);
            sum += sc * (dot[0] + dot[1]);
            bias += kq::ExactHalf{}(b.dmin) * static_cast<float>(mn) * s[j];
          }
        }
        acc += static_cast<float>(sum) * dx * kq::ExactHalf{}(b.d) - bias;
      }
      out[t * n + r] = acc;
    }
}

}  // namespace

void rows_portable(QType qtype, const uint8_t* w, int64_t r0, int64_t r1, int64_t k, const RoundedX& x, int64_t m,
                   float* out, int64_t n) {
  if (qtype == QType::Q4_K) portable<QType::Q4_K>(w, r0, r1, k, x, m, out, n);
  if (qtype == QType::Q5_K) portable<QType::Q5_K>(w, r0, r1, k, x, m, out, n);
  if (qtype == QType::Q6_K) portable<QType::Q6_K>(w, r0, r1, k, x, m, out, n);
}

#if WICK_SUPERBLOCK_X86

namespace {

#define WICK_AVX2 __attribute__((target("avx2,fma")))
// The tile: out of line, so that its float sums (a pointer argument) stay in memory; under GCC,
// scheduled before register allocation with an eye on register pressure, which kept all but two of
// its eight integer sums in registers (2026-12-02: 106-108 -> 116-118 GOPS on one core, Q4_K).
#if defined(__clang__)
#define WICK_TILE_ATTRIBUTES __attribute__((noinline))
#else
#define WICK_TILE_ATTRIBUTES __attribute__((noinline, optimize("schedule-insns", "sched-pressure")))
#endif

// Weight bytes a run decodes the scales of and keeps in cache while every tile of x passes over it.
constexpr int64_t kRunBytes = 128 * 1024;
constexpr int kTile = 4;  // rows of x per tile

// A super-block of a weight row, its scales decoded: for Q4_K and Q5_K, sc[j] the 6-bit scale of
// group j in both 16-bit halves (madd's operand, broadcast from memory), mins[j] = dmin * m_j; for
// Q6_K, sc[j] the signed scales of 16-value groups 2j and 2j + 1 in its low and high halves (so
// that sc is the sixteen scales in order as 16 bits each) and mins unused; and d.
struct Scales {
  int32_t sc[8];
  float mins[8];
  float d;
};

WICK_AVX2 inline __m256i load32b(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// A block's scales decoded, in vectors (one call per block of every weight row a run takes).
template <QType Q>
WICK_AVX2 void decode(const typename kq::Format<Q>::Block& b, Scales& s) {
  if constexpr (Q == QType::Q6_K) {
    // The sixteen signed scales widened to 16 bits, in order: sc[j]'s halves are groups 2j and 2j + 1.
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(s.sc), _mm256_cvtepi8_epi16(bytes));
  } else {
    uint32_t w[3];
    std::memcpy(w, b.scales, sizeof(w));
    auto words = [&](bool mins) {
      return _mm_setr_epi32(static_cast<int>(kq::k4_scale_word(w, mins, 0)),
                            static_cast<int>(kq::k4_scale_word(w, mins, 1)), 0, 0);
    };
    const __m256i sc = _mm256_cvtepu8_epi32(words(false));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(s.sc), _mm256_or_si256(sc, _mm256_slli_epi32(sc, 16)));
    const __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(words(true)));
    _mm256_storeu_ps(s.mins, _mm256_mul_ps(_mm256_set1_ps(kq::ExactHalf{}(b.dmin)), mn));
  }
  s.d = kq::ExactHalf{}(b.d);
}

WICK_AVX2 inline float sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 32-value group 2c + h of a block as 32 unsigned bytes (shifts by counts in registers, so that
// the group loop need not be unrolled).
template <QType Q>
WICK_AVX2 inline __m256i group_bytes(const typename kq::Format<Q>::Block& b, int c, int h) {
  const __m256i mask = _mm256_set1_epi8(0x0f);
  if constexpr (Q == QType::Q6_K) {
    // Half c / 2 of the block, quarter 2 (c % 2) + h of the half: nibble c % 2 of ql's first or
    // second 32 bytes, and bit pair 2 (c % 2) + h of qh.
    const __m256i low =
        _mm256_and_si256(_mm256_srl_epi16(load32b(b.ql + 64 * (c / 2) + 32 * h), _mm_cvtsi32_si128(4 * (c % 2))), mask);
    const __m256i high = _mm256_and_si256(
        _mm256_srl_epi16(load32b(b.qh + 32 * (c / 2)), _mm_cvtsi32_si128(2 * (2 * (c % 2) + h))), _mm256_set1_epi8(3));
    return _mm256_or_si256(low, _mm256_slli_epi16(high, 4));
  } else {
    __m256i u = _mm256_and_si256(_mm256_srl_epi16(load32b(b.qs + 32 * c), _mm_cvtsi32_si128(4 * h)), mask);
    if constexpr (Q == QType::Q5_K) {
      const __m256i bit =
          _mm256_and_si256(_mm256_srl_epi16(load32b(b.qh), _mm_cvtsi32_si128(2 * c + h)), _mm256_set1_epi8(1));
      u = _mm256_or_si256(u, _mm256_slli_epi16(bit, 4));
    }
    return u;
  }
}

// Rows t0 .. t0 + T of x times weight rows r .. r + R (their blocks at w[], decoded scales at s[]):
// out[t * n + r].
template <QType Q, int T, int R>
WICK_TILE_ATTRIBUTES WICK_AVX2 void tile(const typename kq::Format<Q>::Block* const* w, const Scales* const* s,
                                         int64_t nb, const RoundedX& x, int64_t t0, int64_t k, float* out, int64_t n,
                                         float* sums) {
  const int8_t* xq = x.q.data() + t0 * k;
  const float* xd = x.d.data() + t0 * nb;
  const float* xs = x.s.data() + t0 * (k / kGroup);
  [[maybe_unused]] const __m256i halves =
      _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
  // The float sums live in memory (sums, which the compiler must take to alias x's bytes), so that
  // the integer sums have the registers.
  auto acc = [&](int t, int r) { return sums + 8 * (t * R + r); };
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) _mm256_store_ps(acc(t, r), _mm256_setzero_ps());
  for (int64_t i = 0; i < nb; ++i) {
    __m256i sum[T][R];
    for (int t = 0; t < T; ++t)
      for (int r = 0; r < R; ++r) sum[t][r] = _mm256_setzero_si256();
#pragma GCC unroll 1
    for (int j = 0; j < 8; ++j) {
      // One group at a time, not unrolled: unrolled, GCC computed the products of several groups
      // before adding any, and spilled the sums.
      __m256i u[R], sc[R];
      for (int r = 0; r < R; ++r) {
        u[r] = group_bytes<Q>(w[r][i], j / 2, j % 2);
        sc[r] = _mm256_set1_epi32(s[r][i].sc[j]);
        // Q6_K: the first 16 values' scale across the low 128 bits, the second's the high.
        if constexpr (Q == QType::Q6_K) sc[r] = _mm256_shuffle_epi8(sc[r], halves);
      }
      for (int t = 0; t < T; ++t) {
        const __m256i a = load32b(xq + t * k + i * kValues + j * kGroup);
        for (int r = 0; r < R; ++r)
          sum[t][r] = _mm256_add_epi32(sum[t][r], _mm256_madd_epi16(_mm256_maddubs_epi16(u[r], a), sc[r]));
      }
    }
    if constexpr (Q == QType::Q6_K) {
      // sum_g sc_g (dot_g - 32 xsum_g): the offsets' term in integers, then floats once.
      for (int t = 0; t < T; ++t) {
        const __m256 dx = _mm256_broadcast_ss(xd + t * nb + i);
        const __m256i xsum = load32b(x.sum16.data() + (t0 + t) * (k / 16) + i * 16);
        for (int r = 0; r < R; ++r) {
          const __m256i offsets = _mm256_slli_epi32(_mm256_madd_epi16(load32b(s[r][i].sc), xsum), 5);
          const __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(sum[t][r], offsets)), dx);
          _mm256_store_ps(acc(t, r), _mm256_fmadd_ps(v, _mm256_broadcast_ss(&s[r][i].d), _mm256_load_ps(acc(t, r))));
        }
      }
      continue;
    }
    for (int t = 0; t < T; ++t) {
      const __m256 dx = _mm256_broadcast_ss(xd + t * nb + i);
      const __m256 xsum = _mm256_loadu_ps(xs + t * (k / kGroup) + i * 8);
      for (int r = 0; r < R; ++r) {
        const __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(sum[t][r]), dx);
        const __m256 a = _mm256_fmadd_ps(v, _mm256_broadcast_ss(&s[r][i].d), _mm256_load_ps(acc(t, r)));
        _mm256_store_ps(acc(t, r), _mm256_fnmadd_ps(_mm256_loadu_ps(s[r][i].mins), xsum, a));
      }
    }
  }
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) out[(t0 + t) * n + r] = sum8(_mm256_load_ps(acc(t, r)));
}

template <QType Q>
void rows_avx2(const uint8_t* w, int64_t r0, int64_t r1, int64_t k, const RoundedX& x, int64_t m, float* out,
               int64_t n) {
  using Block = typename kq::Format<Q>::Block;
  const int64_t nb = k / kValues;
  const auto* blocks = reinterpret_cast<const Block*>(w);
  // An even count, so that only the range's last row can be a pair's odd one.
  const int64_t run = std::max<int64_t>(2, kRunBytes / (nb * static_cast<int64_t>(sizeof(Block))) / 2 * 2);
  Scratch<Scales> buffer(std::min(run, r1 - r0) * nb);
  Scales* scales = buffer.data();
  alignas(32) float sums[kTile * 2 * 8];
  for (int64_t a = r0; a < r1; a += run) {
    const int64_t b = std::min(r1, a + run);
    for (int64_t i = 0; i < (b - a) * nb; ++i) decode<Q>(blocks[a * nb + i], scales[i]);
    for (int64_t t0 = 0; t0 < m; t0 += kTile) {
      const int64_t tiles = std::min<int64_t>(kTile, m - t0);
      for (int64_t r = a; r < b; r += 2) {
        const int64_t pair = std::min<int64_t>(2, b - r);
        const Block* wr[2] = {blocks + r * nb, blocks + (r + pair - 1) * nb};
        const Scales* sr[2] = {scales + (r - a) * nb, scales + (r + pair - 1 - a) * nb};
        float* o = out + r;
        auto go = [&]<int T>() {
          if (pair == 2) {
            tile<Q, T, 2>(wr, sr, nb, x, t0, k, o, n, sums);
          } else {
            tile<Q, T, 1>(wr, sr, nb, x, t0, k, o, n, sums);
          }
        };
        switch (tiles) {
          case 1: go.template operator()<1>(); break;
          case 2: go.template operator()<2>(); break;
          case 3: go.template operator()<3>(); break;
          default: go.template operator()<4>(); break;
        }
      }
    }
  }
}

}  // namespace

bool takes(QType qtype, int64_t k) {
  return (qtype == QType::Q4_K || qtype == QType::Q5_K || qtype == QType::Q6_K) && k % kValues == 0 &&
         qdot::active_isa() == qdot::Isa::Avx2;
}

void rows(QType qtype, const uint8_t* w, int64_t r0, int64_t r1, int64_t k, const RoundedX& x, int64_t m, float* out,
          int64_t n) {
  if (qtype == QType::Q4_K) rows_avx2<QType::Q4_K>(w, r0, r1, k, x, m, out, n);
  if (qtype == QType::Q5_K) rows_avx2<QType::Q5_K>(w, r0, r1, k, x, m, out, n);
  if (qtype == QType::Q6_K) rows_avx2<QType::Q6_K>(w, r0, r1, k, x, m, out, n);
}

#else

bool takes(QType, int64_t) { return false; }

void rows(QType qtype, const uint8_t* w, int64_t r0, int64_t r1, int64_t k, const RoundedX& x, int64_t m, float* out,
          int64_t n) {
  rows_portable(qtype, w, r0, r1, k, x, m, out, n);
}

#endif

}  // namespace wick::cpu::superblock
