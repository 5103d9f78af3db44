// ggml's reference quantizers (quantize_row_*_ref in ggml-quants.c, which llama-quantize runs
// without an importance matrix), one block at a time. Every float operation is the one ggml
// performs, in its order, so that the blocks come out bit for bit the same; the library is built
// without contraction into FMA (CMakeLists.txt), as ggml's reference build is.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "quant/quant_ops.h"

namespace wick::quant::detail {

namespace kq = kernels::quant;

namespace {

using kernels::quant::Format;

uint16_t to_half(float f) { return wick::detail::f32_to_f16_bits(f); }
float from_half(uint16_t h) { return wick::detail::f16_bits_to_f32(h); }

// Round to nearest, ties to even, by adding 1.5 * 2^23 (ggml's nearest_int); |f| < 2^22.
int nearest_int(float f) {
  const float v = f + 12582912.f;
  int32_t i;
  std::memcpy(&i, &v, sizeof i);
  return (i & 0x007fffff) - 0x00400000;
}

// float to int truncated toward zero, as C's conversion; a value out of int's range (where ggml's
// conversion is undefined: overflowing inputs) gives 0.
int trunc_int(float v) { return v > -2e9f && v < 2e9f ? static_cast<int>(v) : 0; }

// The value of largest magnitude (the first, on ties), and that magnitude.
void signed_max(const float* x, int n, float& max, float& amax) {
  max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    if (amax < std::fabs(x[i])) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
}

void min_max(const float* x, int n, float& min, float& max) {
  min = FLT_MAX, max = -FLT_MAX;
  for (int i = 0; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
  }
}

// ---- the 32-value formats -----------------------------------------------------------------------
// Q4_0 and Q5_0: d = max / -(2^(bits-1)), the value of largest magnitude mapping to the lowest level.
template <int kBits, typename Block>
void quantize_symmetric(const float* x, Block& b) {
  constexpr int kHalf = 1 << (kBits - 1), kTop = (1 << kBits) - 1;
  float max, amax;
  signed_max(x, 32, max, amax);
  const float d = max / static_cast<float>(-kHalf);
  const float id = d != 0.f ? 1.0f / d : 0.0f;
  b.d = to_half(d);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    // Truncated toward zero, as ggml's conversion to int8_t; x * id lies in [-2^(bits-1), 2^(bits-1)].
    const float bias = static_cast<float>(kHalf) + 0.5f;
    const int q0 = std::min(kTop, trunc_int(x[j] * id + bias));
    const int q1 = std::min(kTop, trunc_int(x[16 + j] * id + bias));
    b.qs[j] = static_cast<uint8_t>((q0 & 0xf) | (q1 & 0xf) << 4);
    qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j | static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
  }
  if constexpr (kBits == 5) std::memcpy(b.qh, &qh, sizeof qh);
}

// Q4_1 and Q5_1: d = (max - min) / (2^bits - 1) and the minimum m.
template <int kBits, typename Block>
void quantize_affine(const float* x, Block& b) {
  constexpr int kTop = (1 << kBits) - 1;
  float min, max;
  min_max(x, 32, min, max);
  const float d = (max - min) / static_cast<float>(kTop);
  const float id = d != 0.f ? 1.0f / d : 0.0f;
  b.d = to_half(d);
  b.m = to_half(min);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    // Truncated; Q4_1 clamps at 15, while ggml leaves Q5_1's level unclamped (32 keeps no bit).
    int q0 = trunc_int((x[j] - min) * id + 0.5f);
    int q1 = trunc_int((x[16 + j] - min) * id + 0.5f);
    if constexpr (kBits == 4) q0 = std::min(kTop, q0), q1 = std::min(kTop, q1);
    b.qs[j] = static_cast<uint8_t>((q0 & 0xf) | (q1 & 0xf) << 4);
    qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j | static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
  }
  if constexpr (kBits == 5) std::memcpy(b.qh, &qh, sizeof qh);
}

