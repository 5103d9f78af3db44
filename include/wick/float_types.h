// Storage types for the low-precision floats: f16 (IEEE binary16), bf16 and f8e4m3 (OCP e4m3fn).
// They hold bits and convert to and from f32/f64 with round-to-nearest-even; arithmetic is done
// in f32 by the caller. The conversions are bit manipulation, except that GPU code converts f16
// with the hardware's own instruction (the same IEEE rounding, NaNs taken from the bit version), so
// the host and every GPU produce the same bits. Usable in host code and in CUDA/HIP device code.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

#if defined(__CUDACC__) || defined(__HIPCC__)
#define WICK_HD __host__ __device__
#else
#define WICK_HD
#endif

// 1 while compiling for a GPU (either vendor), 0 for host code.
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define WICK_DEVICE_CODE 1
#else
#define WICK_DEVICE_CODE 0
#endif

namespace wick {
namespace detail {

WICK_HD inline uint32_t f32_bits(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, sizeof u);
  return u;
}
WICK_HD inline float f32_from_bits(uint32_t u) {
  float f;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
}
WICK_HD inline uint64_t f64_bits(double d) {
  uint64_t u;
  __builtin_memcpy(&u, &d, sizeof u);
  return u;
}

// Rounds the magnitude `q` (the kept bits) up when the dropped bits `rem` exceed half of the
// dropped range, or equal it and `q` is odd: round to nearest, ties to even.
WICK_HD inline uint32_t round_nearest_even(uint32_t q, uint32_t rem, uint32_t half) {
  return (rem > half || (rem == half && (q & 1u))) ? q + 1 : q;
}

// f64 -> f32 rounding to odd: truncate toward zero, then set the last bit if anything was lost.
// A second rounding of the result to a format with at most 11 significant bits is then exactly
// the single correct rounding of the f64 (f32 has 24 >= 2*11 + 2 bits), so f64 -> f16/bf16/f8
// goes through this without double-rounding errors.
WICK_HD inline float f64_to_f32_round_odd(double d) {
  float f = static_cast<float>(d);
  if (d != d || static_cast<double>(f) == d) return f;
  uint32_t b = f32_bits(f);
  double af = static_cast<double>(f) < 0 ? -static_cast<double>(f) : static_cast<double>(f);
  double ad = d < 0 ? -d : d;
  if (af > ad) b -= 1;  // one step toward zero; also turns an overflowed inf into the max finite
  return f32_from_bits(b | 1u);
}

#if WICK_DEVICE_CODE
// f16 conversions by the GPU's instruction (cvt on NVIDIA, v_cvt on AMD): round to nearest even.
__device__ inline uint16_t f16_hardware_bits(float f) {
#if defined(__HIP_DEVICE_COMPILE__)
  return __builtin_bit_cast(uint16_t, static_cast<_Float16>(f));
#else
  return __half_as_ushort(__float2half_rn(f));
#endif
}
__device__ inline float f16_hardware_value(uint16_t h) {
#if defined(__HIP_DEVICE_COMPILE__)
  return static_cast<float>(__builtin_bit_cast(_Float16, h));
#else
  return __half2float(__ushort_as_half(h));
#endif
}
#endif

WICK_HD inline uint16_t f32_to_f16_bits(float f) {
  uint32_t x = f32_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  const auto nan = static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
#if WICK_DEVICE_CODE
  // The GPU's conversion rounds finite values and infinities as the lines below do, in one
  // instruction where they take a dozen and a branch (which made every f16 kernel ALU-bound); a
  // NaN keeps the payload bits the host gives it.
  return ax > 0x7f800000u ? nan : f16_hardware_bits(f);
#else
  if (ax > 0x7f800000u) return nan;
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (ax >= 0x38800000u) {                                              // normal: >= 2^-14
    uint32_t r = ax - ((127u - 15u) << 23);
    return static_cast<uint16_t>(sign | round_nearest_even(r >> 13, r & 0x1fffu, 0x1000u));
  }
  if (ax <= 0x33000000u) return static_cast<uint16_t>(sign);  // <= 2^-25 rounds to zero
  // Subnormal: the result counts units of 2^-24.
  uint32_t e = ax >> 23;
  uint32_t m = (ax & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126u - e;
  uint32_t q = round_nearest_even(m >> shift, m & ((1u << shift) - 1), 1u << (shift - 1));
  return static_cast<uint16_t>(sign | q);
#endif
}

WICK_HD inline float f16_bits_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu;
  uint32_t m = h & 0x3ffu;
  const float special = f32_from_bits(sign | 0x7f800000u | (m << 13));  // infinity or NaN, payload kept
#if WICK_DEVICE_CODE
  return e == 0x1f ? special : f16_hardware_value(h);  // every finite f16 is exact in f32
#else
  if (e == 0x1f) return special;
  if (e == 0) {
    float v = static_cast<float>(m) * 5.9604644775390625e-8f;  // m * 2^-24, exact
    return f32_from_bits(sign | f32_bits(v));
  }
  return f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
#endif
}

// A NaN keeps its sign and payload's top bits, made quiet. Written as a select: GPU kernels unroll
// it many times over, and an early return for NaN became a branch per value there.
WICK_HD inline uint16_t f32_to_bf16_bits(float f) {
  const uint32_t x = f32_bits(f);
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16, quiet = (x >> 16) | 0x40u;
  return static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

WICK_HD inline float bf16_bits_to_f32(uint16_t b) { return f32_from_bits(static_cast<uint32_t>(b) << 16); }

// OCP e4m3fn: bias 7, no infinities, NaN = S.1111.111, largest finite 448. Rounding is to
// nearest even as if the format had more exponent range; what rounds past 448 (|x| > 464) and
// infinities become NaN, as in PyTorch's and ml_dtypes' float8_e4m3fn.
WICK_HD inline uint8_t f32_to_f8e4m3_bits(float f) {
  uint32_t x = f32_bits(f);
  uint32_t sign = (x >> 24) & 0x80u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x43e80000u) return static_cast<uint8_t>(sign | 0x7fu);  // NaN, inf, or past 464
  if (ax >= 0x3c800000u) {                                          // normal: >= 2^-6
    uint32_t r = ax - ((127u - 7u) << 23);
    return static_cast<uint8_t>(sign | round_nearest_even(r >> 20, r & 0xfffffu, 0x80000u));
  }
  if (ax <= 0x3a800000u) return static_cast<uint8_t>(sign);  // <= 2^-10 rounds to zero
  // Subnormal: the result counts units of 2^-9.
  uint32_t e = ax >> 23;
  uint32_t m = (ax & 0x7fffffu) | 0x800000u;
  uint32_t shift = 141u - e;
  uint32_t q = round_nearest_even(m >> shift, m & ((1u << shift) - 1), 1u << (shift - 1));
  return static_cast<uint8_t>(sign | q);
}

WICK_HD inline float f8e4m3_bits_to_f32(uint8_t b) {
  uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  if ((b & 0x7fu) == 0x7fu) return f32_from_bits(sign | 0x7fc00000u);
  uint32_t e = (b >> 3) & 0xfu;
  uint32_t m = b & 0x7u;
  if (e == 0) return f32_from_bits(sign | f32_bits(static_cast<float>(m) * 0.001953125f));
  return f32_from_bits(sign | ((e + 120u) << 23) | (m << 20));
}

}  // namespace detail

