// The GGUF block formats (include/wick/quant.h) as ggml lays them out, and the unpacking that
// every backend shares: the CPU loops (src/cpu/quant), the GPU kernels (src/gpu/quant) and the
// front end's host fallback (src/quant) read blocks only through the functions below.
//
// Every format is read as groups of 16 or 32 values that share one scale: a group's values are
// small integers u (bytes, unsigned except in the 8-bit formats) and two floats d and m with
//   value = d * (u - kOffset)        formats without a minimum (Q4_0, Q5_0, Q3_K, Q6_K, Q8_*),
//   value = d * u + m                Q4_1, Q5_1,
//   value = d * u - m                Q2_K, Q4_K, Q5_K,
// each written exactly as ggml's dequantize_row_* rounds it (dequantize_group), so dequantizing is
// bit-exact everywhere (device code is compiled without contraction into FMA). Integer dot
// products use the same groups as value = d * u - bias (group_bias).
#pragma once

#include <cmath>
#include <cstdint>

#include "wick/float_types.h"
#include "wick/quant.h"

// Unrolled in device code (the group's words stay in registers); the host compiler takes its own view.
#if WICK_DEVICE_CODE
#define WICK_QUANT_UNROLL _Pragma("unroll")
#else
#define WICK_QUANT_UNROLL
#endif

namespace wick::kernels::quant {

using wick::quant::QType;

// ---- the blocks, byte for byte as ggml-common.h defines them --------------------------------
// f16 fields are held as their bits.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];  // value j: low nibble of qs[j]; value j + 16: high nibble
};
struct BlockQ4_1 {
  uint16_t d, m;
  uint8_t qs[16];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];  // bit j of the little-endian word: the fifth bit of value j
  uint8_t qs[16];
};
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
struct BlockQ8_1 {
  uint16_t d, s;  // s: d times the sum of qs
  int8_t qs[32];
};
// The K-quants: super-blocks of 256 values.
struct BlockQ2_K {
  uint8_t scales[16];  // low nibble: scale, high nibble: minimum, of each group of 16
  uint8_t qs[64];      // 2 bits per value
  uint16_t d, dmin;
};
struct BlockQ3_K {
  uint8_t hmask[32];   // the third bit of each value
  uint8_t qs[64];      // the low 2 bits
  uint8_t scales[12];  // sixteen 6-bit scales
  uint16_t d;
};
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];  // eight 6-bit scales and eight 6-bit minimums
  uint8_t qs[128];
};
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
struct BlockQ6_K {
  uint8_t ql[128];  // low 4 bits
  uint8_t qh[64];   // high 2 bits
  int8_t scales[16];
  uint16_t d;
};
struct BlockQ8_K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];  // the sum of each 16 qs
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);

enum class MinForm : uint8_t { None, Add, Sub };

// Per format: its block, values per block and per group, the offset of u, the form of the minimum,
// and whether u is signed.
template <QType Q> struct Format;
#define WICK_QFORMAT(Q, B, values, group, offset, min, sgn)      \
  template <> struct Format<QType::Q> {                           \
    using Block = B;                                              \
    static constexpr int kValues = values;                        \
    static constexpr int kGroup = group;                          \
    static constexpr int kGroups = values / group;                \
    static constexpr int kOffset = offset;                        \
    static constexpr MinForm kMin = MinForm::min;                 \
    static constexpr bool kSigned = sgn;                          \
    static constexpr int kAlign = sizeof(B) % 4 == 0 ? 4 : 2;     \
  };
WICK_QFORMAT(Q4_0, BlockQ4_0, 32, 32, 8, None, false)
WICK_QFORMAT(Q4_1, BlockQ4_1, 32, 32, 0, Add, false)
WICK_QFORMAT(Q5_0, BlockQ5_0, 32, 32, 16, None, false)
WICK_QFORMAT(Q5_1, BlockQ5_1, 32, 32, 0, Add, false)
WICK_QFORMAT(Q8_0, BlockQ8_0, 32, 32, 0, None, true)
WICK_QFORMAT(Q8_1, BlockQ8_1, 32, 32, 0, None, true)
WICK_QFORMAT(Q2_K, BlockQ2_K, 256, 16, 0, Sub, false)
WICK_QFORMAT(Q3_K, BlockQ3_K, 256, 16, 4, None, false)
WICK_QFORMAT(Q4_K, BlockQ4_K, 256, 32, 0, Sub, false)
WICK_QFORMAT(Q5_K, BlockQ5_K, 256, 32, 0, Sub, false)
WICK_QFORMAT(Q6_K, BlockQ6_K, 256, 16, 32, None, false)
WICK_QFORMAT(Q8_K, BlockQ8_K, 256, 32, 0, None, true)
#undef WICK_QFORMAT

