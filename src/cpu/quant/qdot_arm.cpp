// aarch64 products of the block formats with x rounded to 8 bits, chosen at run time: Armv8.2's
// dot product instructions (sdot: four byte products summed into each 32-bit lane), which every
// Armv9 core and most Armv8.2+ server and laptop cores have (Neoverse N1 and later, Apple M1 and
// later). Each unit of 32 weights is unpacked to two vectors of 16 bytes (Q4_0, Q8_0, Q4_K, Q5_K
// and Q6_K with their own shifts and masks; the other formats through kernels/quant.h's
// group_word), each multiplied with x's 16 bytes of the same values by one sdot (4 sums of 32 bits
// a half unit), and accumulated in floats per lane under each half's scale; the bias terms
// (offsets and minimums) meet x's sums once per unit. The value is unit_dot's: d_w * d_x * dot -
// bias * s, summed in another order. The bytes are u, below 64, or signed for the 8-bit formats:
// sdot takes both as they are.
//
// Linux reports the instructions through getauxval (HWCAP_ASIMDDP); every Apple aarch64 part has
// them. Elsewhere, and on cores without them, best_isa() is None and the portable loops run.
#include "cpu/quant/qdot.h"

#if defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))

#include <arm_neon.h>

#include <utility>

#include "cpu/prefetch.h"

#if defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)  // asm/hwcap.h's bit, for libcs whose headers lack the name
#endif
#endif

namespace wick::cpu::qdot {

namespace {

namespace kq = kernels::quant;
using quant::QType;

#define WICK_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))

// (v >> shift) & mask in every byte; shift below 8, taken at run time.
WICK_DOTPROD inline uint8x16_t bits(uint8x16_t v, int shift, uint8_t mask) {
  return vandq_u8(vshlq_u8(v, vdupq_n_s8(static_cast<int8_t>(-shift))), vdupq_n_u8(mask));
}

// Unit j of block b as two vectors of 16 bytes, values 0-15 and 16-31: u, unsigned below 64, or
// signed for the 8-bit formats.
template <QType Q>
WICK_DOTPROD inline void unit_bytes(const typename kq::Format<Q>::Block& b, int j, int8x16_t& lo, int8x16_t& hi) {
  if constexpr (Q == QType::Q4_0) {
    const uint8x16_t q = vld1q_u8(b.qs);
    lo = vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f)));
    hi = vreinterpretq_s8_u8(vshrq_n_u8(q, 4));
  } else if constexpr (Q == QType::Q8_0) {
    lo = vld1q_s8(b.qs);
    hi = vld1q_s8(b.qs + 16);
  } else if constexpr (Q == QType::Q4_K || Q == QType::Q5_K) {
    const uint8_t* q = b.qs + 32 * (j / 2);
    uint8x16_t l = bits(vld1q_u8(q), 4 * (j % 2), 0x0f), h = bits(vld1q_u8(q + 16), 4 * (j % 2), 0x0f);
    if constexpr (Q == QType::Q5_K) {
      l = vorrq_u8(l, vshlq_n_u8(bits(vld1q_u8(b.qh), j, 0x01), 4));
      h = vorrq_u8(h, vshlq_n_u8(bits(vld1q_u8(b.qh + 16), j, 0x01), 4));
    }
    lo = vreinterpretq_s8_u8(l);
    hi = vreinterpretq_s8_u8(h);
  } else if constexpr (Q == QType::Q6_K) {
    const int half = j / 4, quarter = j % 4;
    const uint8_t* ql = b.ql + 64 * half + 32 * (quarter % 2);
    const uint8_t* qh = b.qh + 32 * half;
    lo = vreinterpretq_s8_u8(
        vorrq_u8(bits(vld1q_u8(ql), 4 * (quarter / 2), 0x0f), vshlq_n_u8(bits(vld1q_u8(qh), 2 * quarter, 0x03), 4)));
    hi = vreinterpretq_s8_u8(vorrq_u8(bits(vld1q_u8(ql + 16), 4 * (quarter / 2), 0x0f),
                                      vshlq_n_u8(bits(vld1q_u8(qh + 16), 2 * quarter, 0x03), 4)));
  } else {
    using F = kq::Format<Q>;
    uint32_t words[8];
    if constexpr (F::kGroup == 32) {
      for (int w = 0; w < 8; ++w) words[w] = kq::group_word<Q>(b, j, w);
    } else {
      for (int w = 0; w < 4; ++w)
        words[w] = kq::group_word<Q>(b, 2 * j, w), words[w + 4] = kq::group_word<Q>(b, 2 * j + 1, w);
    }
    lo = vreinterpretq_s8_u32(vld1q_u32(words));
    hi = vreinterpretq_s8_u32(vld1q_u32(words + 4));
  }
}

