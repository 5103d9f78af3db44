// The NVIDIA side of wick's matrix-unit interface (gpu/mma.cuh): mma.sync m16n8k16 with f32
// accumulators, ldmatrix loads from shared memory and cp.async copies into it (sm_80 and later),
// as inline PTX. A 16x16 product is two m16n8k16 instructions; a wave is a warp of 32 lanes.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "gpu/vendor/cuda.h"
#include "wick/float_types.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define WICK_GPU_MMA 1
#else
#define WICK_GPU_MMA 0
#endif
#define WICK_GPU_PAIRED_FMA WICK_GPU_MMA
#define WICK_GPU_MMA_I8 WICK_GPU_MMA

namespace wick::gpu::mma {

// Whether the device has the matrix instructions these kernels use (compute capability 8.0+).
inline bool available(const DeviceProps& p) {
  return p.arch.size() > 3 && p.arch.compare(0, 3, "sm_") == 0 && std::stoi(p.arch.substr(3)) >= 80;
}
// ...and the 8-bit integer products (mma.sync m16n8k32 s8: the same devices).
inline bool available_i8(const DeviceProps& p) { return available(p); }

inline constexpr int kWave = 32;
inline constexpr int kAccum = 8;     // accumulator elements a lane holds of a 16x16 tile
inline constexpr int kRowSlots = 2;  // distinct tile rows among them

template <typename T>
struct FragA {
  uint32_t r[4];
};
template <typename T>
struct FragB {
  uint32_t r[4];  // r[0..1]: columns 0-7, r[2..3]: columns 8-15
};
struct FragC {
  float v[kAccum];  // v[4j + e]: columns 8j.., rows lane/4 (e < 2) and lane/4 + 8
};

__device__ inline int lane_id() { return static_cast<int>(threadIdx.x % kWave); }

__host__ __device__ constexpr int accum_slot(int i) { return (i / 2) % 2; }
__device__ inline int accum_row(int i) { return lane_id() / 4 + 8 * accum_slot(i); }
__device__ inline int accum_col(int i) { return 8 * (i / 4) + 2 * (lane_id() % 4) + i % 2; }

// 8-bit integer products, m16n8k32: A 16x32 and B 32x8 of int8, C 16x8 of int32. A's registers
// are filled by the kernel from its own format: word j of a lane holds A(a8_m(j), a8_k(j) .. + 3);
// B is read from shared memory by load_b8; C's element i of a lane is C(c8_row(i), c8_col(i)).
inline constexpr int kA8Words = 4;
inline constexpr int kC8 = 4;
struct FragA8 {
  uint32_t r[kA8Words];
};
struct FragB8 {
  uint32_t r[2];
};
struct FragC8 {
  int v[kC8];
};
__device__ inline int a8_m(int j) { return lane_id() / 4 + 8 * (j % 2); }
__device__ inline int a8_k(int j) { return 16 * (j / 2) + 4 * (lane_id() % 4); }
__device__ inline int c8_row(int i) { return lane_id() / 4 + 8 * (i / 2); }
__device__ inline int c8_col(int i) { return 2 * (lane_id() % 4) + i % 2; }

// f32 products on tf32 inputs (10-bit mantissas), m16n8k8: A 16x8 and B 8x8, C 16x8 of f32 laid out
// as FragC8 (c8_row, c8_col). The kernel fills A and B: A's register j holds A(at_m(j), at_k(j)), B's
// register j holds B(bt_k(j), bt_n()), each cut to tf32 by tf32_bits.
inline constexpr int kATWords = 4;
inline constexpr int kBTWords = 2;
struct FragAT {
  uint32_t r[kATWords];
};
struct FragBT {
  uint32_t r[kBTWords];
};
struct FragCT {
  float v[kC8];
};
__device__ inline int at_m(int j) { return lane_id() / 4 + 8 * (j % 2); }
__device__ inline int at_k(int j) { return lane_id() % 4 + 4 * (j / 2); }
__device__ inline int bt_k(int j) { return lane_id() % 4 + 4 * j; }
__device__ inline int bt_n() { return lane_id() / 4; }

__device__ inline float row_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ inline float row_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

#if WICK_GPU_MMA

__device__ inline uint32_t shared_address(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ inline void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}
__device__ inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}

// Each group of 8 lanes names the rows of one 8x8 matrix: (rows 0-7 | 8-15) x (cols 0-7 | 8-15).
template <typename T>
__device__ inline void load_a(FragA<T>& f, const T* tile, int ld) {
  const int l = lane_id();
  ldmatrix_x4(f.r, tile + (l % 16) * ld + (l / 16) * 8);
}
template <typename T>
__device__ inline void load_b_nk(FragB<T>& f, const T* tile, int ld) {
  const int l = lane_id();
  ldmatrix_x4(f.r, tile + ((l / 16) * 8 + l % 8) * ld + ((l / 8) % 2) * 8);
}
template <typename T>
__device__ inline void load_b_kn(FragB<T>& f, const T* tile, int ld) {
  const int l = lane_id();
  ldmatrix_x4_trans(f.r, tile + (((l / 8) % 2) * 8 + l % 8) * ld + (l / 16) * 8);
}