// Q8_0 and Q8_1: d = amax / 127, values rounded half away from zero.
template <typename Block>
void quantize_q8(const float* x, Block& b) {
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.f;
  const float id = d != 0.f ? 1.0f / d : 0.0f;
  b.d = to_half(d);
  int sum = 0;
  for (int j = 0; j < 32; ++j) {
    b.qs[j] = static_cast<int8_t>(trunc_int(std::round(x[j] * id)));
    sum += b.qs[j];
  }
  if constexpr (std::is_same_v<Block, kq::BlockQ8_1>) b.s = to_half(static_cast<float>(sum) * d);
}

// ---- K-quant helpers (ggml's make_qx_quants, make_q3_quants, make_qkx2_quants) ----------------
// Levels -nmax .. nmax-1 (stored + nmax) for n values, the scale refined over 18 trial inverse
// scales to minimise the error weighted by x^2 (rmse_type 1, no importance weights).
// The first of v[0..n) with the largest magnitude (0 when every one is 0 or NaN), as ggml picks the
// scale a K-quant block's scales are measured against.
float largest_magnitude(const float* v, int n) {
  float best = 0.f, best_abs = 0.f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(v[i]) > best_abs) {
      best_abs = std::fabs(v[i]);
      best = v[i];
    }
  }
  return best;
}

float make_qx_quants(int n, int nmax, const float* x, int8_t* L) {
  float max, amax;
  signed_max(x, n, max, amax);
  if (amax < 1e-15f) {
    std::fill(L, L + n, int8_t{0});
    return 0.f;
  }
  auto level = [&](float iscale, int i) { return std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i]))); };
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = level(iscale, i);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  float scale = suml2 != 0.f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = level(iscale, i);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * static_cast<float>(l);
      suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + level(iscale, i));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Levels -nmax .. nmax-1 (stored + nmax), improved one value at a time for up to five passes.
float make_q3_quants(int n, int nmax, const float* x, int8_t* L) {
  float max, amax;
  signed_max(x, n, max, amax);
  if (amax < 1e-15f) {
    std::fill(L, L + n, int8_t{0});
    return 0.f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i])));
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * static_cast<float>(L[i]);
      if (slx > 0) {
        float sl2 = suml2 - w * static_cast<float>(L[i]) * static_cast<float>(L[i]);
        const int l = std::max(-nmax, std::min(nmax - 1, nearest_int(x[i] * sl2 / slx)));
        if (l != L[i]) {
          slx += w * x[i] * static_cast<float>(l);
          sl2 += w * static_cast<float>(l) * static_cast<float>(l);
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(l);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Levels 0 .. nmax with a scale and a minimum (returned negated in *the_min), searched over
// nstep + 1 trial inverse scales for the least weighted error (absolute when use_mad).
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                       uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(L, L + n, uint8_t{0});
    *the_min = -min;
    return 0.f;
  }
  auto error = [&](float scale, float mn, const uint8_t* levels) {
    float e = 0;
    for (int i = 0; i < n; ++i) {
      float diff = scale * static_cast<float>(levels[i]) + mn - x[i];
      diff = use_mad ? std::fabs(diff) : diff * diff;
      e += weights[i] * diff;
    }
    return e;
  };
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, nearest_int(iscale * (x[i] - min)))));
  float best_error = error(scale, min, L);
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::max(0, std::min(nmax, nearest_int(iscale * (x[i] - min))));
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      sum_l += w * static_cast<float>(l);
      sum_l2 += w * static_cast<float>(l) * static_cast<float>(l);
      sum_xl += w * static_cast<float>(l) * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      const float cur_error = error(this_scale, this_min, Laux);
      if (cur_error < best_error) {
        std::copy(Laux, Laux + n, L);
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// Four 2-bit levels of each 128 values per byte: byte l of a 32-byte run holds values l, l+32,
// l+64 and l+96 (Q2_K, Q3_K).
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < 256; j += 128)
    for (int l = 0; l < 32; ++l)
      qs[j / 4 + l] =
          static_cast<uint8_t>(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 | L[j + l + 96] << 6);
}