// Unit j of block b (unit `unit` of the row, its halves' group scales s0 and s1) times the M rows
// of x, into acc (each half's sums under its scale) and bias (lane h: half h's bias terms).
template <QType Q, int M>
WICK_DOTPROD inline void add_unit(const typename kq::Format<Q>::Block& b, int j, kq::GroupScale s0, kq::GroupScale s1,
                                  int64_t unit, int64_t k, XRows x, float32x4_t* acc, float32x2_t* bias) {
  const int64_t units = k / kq::kUnit;
  int8x16_t lo, hi;
  unit_bytes<Q>(b, j, lo, hi);
  const float b2[2] = {kq::group_bias<Q>(s0), kq::group_bias<Q>(s1)};
  const float32x2_t bs = vld1_f32(b2);
  for (int t = 0; t < M; ++t) {
    const int64_t at = t * units + unit;
    const int8_t* q = x.q + t * k + unit * kq::kUnit;
    const float d = x.d[at];
    const int32x4_t p0 = vdotq_s32(vdupq_n_s32(0), lo, vld1q_s8(q));
    const int32x4_t p1 = vdotq_s32(vdupq_n_s32(0), hi, vld1q_s8(q + 16));
    acc[t] = vfmaq_n_f32(acc[t], vcvtq_f32_s32(p0), s0.d * d);
    acc[t] = vfmaq_n_f32(acc[t], vcvtq_f32_s32(p1), s1.d * d);
    bias[t] = vfma_f32(bias[t], bs, vld1_f32(x.s + 2 * at));
  }
}

// Rows [r0, r1) times the M rows of x. A block's group scales are read once. For few rows of x,
// units alternate between two sets of accumulators, so that consecutive units do not wait on each
// other's sums.
template <QType Q, int M>
WICK_DOTPROD void rows_dotprod(const uint8_t* w, int64_t r0, int64_t r1, int64_t k, XRows x, float* out, int64_t n) {
  using F = kq::Format<Q>;
  constexpr int kUnits = F::kValues / kq::kUnit;
  constexpr int kSets = M <= 4 ? 2 : 1;
  const int64_t nb = k / F::kValues;
  const auto* blocks = reinterpret_cast<const typename F::Block*>(w);
  for (int64_t r = r0; r < r1; ++r) {
    float32x4_t acc[kSets][M];
    float32x2_t bias[kSets][M];
    for (int e = 0; e < kSets; ++e)
      for (int t = 0; t < M; ++t) acc[e][t] = vdupq_n_f32(0.f), bias[e][t] = vdup_n_f32(0.f);
    const typename F::Block* row = blocks + r * nb;
    if constexpr (kUnits == 1) {
      int64_t i = 0;
      for (; i + kSets <= nb; i += kSets) {
        prefetch_ahead<kSets * sizeof(typename F::Block)>(row + i);
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
        kq::block_scales<Q>(row[i], s);
        constexpr int kStep = F::kGroup == 32 ? 1 : 2;  // groups per unit
        for (int j = 0; j < kUnits; ++j)
          add_unit<Q, M>(row[i], j, s[kStep * j], s[kStep * j + kStep - 1], i * kUnits + j, k, x, acc[j % kSets],
                         bias[j % kSets]);
      }
    }
    for (int t = 0; t < M; ++t) {
      float32x4_t sum = acc[0][t];
      float32x2_t b = bias[0][t];
      for (int e = 1; e < kSets; ++e) sum = vaddq_f32(sum, acc[e][t]), b = vadd_f32(b, bias[e][t]);
      out[t * n + r] = vaddvq_f32(sum) - vaddv_f32(b);
    }
  }
}

}  // namespace

Isa best_isa() {
  static const Isa best = [] {
#if defined(__linux__)
    return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0 ? Isa::Neon : Isa::None;
#elif defined(__APPLE__)
    return Isa::Neon;
#else
    return Isa::None;
#endif
  }();
  return best;
}

bool simd_rows(QType qtype, const uint8_t* w, int64_t r0, int64_t r1, int64_t k, XRows x, int64_t m, float* out,
               int64_t n) {
  if (active_isa() != Isa::Neon || m > kMaxRows) return false;
  kq::dispatch_qtype(qtype, [&]<QType Q>() {
    [&]<int... M>(std::integer_sequence<int, M...>) {
      ((m == M + 1 ? rows_dotprod<Q, M + 1>(w, r0, r1, k, x, out, n) : void()), ...);
    }
    (std::make_integer_sequence<int, kMaxRows>{});
  });
  return true;
}

Offset offset_order(QType, int64_t) { return Offset::None; }

int64_t simd_panels(QType, const uint8_t*, int64_t r0, int64_t, int64_t, const RoundedX&, int64_t, float*, int64_t) {
  return r0;
}

}  // namespace wick::cpu::qdot

#endif