__device__ inline void mma(FragC& c, const FragA<f16>& a, const FragB<f16>& b) {
#pragma unroll
  for (int j = 0; j < 2; ++j)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c.v[4 * j]), "+f"(c.v[4 * j + 1]), "+f"(c.v[4 * j + 2]), "+f"(c.v[4 * j + 3])
        : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[2 * j]), "r"(b.r[2 * j + 1]));
}
__device__ inline void mma(FragC& c, const FragA<bf16>& a, const FragB<bf16>& b) {
#pragma unroll
  for (int j = 0; j < 2; ++j)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c.v[4 * j]), "+f"(c.v[4 * j + 1]), "+f"(c.v[4 * j + 2]), "+f"(c.v[4 * j + 3])
        : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[2 * j]), "r"(b.r[2 * j + 1]));
}

__device__ inline void ldmatrix_x2(uint32_t (&r)[2], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(shared_address(p)));
}

// B(k,n) = tile[n*ld + k] of int8 (ld in bytes, a multiple of 16), k < 32, n < 8.
__device__ inline void load_b8(FragB8& f, const int8_t* tile, int ld) {
  const int l = lane_id() % 16;  // lanes 16-31 name no row of x2
  ldmatrix_x2(f.r, tile + (l % 8) * ld + (l / 8) * 16);
}

// c += a b in exact 32-bit integers.
__device__ inline void mma_i8(FragC8& c, const FragA8& a, const FragB8& b) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+r"(c.v[0]), "+r"(c.v[1]), "+r"(c.v[2]), "+r"(c.v[3])
      : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]), "r"(b.r[1]));
}

// f32 cut to tf32 (its top 19 bits, rounded toward zero), in a 32-bit register as mma_tf32 takes it:
// one instruction where cvt.rna.tf32 takes several.
__device__ inline uint32_t tf32_bits(float x) { return __float_as_uint(x) & 0xffffe000u; }

// c += a b, the products of tf32 values exact and summed in f32.
__device__ inline void mma_tf32(FragCT& c, const FragAT& a, const FragBT& b) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c.v[0]), "+f"(c.v[1]), "+f"(c.v[2]), "+f"(c.v[3])
      : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]), "r"(b.r[1]));
}

// Two floats rounded to nearest even, `lo` in the low half.
template <typename T>
__device__ inline uint32_t pack2(float lo, float hi) {
  uint32_t r;
  if constexpr (std::is_same_v<T, f16>)
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// a * b + c on the two T of each word, each rounded once (one instruction: fma.rn.f16x2 /
// fma.rn.bf16x2). Where WICK_GPU_PAIRED_FMA is 1.
template <typename T>
__device__ inline uint32_t fma2(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  if constexpr (std::is_same_v<T, f16>)
    asm("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  else
    asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// f32 to T, rounded to nearest even by the hardware (one instruction; NaN becomes the canonical one).
template <typename T>
__device__ inline T round_to(float x) {
  uint16_t r;
  if constexpr (std::is_same_v<T, f16>)
    asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(r) : "f"(x));
  else
    asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(r) : "f"(x));
  return T::from_bits(r);
}

// The accumulator layout of m16n8k16 is the A layout: pairs of accumulators become A's registers.
template <typename T>
__device__ inline FragA<T> to_a(const FragC& c) {
  FragA<T> a;
#pragma unroll
  for (int i = 0; i < 4; ++i) a.r[i] = pack2<T>(c.v[2 * i], c.v[2 * i + 1]);
  return a;
}

// 2^x through the special-function unit (relative error about 2^-22; 2^-inf = 0).
__device__ inline float exp2_fast(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

#endif  // WICK_GPU_MMA

// 16-byte copies from global to shared memory, asynchronous from sm_80 on (cp.async).
__device__ inline void copy_async_16(void* shared_dst, const void* global_src) {
#if WICK_GPU_MMA
  asm volatile(
      "cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(shared_dst))),
      "l"(global_src));
#else
  *static_cast<uint4*>(shared_dst) = *static_cast<const uint4*>(global_src);
#endif
}
__device__ inline void copy_async_commit() {
#if WICK_GPU_MMA
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
__device__ inline void copy_async_wait_all() {
#if WICK_GPU_MMA
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#endif
}
// Waits until at most N committed groups are still in flight (the stages after the next one).
template <int N>
__device__ inline void copy_async_wait() {
#if WICK_GPU_MMA
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// f16 bits to f32 by the hardware's conversion (exact).
__device__ inline float f16_to_float(uint16_t bits) {
  float y;
  asm("{ .reg .b16 h; mov.b16 h, %1; cvt.f32.f16 %0, h; }\n" : "=f"(y) : "h"(bits));
  return y;
}

}  // namespace wick::gpu::mma