// Calls f.template operator()<Q>() with the format as a template argument. q must be one of QType's
// values (the front end's quant::detail::check_qtype refuses others): another falls to Q4_0.
// Host code passes it host lambdas: nvcc is told not to check their execution space.
#if defined(__CUDACC__) && !defined(__clang__)
#pragma nv_exec_check_disable
#endif
template <typename F>
WICK_HD decltype(auto) dispatch_qtype(QType q, F&& f) {
  switch (q) {
#define WICK_X(e, name, ggml) \
  case QType::e: return f.template operator()<QType::e>();
    WICK_FORALL_QTYPES(WICK_X)
#undef WICK_X
  }
  return f.template operator()<QType::Q4_0>();
}

// ---- small readers ----------------------------------------------------------------------------
WICK_HD inline float half(uint16_t bits) { return detail::f16_bits_to_f32(bits); }

// A little-endian 32-bit word at p, which is aligned to A bytes (2 or 4): every field a group reads
// is at least 2-aligned, as blocks of 18, 22, 34, 110 and 210 bytes leave them.
template <int A>
WICK_HD uint32_t load32(const void* p) {
#if WICK_DEVICE_CODE
  if constexpr (A >= 4) {
    return *static_cast<const uint32_t*>(p);
  } else {
    const uint16_t* h = static_cast<const uint16_t*>(p);
    return static_cast<uint32_t>(h[0]) | static_cast<uint32_t>(h[1]) << 16;
  }
#else
  uint32_t v;
  __builtin_memcpy(&v, p, sizeof v);  // little-endian hosts (x86-64, aarch64)
  return v;
#endif
}

// Bits 0..3 of `bits` as bit 0 of each of four bytes (the fifth bits of Q5_0 and Q5_1).
WICK_HD inline uint32_t spread4(uint32_t bits) { return ((bits & 0xfu) * 0x00204081u) & 0x01010101u; }

// The 6-bit scale and minimum of group j (0..7) of Q4_K and Q5_K.
WICK_HD inline void k4_scale_min(const uint8_t* s, int j, int& sc, int& m) {
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 0xf) | ((s[j - 4] >> 6) << 4);
    m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// k4_scale_min's integers four at a time, one per byte of a little-endian word: the scales
// (mins = false) or minimums (true) of groups 4h..4h+3, from the 12 scale bytes as three
// little-endian words s (bytes 0-3, 4-7, 8-11). Groups 0-3 are the low 6 bits of bytes 0-3 (scales)
// and 4-7 (minimums); groups 4-7 are the low (scales) or high (minimums) nibbles of bytes 8-11 under
// the top 2 bits of bytes 0-3 or 4-7.
WICK_HD inline uint32_t k4_scale_word(const uint32_t* s, bool mins, int h) {
  const uint32_t own = mins ? s[1] : s[0];
  if (h == 0) return own & 0x3f3f3f3fu;
  return ((mins ? s[2] >> 4 : s[2]) & 0x0f0f0f0fu) | ((own >> 2) & 0x30303030u);
}

// k4_scale_min of groups 2p and 2p+1 (p = 0..3), from the scale words as k4_scale_word takes them.
WICK_HD inline void k4_pair_scale_min(const uint32_t* s, int p, int sc[2], int m[2]) {
  const uint32_t scales = k4_scale_word(s, false, p / 2), mins = k4_scale_word(s, true, p / 2);
  const int shift = 16 * (p % 2);
  sc[0] = static_cast<int>((scales >> shift) & 0xffu);
  sc[1] = static_cast<int>((scales >> (shift + 8)) & 0xffu);
  m[0] = static_cast<int>((mins >> shift) & 0xffu);
  m[1] = static_cast<int>((mins >> (shift + 8)) & 0xffu);
}

// The 6-bit scale of group j (0..15) of Q3_K, biased by 32.
WICK_HD inline int q3k_scale(const uint8_t* s, int j) {
  const int low = j < 8 ? s[j] & 0xf : s[j - 8] >> 4;
  const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | high << 4) - 32;
}