// Q4_K and Q5_K: eight groups of 32 with a scale and a minimum each, both stored as 6 bits under
// two f16 super-block scales.
template <int kTop, typename Block>
void quantize_k_affine(const float* x, Block& b, uint8_t* L, float rmin, int nstep) {
  float scales[8], mins[8], weights[32];
  uint8_t Laux[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, kTop, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < 8; ++j) {
    const uint8_t ls = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    const uint8_t lm = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
    if (j < 4) {
      b.scales[j] = ls;
      b.scales[j + 4] = lm;
    } else {
      b.scales[j + 4] = static_cast<uint8_t>((ls & 0xf) | (lm & 0xf) << 4);
      b.scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      b.scales[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  b.d = to_half(max_scale / 63.f);
  b.dmin = to_half(max_min / 63.f);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    kq::k4_scale_min(b.scales, j, sc, m);
    const float d = from_half(b.d) * static_cast<float>(sc);
    if (d == 0.f) continue;
    const float dm = from_half(b.dmin) * static_cast<float>(m);
    for (int i = 0; i < 32; ++i)
      L[32 * j + i] = static_cast<uint8_t>(std::max(0, std::min(kTop, nearest_int((x[32 * j + i] + dm) / d))));
  }
}

void quantize_q2_k(const float* x, kq::BlockQ2_K& b) {
  uint8_t L[256], Laux[16];
  float weights[16], mins[16], scales[16];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 16; ++j) {
    for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
    scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  std::memset(b.scales, 0, sizeof b.scales);
  b.d = to_half(max_scale > 0 ? max_scale / 15.f : 0.f);
  if (max_scale > 0) {
    const float iscale = 15.f / max_scale;
    for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
  }
  b.dmin = to_half(max_min > 0 ? max_min / 15.f : 0.f);
  if (max_min > 0) {
    const float iscale = 15.f / max_min;
    for (int j = 0; j < 16; ++j) b.scales[j] |= static_cast<uint8_t>(nearest_int(iscale * mins[j]) << 4);
  }
  for (int j = 0; j < 16; ++j) {
    const float d = from_half(b.d) * static_cast<float>(b.scales[j] & 0xf);
    if (d == 0.f) continue;
    const float dm = from_half(b.dmin) * static_cast<float>(b.scales[j] >> 4);
    for (int i = 0; i < 16; ++i)
      L[16 * j + i] = static_cast<uint8_t>(std::max(0, std::min(3, nearest_int((x[16 * j + i] + dm) / d))));
  }
  pack_2bit(L, b.qs);
}

void quantize_q3_k(const float* x, kq::BlockQ3_K& b) {
  int8_t L[256];
  float scales[16];
  for (int j = 0; j < 16; ++j) scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
  const float max_scale = largest_magnitude(scales, 16);
  std::memset(b.scales, 0, sizeof b.scales);
  if (max_scale != 0.f) {
    const float iscale = -32.f / max_scale;
    for (int j = 0; j < 16; ++j) {
      int l = static_cast<int8_t>(nearest_int(iscale * scales[j]));
      l = std::max(-32, std::min(31, l)) + 32;
      if (j < 8) {
        b.scales[j] = static_cast<uint8_t>(l & 0xf);
      } else {
        b.scales[j - 8] |= static_cast<uint8_t>((l & 0xf) << 4);
      }
      b.scales[j % 4 + 8] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
    }
    b.d = to_half(1 / iscale);
  } else {
    b.d = to_half(0.f);
  }
  for (int j = 0; j < 16; ++j) {
    const float d = from_half(b.d) * static_cast<float>(kq::q3k_scale(b.scales, j));
    if (d == 0.f) continue;
    for (int i = 0; i < 16; ++i)
      L[16 * j + i] = static_cast<int8_t>(std::max(-4, std::min(3, nearest_int(x[16 * j + i] / d))) + 4);
  }
  // The third bit of value j goes to bit j / 32 of hmask[j % 32].
  std::memset(b.hmask, 0, sizeof b.hmask);
  uint8_t low[256];
  for (int j = 0; j < 256; ++j) {
    if (L[j] > 3) b.hmask[j % 32] |= static_cast<uint8_t>(1 << (j / 32));
    low[j] = static_cast<uint8_t>(L[j] > 3 ? L[j] - 4 : L[j]);
  }
  pack_2bit(low, b.qs);
}

void quantize_q6_k(const float* x, kq::BlockQ6_K& b) {
  int8_t L[256];
  float scales[16];
  for (int g = 0; g < 16; ++g) scales[g] = make_qx_quants(16, 32, x + 16 * g, L + 16 * g);
  const float max_scale = largest_magnitude(scales, 16);
  if (std::fabs(max_scale) < 1e-15f) {
    std::memset(&b, 0, sizeof b);
    return;
  }
  const float iscale = -128.f / max_scale;
  b.d = to_half(1 / iscale);
  for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[g])));
  for (int j = 0; j < 16; ++j) {
    const float d = from_half(b.d) * static_cast<float>(b.scales[j]);
    if (d == 0.f) continue;
    for (int i = 0; i < 16; ++i)
      L[16 * j + i] = static_cast<int8_t>(std::max(-32, std::min(31, nearest_int(x[16 * j + i] / d))) + 32);
  }
  for (int j = 0; j < 256; j += 128) {
    uint8_t* ql = b.ql + j / 2;
    uint8_t* qh = b.qh + j / 4;
    for (int l = 0; l < 32; ++l) {
      const int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
      ql[l] = static_cast<uint8_t>((q1 & 0xf) | (q3 & 0xf) << 4);
      ql[l + 32] = static_cast<uint8_t>((q2 & 0xf) | (q4 & 0xf) << 4);
      qh[l] = static_cast<uint8_t>((q1 >> 4) | (q2 >> 4) << 2 | (q3 >> 4) << 4 | (q4 >> 4) << 6);
    }
  }
}

