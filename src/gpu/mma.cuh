// wick's matrix-unit interface: one wave multiplies 16x16 tiles of f16 or bf16 and accumulates in
// f32, C += A B. The vendor headers (vendor/mma_cuda.h: mma.sync; vendor/mma_hip.h: MFMA, WMMA)
// give the same names in namespace wick::gpu::mma; kernels written against them know nothing of
// the wave's width or of which lane holds what, beyond what the functions below say.
//
//   WICK_GPU_MMA          1 in device code for a target with the instructions (guards kernel bodies)
//   WICK_GPU_PAIRED_FMA   1 where fma2 below is there (NVIDIA's device code; 0 on AMD)
//   WICK_GPU_MMA_I8       1 where the 8-bit integer tiles below are there (NVIDIA's; not yet on AMD)
//   available(props), available_i8(props)  the device has them (host side)
//   kWave                 lanes of the wave that issues a product (32 or 64)
//   FragA<T>, FragB<T>    operands; load_a (A(m,k) = tile[m*ld + k]), load_b_nk (B(k,n) = tile[n*ld + k]),
//                         load_b_kn (B(k,n) = tile[k*ld + n]) read them from shared memory, rows
//                         16-byte aligned (ld * sizeof(T) a multiple of 16)
//   FragC                 the accumulator: v[i], i < kAccum, is C(accum_row(i), accum_col(i)) of this lane
//   accum_slot(i)         which of the lane's kRowSlots rows element i is in (constexpr)
//   row_max, row_sum      combine a value over the lanes that hold parts of one row
//   mma(c, a, b)          c += a b
//   to_a<T>(c)            the accumulator rounded to T as an A operand (an S tile becomes the P of P V)
//   round_to<T>(x)        f32 to T (f16 or bf16), rounded to nearest even
//   pack2<T>(lo, hi)      two f32 as two T in one 32-bit word, lo in the low half, each rounded to
//                         nearest even
//   fma2<T>(a, b, c)      a * b + c on two T packed in 32-bit words, each rounded once (where
//                         WICK_GPU_PAIRED_FMA)
//   FragA8, FragB8, FragC8, mma_i8(c, a, b)  int8 A (16x32) times int8 B (32x8) into int32 C (16x8):
//                         A's register j of a lane holds A(a8_m(j), a8_k(j) .. + 3), j < kA8Words,
//                         filled by the kernel; load_b8 reads B (B(k,n) = tile[n*ld + k]) from
//                         shared memory; C's element i < kC8 is C(c8_row(i), c8_col(i))
//   FragAT, FragBT, FragCT, mma_tf32(c, a, b)  tf32 A (16x8) times tf32 B (8x8) into f32 C (16x8, laid
//                         out as FragC8): A's register j holds A(at_m(j), at_k(j)), B's register j
//                         B(bt_k(j), bt_n()), each tf32_bits(value) (where WICK_GPU_MMA_I8)
//   copy_async_16, copy_async_commit, copy_async_wait_all, copy_async_wait<N> (until at most N
//                         groups are in flight): 16-byte copies from global to shared memory
//   exp2_fast             2^x on the special-function unit
//   f16_to_float          exact f16 to f32 conversion in hardware
#pragma once

#include "gpu/vendor.h"

#if defined(__HIPCC__) || defined(WICK_BACKEND_HIP)
#include "gpu/vendor/mma_hip.h"
#else
#include "gpu/vendor/mma_cuda.h"
#endif

namespace wick::gpu::mma {

__device__ inline void zero(FragC& c) {
#pragma unroll
  for (int i = 0; i < kAccum; ++i) c.v[i] = 0.f;
}

}  // namespace wick::gpu::mma