// ---- groups -----------------------------------------------------------------------------------
// A group's two floats: value = d * (u - kOffset), d * u + m or d * u - m (Format::kMin).
struct GroupScale {
  float d;
  float m;
};

// f16 bits as f32 exactly, a NaN's payload too (ggml's conversion): the default of group_scale and
// load_unit, which a product's kernel may replace by the hardware's conversion.
struct ExactHalf {
  WICK_HD float operator()(uint16_t bits) const { return detail::f16_bits_to_f32(bits); }
};

template <QType Q, typename Half = ExactHalf>
WICK_HD GroupScale group_scale(const typename Format<Q>::Block& b, int g, Half half = {}) {
  if constexpr (Q == QType::Q4_0 || Q == QType::Q5_0 || Q == QType::Q8_0 || Q == QType::Q8_1) {
    return {half(b.d), 0.f};
  } else if constexpr (Q == QType::Q4_1 || Q == QType::Q5_1) {
    return {half(b.d), half(b.m)};
  } else if constexpr (Q == QType::Q2_K) {
    const int sc = b.scales[g];
    return {half(b.d) * static_cast<float>(sc & 0xf), half(b.dmin) * static_cast<float>(sc >> 4)};
  } else if constexpr (Q == QType::Q3_K) {
    return {half(b.d) * static_cast<float>(q3k_scale(b.scales, g)), 0.f};
  } else if constexpr (Q == QType::Q4_K || Q == QType::Q5_K) {
    int sc, m;
    k4_scale_min(b.scales, g, sc, m);
    return {half(b.d) * static_cast<float>(sc), half(b.dmin) * static_cast<float>(m)};
  } else if constexpr (Q == QType::Q6_K) {
    return {half(b.d) * static_cast<float>(b.scales[g]), 0.f};
  } else {  // Q8_K
    return {b.d, 0.f};
  }
}

// group_scale of every group of block b, the block's f16 fields converted once (the same values).
template <QType Q>
WICK_HD void block_scales(const typename Format<Q>::Block& b, GroupScale* s) {
  using F = Format<Q>;
  if constexpr (Q == QType::Q2_K) {
    const float d = half(b.d), dmin = half(b.dmin);
    WICK_QUANT_UNROLL
    for (int g = 0; g < F::kGroups; ++g)
      s[g] = {d * static_cast<float>(b.scales[g] & 0xf), dmin * static_cast<float>(b.scales[g] >> 4)};
  } else if constexpr (Q == QType::Q3_K) {
    const float d = half(b.d);
    WICK_QUANT_UNROLL
    for (int g = 0; g < F::kGroups; ++g) s[g] = {d * static_cast<float>(q3k_scale(b.scales, g)), 0.f};
  } else if constexpr (Q == QType::Q4_K || Q == QType::Q5_K) {
    const float d = half(b.d), dmin = half(b.dmin);
    WICK_QUANT_UNROLL
    for (int g = 0; g < F::kGroups; ++g) {
      int sc, m;
      k4_scale_min(b.scales, g, sc, m);
      s[g] = {d * static_cast<float>(sc), dmin * static_cast<float>(m)};
    }
  } else if constexpr (Q == QType::Q6_K) {
    const float d = half(b.d);
    WICK_QUANT_UNROLL
    for (int g = 0; g < F::kGroups; ++g) s[g] = {d * static_cast<float>(b.scales[g]), 0.f};
  } else {
    WICK_QUANT_UNROLL
    for (int g = 0; g < F::kGroups; ++g) s[g] = group_scale<Q>(b, g);
  }
}