void quantize_q8_k(const float* x, kq::BlockQ8_K& b) {
  float max, amax;
  signed_max(x, 256, max, amax);
  if (amax == 0.f) {
    std::memset(&b, 0, sizeof b);
    return;
  }
  const float iscale = -127.f / max;
  for (int j = 0; j < 256; ++j) b.qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
  for (int j = 0; j < 16; ++j) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) sum += b.qs[16 * j + i];
    b.bsums[j] = static_cast<int16_t>(sum);
  }
  b.d = 1 / iscale;
}

bool finite_half(uint16_t h) { return (h & 0x7c00u) != 0x7c00u; }

}  // namespace

template <QType Q>
bool quantize_block(const float* x, typename kq::Format<Q>::Block& b) {
  if constexpr (Q == QType::Q4_0) quantize_symmetric<4>(x, b);
  if constexpr (Q == QType::Q5_0) quantize_symmetric<5>(x, b);
  if constexpr (Q == QType::Q4_1) quantize_affine<4>(x, b);
  if constexpr (Q == QType::Q5_1) quantize_affine<5>(x, b);
  if constexpr (Q == QType::Q8_0 || Q == QType::Q8_1) quantize_q8(x, b);
  if constexpr (Q == QType::Q2_K) quantize_q2_k(x, b);
  if constexpr (Q == QType::Q3_K) quantize_q3_k(x, b);
  if constexpr (Q == QType::Q4_K || Q == QType::Q5_K) {
    uint8_t L[256];
    constexpr bool k4 = Q == QType::Q4_K;
    std::memset(b.scales, 0, sizeof b.scales);
    quantize_k_affine<k4 ? 15 : 31>(x, b, L, k4 ? -1.f : -0.5f, k4 ? 20 : 15);
    if constexpr (k4) {
      for (int j = 0; j < 256; j += 64)
        for (int l = 0; l < 32; ++l) b.qs[j / 2 + l] = static_cast<uint8_t>(L[j + l] | L[j + l + 32] << 4);
    } else {
      std::memset(b.qh, 0, sizeof b.qh);
      for (int n = 0, bit = 0; n < 256; n += 64, bit += 2) {
        for (int j = 0; j < 32; ++j) {
          const int l1 = L[n + j], l2 = L[n + j + 32];
          b.qh[j] |= static_cast<uint8_t>((l1 >> 4) << bit | (l2 >> 4) << (bit + 1));
          b.qs[n / 2 + j] = static_cast<uint8_t>((l1 & 0xf) | (l2 & 0xf) << 4);
        }
      }
    }
  }
  if constexpr (Q == QType::Q6_K) quantize_q6_k(x, b);
  if constexpr (Q == QType::Q8_K) quantize_q8_k(x, b);
  // Below max_magnitude every scale is finite, but where ggml's least-squares fit degenerates.
  if constexpr (Q == QType::Q8_K) {
    return std::isfinite(b.d);
  } else {
    bool finite = finite_half(b.d);
    if constexpr (Q == QType::Q4_1 || Q == QType::Q5_1) finite = finite && finite_half(b.m);
    if constexpr (Q == QType::Q8_1) finite = finite && finite_half(b.s);
    if constexpr (kq::Format<Q>::kMin == kq::MinForm::Sub) finite = finite && finite_half(b.dmin);
    return finite;
  }
}