// A bits-only value type: conversions are explicit, arithmetic happens in f32.
#define WICK_DEFINE_FLOAT_TYPE(Name, Bits, ENCODE, DECODE)                                     \
  struct Name {                                                                                \
    Bits bits;                                                                                 \
    Name() = default;                                                                          \
    WICK_HD explicit Name(float f) : bits(detail::ENCODE(f)) {}                                \
    WICK_HD explicit Name(double d) : bits(detail::ENCODE(detail::f64_to_f32_round_odd(d))) {} \
    WICK_HD explicit operator float() const { return detail::DECODE(bits); }                   \
    WICK_HD explicit operator double() const { return detail::DECODE(bits); }                  \
    WICK_HD static Name from_bits(Bits b) {                                                    \
      Name v;                                                                                  \
      v.bits = b;                                                                              \
      return v;                                                                                \
    }                                                                                          \
  };

WICK_DEFINE_FLOAT_TYPE(f16, uint16_t, f32_to_f16_bits, f16_bits_to_f32)
WICK_DEFINE_FLOAT_TYPE(bf16, uint16_t, f32_to_bf16_bits, bf16_bits_to_f32)
WICK_DEFINE_FLOAT_TYPE(f8e4m3, uint8_t, f32_to_f8e4m3_bits, f8e4m3_bits_to_f32)

#undef WICK_DEFINE_FLOAT_TYPE

static_assert(sizeof(f16) == 2 && sizeof(bf16) == 2 && sizeof(f8e4m3) == 1);

}  // namespace wick