// Values 4w .. 4w+3 of group g as the four bytes of a little-endian word (value 4w in the lowest).
template <QType Q>
WICK_HD uint32_t group_word(const typename Format<Q>::Block& b, int g, int w) {
  constexpr int A = Format<Q>::kAlign;
  if constexpr (Q == QType::Q4_0 || Q == QType::Q4_1) {
    return (load32<A>(b.qs + 4 * (w & 3)) >> (w & 4)) & 0x0f0f0f0fu;
  } else if constexpr (Q == QType::Q5_0 || Q == QType::Q5_1) {
    const uint32_t low = (load32<A>(b.qs + 4 * (w & 3)) >> (w & 4)) & 0x0f0f0f0fu;
    return low | spread4(load32<A>(b.qh) >> (4 * w)) << 4;
  } else if constexpr (Q == QType::Q8_0 || Q == QType::Q8_1) {
    return load32<A>(b.qs + 4 * w);
  } else if constexpr (Q == QType::Q2_K || Q == QType::Q3_K) {
    // Group g: half h of the block, bit pair j of the bytes, and the first or second 16 bytes.
    const int h = g / 8, j = (g % 8) / 2, at = 32 * h + 16 * (g % 2) + 4 * w;
    const uint32_t low = (load32<A>(b.qs + at) >> (2 * j)) & 0x03030303u;
    if constexpr (Q == QType::Q2_K) {
      return low;
    } else {
      return low | ((load32<A>(b.hmask + 16 * (g % 2) + 4 * w) >> (4 * h + j)) & 0x01010101u) << 2;
    }
  } else if constexpr (Q == QType::Q4_K || Q == QType::Q5_K) {
    const uint32_t low = (load32<A>(b.qs + 32 * (g / 2) + 4 * w) >> (4 * (g % 2))) & 0x0f0f0f0fu;
    if constexpr (Q == QType::Q4_K) {
      return low;
    } else {
      return low | ((load32<A>(b.qh + 4 * w) >> g) & 0x01010101u) << 4;
    }
  } else if constexpr (Q == QType::Q6_K) {
    // Group g: half h, quarter k of the half (nibble k / 2 of ql's first or second 32 bytes, bit pair
    // k of qh), and the first or second 16 values of the quarter.
    const int h = g / 8, k = (g % 8) / 2, sub = 16 * (g % 2) + 4 * w;
    const uint32_t low = (load32<A>(b.ql + 64 * h + 32 * (k % 2) + sub) >> (4 * (k / 2))) & 0x0f0f0f0fu;
    const uint32_t high = (load32<A>(b.qh + 32 * h + sub) >> (2 * k)) & 0x03030303u;
    return low | high << 4;
  } else {  // Q8_K
    return load32<A>(b.qs + 32 * g + 4 * w);
  }
}

// Byte i of a group word as the integer u.
template <QType Q>
WICK_HD int word_value(uint32_t word, int i) {
  const uint32_t byte = (word >> (8 * i)) & 0xffu;
  if constexpr (Format<Q>::kSigned) return static_cast<int8_t>(static_cast<uint8_t>(byte));
  return static_cast<int>(byte);
}

// One value of a group, rounded exactly as ggml's dequantize_row_* rounds it.
template <QType Q>
WICK_HD float group_value(GroupScale s, int u) {
  using F = Format<Q>;
  if constexpr (F::kMin == MinForm::Add) return static_cast<float>(u) * s.d + s.m;
  if constexpr (F::kMin == MinForm::Sub) return s.d * static_cast<float>(u) - s.m;
  return static_cast<float>(u - F::kOffset) * s.d;
}

// The values of group g, as ggml's dequantization gives them.
template <QType Q>
WICK_HD void dequantize_group(const typename Format<Q>::Block& b, int g, float* out) {
  const GroupScale s = group_scale<Q>(b, g);
WICK_QUANT_UNROLL
  for (int w = 0; w < Format<Q>::kGroup / 4; ++w) {
    const uint32_t word = group_word<Q>(b, g, w);
WICK_QUANT_UNROLL
    for (int i = 0; i < 4; ++i) out[4 * w + i] = group_value<Q>(s, word_value<Q>(word, i));
  }
}

// For integer dot products: value = d * u - bias, the offset and the minimum folded into one bias
// (mathematically equal; rounded differently from group_value).
template <QType Q>
WICK_HD float group_bias(GroupScale s) {
  using F = Format<Q>;
  if constexpr (F::kMin == MinForm::Add) return -s.m;
  if constexpr (F::kMin == MinForm::Sub) return s.m;
  return s.d * static_cast<float>(F::kOffset);
}

// ---- products with activations rounded to 8 bits ------------------------------------------------
// Values per unit of the products: x's rounding scale and one or two weight groups (not a warp).
inline constexpr int kUnit = 32;

