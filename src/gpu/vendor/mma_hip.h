// The AMD side of wick's matrix-unit interface (gpu/mma.cuh): MFMA 16x16x16 on CDNA (gfx90a,
// gfx94x; 64-lane waves) and WMMA 16x16x16 on RDNA3 (gfx11; 32-lane waves), chosen by the target
// macros of each device pass. Both products are issued with the operands swapped (B^T A^T =
// (A B)^T), which puts the accumulator in the layout of an A operand: a lane then holds part of
// one row of the tile, as on NVIDIA.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "gpu/vendor/hip.h"
#include "wick/float_types.h"

#if defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__) || defined(__gfx950__)
#define WICK_GPU_MFMA 1
#elif defined(__gfx1100__) || defined(__gfx1101__) || defined(__gfx1102__) || defined(__gfx1103__) || \
    defined(__gfx1150__) || defined(__gfx1151__)
#define WICK_GPU_WMMA 1
#endif
#if defined(WICK_GPU_MFMA) || defined(WICK_GPU_WMMA)
#define WICK_GPU_MMA 1
#else
#define WICK_GPU_MMA 0
#endif
#define WICK_GPU_PAIRED_FMA 0  // no fma2: the kernels take f32 arithmetic instead
// No 8-bit integer tiles yet (MFMA i32_16x16x32_i8 and WMMA i32_16x16x16_iu8 would give them): the
// kernels that need them fall back to the f16/bf16 tiles.
#define WICK_GPU_MMA_I8 0

