// The random number generator of every backend: Philox4x32-10 (Salmon et al., "Parallel random
// numbers: as easy as 1, 2, 3", SC 2011), counter based, so element i of a tensor depends only on
// (seed, stream, i) and the CPU and GPUs produce the same numbers in any parallel order.
//
// Element i of a call's output uses counter block i / L, word lanes of it, where L is the
// number of values one block of four 32-bit words yields:
//   f32 math (f32, f16, bf16, f8e4m3): L = 4, uniform from one word, normal from a pair of words
//                                     (Box-Muller: the pair's cos and sin outputs);
//   f64:                               L = 2, uniform from two words, normal from all four.
// The counter is (block lo, block hi, stream lo, stream hi); the key is (seed lo, seed hi).
#pragma once

#include <cstdint>

#include "kernels/numeric.h"

namespace wick::kernels {

struct PhiloxBlock {
  uint32_t w[4];
};

WICK_HD inline PhiloxBlock philox4x32_10(PhiloxBlock ctr, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(kM0) * ctr.w[0];
    uint64_t p1 = static_cast<uint64_t>(kM1) * ctr.w[2];
    ctr = {{static_cast<uint32_t>(p1 >> 32) ^ ctr.w[1] ^ k0, static_cast<uint32_t>(p1),
            static_cast<uint32_t>(p0 >> 32) ^ ctr.w[3] ^ k1, static_cast<uint32_t>(p0)}};
    k0 += kW0;
    k1 += kW1;
  }
  return ctr;
}

WICK_HD inline PhiloxBlock philox_block(uint64_t seed, uint64_t stream, uint64_t block) {
  PhiloxBlock ctr = {{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), static_cast<uint32_t>(stream),
                      static_cast<uint32_t>(stream >> 32)}};
  return philox4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// Values per block for math type M.
template <typename M>
inline constexpr int kPhiloxLanes = sizeof(M) == 8 ? 2 : 4;

// Uniform in [0, 1): 24 (f32) or 53 (f64) random bits.
WICK_HD inline float unit_f32(uint32_t w) { return static_cast<float>(w >> 8) * 0x1p-24f; }
WICK_HD inline double unit_f64(uint32_t hi, uint32_t lo) {
  return static_cast<double>(((static_cast<uint64_t>(hi) << 32) | lo) >> 11) * 0x1p-53;
}

// Products rounded on their own: a fused multiply-add would give other bits than the CPU.
WICK_HD inline float mul_rn(float a, float b) {
#if WICK_DEVICE_CODE
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
WICK_HD inline double mul_rn(double a, double b) {
#if WICK_DEVICE_CODE
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

// Fills out[0..L) with the uniform values in [lo, up) of one block.
template <typename M>
WICK_HD inline void philox_uniform(const PhiloxBlock& b, M lo, M up, M* out) {
  if constexpr (sizeof(M) == 8) {
    out[0] = lo + mul_rn(unit_f64(b.w[0], b.w[1]), up - lo);
    out[1] = lo + mul_rn(unit_f64(b.w[2], b.w[3]), up - lo);
  } else {
    for (int l = 0; l < 4; ++l) out[l] = lo + mul_rn(unit_f32(b.w[l]), up - lo);
  }
}

// Fills out[0..L) with normal values (Box-Muller) of one block.
template <typename M>
WICK_HD inline void philox_normal(const PhiloxBlock& b, M mean, M std, M* out) {
  constexpr M kTwoPi = M(6.283185307179586);
  if constexpr (sizeof(M) == 8) {
    M u1 = unit_f64(b.w[0], b.w[1]) + 0x1p-53;  // (0, 1]: log stays finite
    M u2 = unit_f64(b.w[2], b.w[3]);
    M r = math::sqrt(M(-2) * math::log(u1));
    out[0] = mean + std * (r * math::cos(kTwoPi * u2));
    out[1] = mean + std * (r * math::sin(kTwoPi * u2));
  } else {
    for (int p = 0; p < 2; ++p) {
      M u1 = unit_f32(b.w[2 * p]) + 0x1p-24f;
      M u2 = unit_f32(b.w[2 * p + 1]);
      M r = math::sqrt(M(-2) * math::log(u1));
      out[2 * p] = mean + std * (r * math::cos(kTwoPi * u2));
      out[2 * p + 1] = mean + std * (r * math::sin(kTwoPi * u2));
    }
  }
}

}  // namespace wick::kernels
