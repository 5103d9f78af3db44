// Vectors of a target's registers' width, as GCC's and clang's vector extensions, for loops compiled
// once per target (WICK_CPU_VERSION, cpu/clones.h) with the width as a template argument: 64 bytes
// for AVX-512, 32 for AVX2, 16 otherwise. Wider than the registers, GCC builds their operations one
// element at a time through the stack (AVX2 with 64 bytes: attention 7.7 times as slow, softmax 2.7).
// Each lane's arithmetic is the scalar code's. Vectors travel by reference: passed or returned by
// value, their ABI would depend on the target.
#pragma once

#include <cstdint>

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
  using U = Vec<uint32_t, kBytes>;
  using H = Vec<uint16_t, kBytes / 2>;  // as many halves as F has floats
  static constexpr int kWidth = kBytes / static_cast<int>(sizeof(float));
  static constexpr int kCount = kSums / kWidth;
  static_assert(kCount * kWidth == kSums);
};

}  // namespace wick::cpu