namespace wick::gpu::mma {

// Whether the device is one of the targets above (its code object must be in the build).
inline bool available(const DeviceProps& p) {
  for (const char* prefix : {"gfx90a", "gfx94", "gfx950", "gfx110", "gfx115"})
    if (p.arch.rfind(prefix, 0) == 0) return true;
  return false;
}
inline bool available_i8(const DeviceProps&) { return false; }

// WMMA (RDNA3); otherwise MFMA, which the host pass also sees (it uses no fragment).
#if defined(WICK_GPU_WMMA)
inline constexpr int kWave = 32;
inline constexpr int kAccum = 8;     // accumulator elements a lane holds of a 16x16 tile
inline constexpr int kOperand = 16;  // operand elements a lane holds (a whole row; both half-waves alike)
#else
inline constexpr int kWave = 64;
inline constexpr int kAccum = 4;
inline constexpr int kOperand = 4;
#endif
inline constexpr int kRowSlots = 1;  // a lane's accumulators all lie in one row

using OperandBits = short __attribute__((ext_vector_type(kOperand)));
using AccumVector = float __attribute__((ext_vector_type(kAccum)));
using HalfOperand = _Float16 __attribute__((ext_vector_type(kOperand)));
using Bits8 = short __attribute__((ext_vector_type(8)));

template <typename T>
struct FragA {
  OperandBits v;  // A[lane % 16][...]
};
template <typename T>
struct FragB {
  OperandBits v;  // B[...][lane % 16]
};
struct FragC {
  AccumVector v;  // C[lane % 16][accum_col(i)]
};

__device__ inline int lane_id() { return static_cast<int>(threadIdx.x % kWave); }

__host__ __device__ constexpr int accum_slot(int) { return 0; }
__device__ inline int accum_row(int) { return lane_id() % 16; }
#if defined(WICK_GPU_WMMA)
__device__ inline int accum_col(int i) { return 2 * i + lane_id() / 16; }
__device__ inline float row_max(float v) { return fmaxf(v, __shfl_xor(v, 16, 32)); }
__device__ inline float row_sum(float v) { return v + __shfl_xor(v, 16, 32); }
#else
__device__ inline int accum_col(int i) { return 4 * (lane_id() / 16) + i; }
__device__ inline float row_max(float v) {
  v = fmaxf(v, __shfl_xor(v, 16, 64));
  return fmaxf(v, __shfl_xor(v, 32, 64));
}
__device__ inline float row_sum(float v) {
  v += __shfl_xor(v, 16, 64);
  return v + __shfl_xor(v, 32, 64);
}
#endif

template <typename T>
__device__ inline short bits_at(const T* p) {
  return static_cast<short>(p->bits);
}

// A (m, k) = tile[m * ld + k]; B (k, n) = tile[n * ld + k] (nk) or tile[k * ld + n] (kn).
template <typename T>
__device__ inline void load_rows(OperandBits& v, const T* tile, int ld) {
  const int l = lane_id();
#if defined(WICK_GPU_WMMA)
  const Bits8* p = reinterpret_cast<const Bits8*>(tile + (l % 16) * ld);
  v = __builtin_shufflevector(p[0], p[1], 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#else
  v = *reinterpret_cast<const OperandBits*>(tile + (l % 16) * ld + 4 * (l / 16));
#endif
}
template <typename T>
__device__ inline void load_a(FragA<T>& f, const T* tile, int ld) {
  load_rows(f.v, tile, ld);
}
template <typename T>
__device__ inline void load_b_nk(FragB<T>& f, const T* tile, int ld) {
  load_rows(f.v, tile, ld);
}
template <typename T>
__device__ inline void load_b_kn(FragB<T>& f, const T* tile, int ld) {
  const int l = lane_id();
#if defined(WICK_GPU_WMMA)
  const int k0 = 0;
#else
  const int k0 = 4 * (l / 16);
#endif
#pragma unroll
  for (int i = 0; i < kOperand; ++i) f.v[i] = bits_at(tile + (k0 + i) * ld + l % 16);
}

#if WICK_GPU_MMA
__device__ inline void mma(FragC& c, const FragA<f16>& a, const FragB<f16>& b) {
  const HalfOperand x = __builtin_bit_cast(HalfOperand, b.v), y = __builtin_bit_cast(HalfOperand, a.v);
#if defined(WICK_GPU_WMMA)
  c.v = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(x, y, c.v);
#else
  c.v = __builtin_amdgcn_mfma_f32_16x16x16f16(x, y, c.v, 0, 0, 0);
#endif
}
__device__ inline void mma(FragC& c, const FragA<bf16>& a, const FragB<bf16>& b) {
#if defined(WICK_GPU_WMMA)
  c.v = __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32(b.v, a.v, c.v);
#else
  c.v = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(b.v, a.v, c.v, 0, 0, 0);
#endif
}

// 2^x, the hardware's approximation (2^-inf = 0).
__device__ inline float exp2_fast(float x) { return __builtin_amdgcn_exp2f(x); }
#endif  // WICK_GPU_MMA

// f32 to T's bits, rounded to nearest even (f16 by the hardware's conversion).
template <typename T>
__device__ inline short to_bits(float x) {
  if constexpr (std::is_same_v<T, f16>)
    return __builtin_bit_cast(short, static_cast<_Float16>(x));
  else
    return static_cast<short>(detail::f32_to_bf16_bits(x));
}

// f32 to T, rounded to nearest even (f16 by the hardware's conversion).
template <typename T>
__device__ inline T round_to(float x) {
  return T::from_bits(static_cast<uint16_t>(to_bits<T>(x)));
}

// Two floats as T, rounded to nearest even, `lo` in the low half.
template <typename T>
__device__ inline uint32_t pack2(float lo, float hi) {
  return static_cast<uint32_t>(static_cast<uint16_t>(to_bits<T>(lo))) |
         static_cast<uint32_t>(static_cast<uint16_t>(to_bits<T>(hi))) << 16;
}

// The accumulator as an A operand, rounded to nearest even. On RDNA3 a lane holds every other
// column of its row; the rest comes from the lane 16 apart.
template <typename T>
__device__ inline FragA<T> to_a(const FragC& c) {
  FragA<T> a;
#if defined(WICK_GPU_WMMA)
  const bool odd = lane_id() / 16 != 0;
#pragma unroll
  for (int i = 0; i < kAccum; ++i) {
    const float mine = c.v[i], other = __shfl_xor(mine, 16, 32);
    a.v[2 * i] = to_bits<T>(odd ? other : mine);
    a.v[2 * i + 1] = to_bits<T>(odd ? mine : other);
  }
#else
#pragma unroll
  for (int i = 0; i < kAccum; ++i) a.v[i] = to_bits<T>(c.v[i]);
#endif
  return a;
}

// No asynchronous copy engine is used: a plain 16-byte load and store.
struct alignas(16) Bytes16 {
  uint32_t w[4];
};
__device__ inline void copy_async_16(void* shared_dst, const void* global_src) {
  *static_cast<Bytes16*>(shared_dst) = *static_cast<const Bytes16*>(global_src);
}
__device__ inline void copy_async_commit() {}
__device__ inline void copy_async_wait_all() {}
template <int N>
__device__ inline void copy_async_wait() {}

__device__ inline float f16_to_float(uint16_t bits) { return static_cast<float>(__builtin_bit_cast(_Float16, bits)); }

}  // namespace wick::gpu::mma