#define WICK_X(e, name, ggml) \
  template bool quantize_block<QType::e>(const float*, typename kq::Format<QType::e>::Block&);
WICK_FORALL_QTYPES(WICK_X)
#undef WICK_X

// ---- the magnitude each format holds ------------------------------------------------------------
// f16 rounds to infinity from 65520 up. Every block of values below a format's limit in magnitude
// keeps finite scales. The 32-value formats' limits are exact: a block of values at the limit
// overflows. The K-quants' limits bound ggml's searches (in exact arithmetic), rounded down:
// - make_qkx2_quants (Q2_K, Q4_K, Q5_K) fits x = scale * l + min by weighted least squares over the
//   levels l = round(t) of t = iscale * (x - min), min = min(x, 0), R = max - min <= 2 amax and
//   T = iscale * R. With e = t - l in an interval of width W (1, or 0.5 + T - nmax where the top
//   level clamps) and b = cov(e, l) / var(l) <= W (l is an integer), the slope is (1 + b) / iscale
//   and the minimum -min + (b * mean(l) - mean(e)) / iscale <= -min + (W * nmax + 0.5) / iscale,
//   which binds before the slope does:
//   Q2_K (T in [2.5, 4]): minimum <= 3.8 amax, dmin = largest minimum / 15: 65520 * 15 / 3.8.
//   Q4_K (T in [14, 16]): minimum <= 3.875 amax, dmin = largest minimum / 63: 65520 * 63 / 3.875.
//   Q5_K (T in [30.5, 32]): minimum <= 3.9375 amax: 65520 * 63 / 3.9375. In float the fit can
//   degenerate on nearly equal values (D rounds to a tiny positive number) and give a scale and
//   minimum several times the values: quantize_block reports those.
// - Q3_K and Q6_K: a group's scale is a mean of x / l weighted by x^2 l^2 over the levels |l| >= 1,
//   at most amax for Q3_K (d = largest scale / 32) and at most 1.5 amax / 31.1 for Q6_K, whose
//   largest value has |t| >= 31.1 (d = largest scale / 128).
template <QType Q>
constexpr float kMagnitudeLimit = [] {
  constexpr float kHalfOverflow = 65520.f;
  if constexpr (Q == QType::Q4_0) return 8 * kHalfOverflow;                  // d = max / -8, exactly
  if constexpr (Q == QType::Q5_0) return 16 * kHalfOverflow;                 // d = max / -16
  if constexpr (Q == QType::Q4_1 || Q == QType::Q5_1) return kHalfOverflow;  // m: the least value
  if constexpr (Q == QType::Q8_0) return 127 * kHalfOverflow;                // d = amax / 127
  if constexpr (Q == QType::Q8_1) return kHalfOverflow / 32;                 // s = d * (sum of levels) <= 32 amax
  if constexpr (Q == QType::Q2_K) return 2.58e5f;                            // 258631
  if constexpr (Q == QType::Q3_K) return 2.09e6f;                            // 2096640
  if constexpr (Q == QType::Q4_K) return 1.06e6f;                            // 1065228
  if constexpr (Q == QType::Q5_K) return 1.04e6f;                            // 1048320
  if constexpr (Q == QType::Q6_K) return 1.73e8f;                            // 173881344
  // Q8_K's d is f32, amax / 127; a level of 127 times it passes FLT_MAX only at FLT_MAX.
  if constexpr (Q == QType::Q8_K) return FLT_MAX;
}();

}  // namespace wick::quant::detail

namespace wick::quant {

float max_magnitude(QType qtype) {
  return kernels::quant::dispatch_qtype(detail::check_qtype("max_magnitude", qtype),
                                        []<QType Q>() { return detail::kMagnitudeLimit<Q>; });
}

}  // namespace wick::quant