// The fused qmatmul kernels round each 32 activations to int8 under one f32 scale (as ggml's Q8_0,
// with an f32 scale): a = d * q, q = round(x / d), d = amax / 127. s0 and s1 are d times the sums of
// the first and second 16 q (the bias terms of 16- and 32-value groups).
struct ActScale {
  float d;
  float s0;
  float s1;
};

// Rounds 32 activations (any float type the caller widened) to q and their scale.
WICK_HD inline ActScale quantize_act(const float* x, int8_t* q) {
  float amax = 0.f;
  for (int i = 0; i < kUnit; ++i) amax = fmaxf(amax, fabsf(x[i]));
  const float d = amax / 127.f;
  const float id = d != 0.f ? 1.f / d : 0.f;
  int sum0 = 0, sum1 = 0;
  for (int i = 0; i < kUnit; ++i) {
    const int v = static_cast<int>(roundf(x[i] * id));  // |x * id| <= 127, halves away from 0 (ggml)
    q[i] = static_cast<int8_t>(v);
    (i < 16 ? sum0 : sum1) += v;
  }
  return {d, d * static_cast<float>(sum0), d * static_cast<float>(sum1)};
}

// One Q8_0 block of 32 values as ggml's reference quantizer writes it (quant::quantize's bytes):
// quantize_act's values, and its scale rounded to f16 (the values were rounded against the f32
// scale, as ggml does). The paged KV cache's Q8_0 rows are written with it on every backend.
WICK_HD inline void quantize_q8_0(const float* x, BlockQ8_0& b) {
  b.d = detail::f32_to_f16_bits(quantize_act(x, b.qs).d);
}

// The sum of the four byte products of a and b (signed bytes): the GPU's dp4a / sdot4 where the
// caller provides one, this loop on the host.
WICK_HD inline int dot4_bytes(uint32_t a, uint32_t b, int c) {
  for (int i = 0; i < 4; ++i)
    c += static_cast<int8_t>(static_cast<uint8_t>(a >> (8 * i))) * static_cast<int8_t>(static_cast<uint8_t>(b >> (8 * i)));
  return c;
}

// 32 values of a weight row, unit j of block b (group j, or groups 2j and 2j+1 of a 16-value
// format), unpacked once for every row of x it meets.
struct Unit {
  uint32_t w[8];
  GroupScale s[2];  // s[1]: the second group of a 16-value format
};

template <QType Q, typename Half = ExactHalf>
WICK_HD Unit load_unit(const typename Format<Q>::Block& b, int j, Half half = {}) {
  using F = Format<Q>;
  Unit u;
  if constexpr (F::kGroup == 32) {
    u.s[0] = group_scale<Q>(b, j, half);
    u.s[1] = {0.f, 0.f};
    WICK_QUANT_UNROLL
    for (int w = 0; w < 8; ++w) u.w[w] = group_word<Q>(b, j, w);
  } else {
    u.s[0] = group_scale<Q>(b, 2 * j, half);
    u.s[1] = group_scale<Q>(b, 2 * j + 1, half);
    WICK_QUANT_UNROLL
    for (int w = 0; w < 4; ++w) {
      u.w[w] = group_word<Q>(b, 2 * j, w);
      u.w[w + 4] = group_word<Q>(b, 2 * j + 1, w);
    }
  }
  return u;
}

// The unit times 32 rounded activations (their words aw[0..7] and scale a): its contribution to
// the row's dot product. Dot4 is the 4-byte integer dot product (dot4_bytes's signature).
template <QType Q, typename Dot4>
WICK_HD float unit_dot(const Unit& u, const uint32_t* aw, ActScale a, Dot4 dot4) {
  int acc0 = 0, acc1 = 0;
  WICK_QUANT_UNROLL
  for (int w = 0; w < 4; ++w) {
    acc0 = dot4(u.w[w], aw[w], acc0);
    acc1 = dot4(u.w[w + 4], aw[w + 4], acc1);
  }
  if constexpr (Format<Q>::kGroup == 32) {
    return u.s[0].d * a.d * static_cast<float>(acc0 + acc1) - group_bias<Q>(u.s[0]) * (a.s0 + a.s1);
  } else {
    return a.d * (u.s[0].d * static_cast<float>(acc0) + u.s[1].d * static_cast<float>(acc1)) -
           (group_bias<Q>(u.s[0]) * a.s0 + group_bias<Q>(u.s[1]) * a.s1);
  }
}

}  // namespace wick::kernels::quant
