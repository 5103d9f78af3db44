// Vectors of a target's registers' width, as GCC's and clang's vector extensions, for loops compiled
// once per target (WICK_CPU_VERSION, cpu/clones.h) with the width as a template argument: 64 bytes
// for AVX-512, 32 for AVX2, 16 otherwise. Wider than the registers, GCC builds their operations one
// element at a time through the stack (AVX2 with 64 bytes: attention 7.7 times as slow, softmax 2.7).
// Each lane's arithmetic is the scalar code's. Vectors travel by reference: passed or returned by
// value, their ABI would depend on the target.
#pragma once

#include <cstdint>

#include "wick/float_types.h"

namespace wick::cpu {

template <typename T, int kBytes>
struct VecOf {
  typedef T type __attribute__((vector_size(kBytes)));
};
template <typename T, int kBytes>
using Vec = typename VecOf<T, kBytes>::type;

template <typename V, typename T>
[[gnu::always_inline]] inline void load_vec(V& v, const T* p) {
  __builtin_memcpy(&v, p, sizeof v);
}

template <typename V, typename T>
[[gnu::always_inline]] inline void store_vec(T* p, const V& v) {
  __builtin_memcpy(p, &v, sizeof v);
}

// kSums f32 partial sums kept as kCount vectors of kBytes, so that a reduction's lanes, and with
// them its bits, are the same on every target.
template <int kBytes, int kSums>
struct SumLanes {
  using F = Vec<float, kBytes>;
  using I = Vec<int32_t, kBytes>;
  static constexpr int kWidth = kBytes / static_cast<int>(sizeof(float));
  static constexpr int kCount = kSums / kWidth;
  static_assert(kCount * kWidth == kSums);
};

// A vector of f32 F from as many floats, bf16 or f16 at p: the conversions of float_types.h, lane
// by lane, as branch-free selects (the same bits as the scalar conversions).
template <typename F>
[[gnu::always_inline]] inline void widen(const float* p, F& v) {
  load_vec(v, p);
}

template <typename F>
[[gnu::always_inline]] inline void widen(const bf16* p, F& v) {
  using H = Vec<uint16_t, sizeof(F) / 2>;
  using U = Vec<uint32_t, sizeof(F)>;
  H h;
  __builtin_memcpy(&h, p, sizeof h);
  const U u = __builtin_convertvector(h, U) << 16;
  __builtin_memcpy(&v, &u, sizeof v);
}

template <typename F>
[[gnu::always_inline]] inline void widen(const f16* p, F& v) {
  using H = Vec<uint16_t, sizeof(F) / 2>;
  using U = Vec<uint32_t, sizeof(F)>;
  using I = Vec<int32_t, sizeof(F)>;
  H bits;
  __builtin_memcpy(&bits, p, sizeof bits);
  const U h = __builtin_convertvector(bits, U);
  const U sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  const F sub = __builtin_convertvector(__builtin_convertvector(m, I), F) * 5.9604644775390625e-8f;  // m * 2^-24
  U sub_bits;
  __builtin_memcpy(&sub_bits, &sub, sizeof sub_bits);
  const U u = e == 0x1fu ? (sign | 0x7f800000u | (m << 13))
              : e == 0u  ? (sign | sub_bits)
                         : (sign | ((e + 112u) << 23) | (m << 13));
  __builtin_memcpy(&v, &u, sizeof v);
}

}  // namespace wick::cpu
