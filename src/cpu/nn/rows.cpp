// The vectorised row loops of the CPU nn kernels (rows.h). Each is compiled for AVX-512, AVX2 and
// the baseline and chosen when the library loads; the lanes of every reduction are fixed at
// kLanes, so every version gives the same bits.
#include "cpu/nn/rows.h"

#include <cstring>
#include <limits>
#include <memory>

#include "cpu/clones.h"
#include "cpu/vectors.h"

namespace wick::cpu::rows {

namespace {

// The reductions keep kLanes partial results as vectors of the target's registers' width
// (cpu/vectors.h): one, two or four vectors, the same lanes, so that every version gives the same
// bits.
template <int kBytes>
using Lanes = SumLanes<kBytes, kLanes>;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A reduction over a row: f(lanes, vector, index) updating each vector of lanes for each whole
// block of kLanes elements, g(lane 0, element, index) on the rest, then the lanes folded in order
// with combine.
template <int kBytes, typename Block, typename Tail, typename Combine>
[[gnu::always_inline]] inline float reduce(const float* x, int64_t n, float init, const Block& f, const Tail& g,
                                           const Combine& combine) {
  using L = Lanes<kBytes>;
  typename L::F acc[L::kCount], v;
  for (auto& a : acc) a = typename L::F{} + init;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < L::kCount; ++k) {
      load_vec(v, x + i + k * L::kWidth);
      f(acc[k], v, i + k * L::kWidth);
    }
  }
  float lanes[kLanes];
  for (int k = 0; k < L::kCount; ++k) store_vec(lanes + k * L::kWidth, acc[k]);
  for (; i < n; ++i) lanes[0] = g(lanes[0], x[i], i);
  float r = lanes[0];
  for (int j = 1; j < kLanes; ++j) r = combine(r, lanes[j]);
  return r;
}

[[gnu::always_inline]] inline float larger(float a, float b) { return b > a ? b : a; }
[[gnu::always_inline]] inline float plus(float a, float b) { return a + b; }

template <int kBytes>
[[gnu::always_inline]] inline float max_of_at(const float* x, int64_t n) {
  return reduce<kBytes>(
      x, n, kNegInf, [](auto& acc, const auto& v, int64_t) { acc = v > acc ? v : acc; },
      [](float acc, float v, int64_t) { return larger(acc, v); }, larger);
}

template <int kBytes>
[[gnu::always_inline]] inline float sum_exp_at(const float* x, int64_t n, float max, float* e) {
  using L = Lanes<kBytes>;
  // Every exponential is computed, then -inf's replaced by 0: a select, unlike a branch, vectorises.
  return reduce<kBytes>(
      x, n, 0.f,
      [&](typename L::F& acc, const typename L::F& v, int64_t i) {
        const typename L::F shifted = v - max;
        typename L::F t;
        exp_f32_into<typename L::F, typename L::I>(shifted, t);
        t = v == kNegInf ? typename L::F{} : t;
        if (e) store_vec(e + i, t);
        acc += t;
      },
      [&](float acc, float v, int64_t i) {
        const float t = v == kNegInf ? 0.f : exp_f32(v - max);
        if (e) e[i] = t;
        return acc + t;
      },
      plus);
}

template <int kBytes>
[[gnu::always_inline]] inline float sum_of_at(const float* x, int64_t n) {
  return reduce<kBytes>(
      x, n, 0.f, [](auto& acc, const auto& v, int64_t) { acc += v; },
      [](float acc, float v, int64_t) { return acc + v; }, plus);
}

template <int kBytes>
[[gnu::always_inline]] inline float dot_at(const float* x, const float* y, int64_t n) {
  return reduce<kBytes>(
      x, n, 0.f,
      [&](auto& acc, const auto& v, int64_t i) {
        auto w = v;
        load_vec(w, y + i);
        acc += v * w;
      },
      [&](float acc, float v, int64_t i) { return acc + v * y[i]; }, plus);
}

template <int kBytes>
[[gnu::always_inline]] inline float sum_squared_deviations_at(const float* x, int64_t n, float mean) {
  return reduce<kBytes>(
      x, n, 0.f, [&](auto& acc, const auto& v, int64_t) { acc += (v - mean) * (v - mean); },
      [&](float acc, float v, int64_t) { return acc + (v - mean) * (v - mean); }, plus);
}

template <int kBytes>
[[gnu::always_inline]] inline void add_scaled_at(const float* x, int64_t n, float s, float* y) {
  using L = Lanes<kBytes>;
  int64_t i = 0;
  for (; i + L::kWidth <= n; i += L::kWidth) {
    typename L::F v, w;
    load_vec(v, x + i);
    load_vec(w, y + i);
    w += s * v;
    store_vec(y + i, w);
  }
  for (; i < n; ++i) y[i] += s * x[i];
}

// The loops for each target (cpu/clones.h), with vectors of its registers' width.
#define WICK_ROW_LOOPS(arch, bytes)                                                                                \
  WICK_CPU_VERSION(arch) float max_of_v(const float* x, int64_t n) { return max_of_at<bytes>(x, n); }              \
  WICK_CPU_VERSION(arch) float sum_exp_v(const float* x, int64_t n, float max, float* e) {                         \
    return sum_exp_at<bytes>(x, n, max, e);                                                                        \
  }                                                                                                                \
  WICK_CPU_VERSION(arch) float sum_of_v(const float* x, int64_t n) { return sum_of_at<bytes>(x, n); }              \
  WICK_CPU_VERSION(arch) float dot_v(const float* x, const float* y, int64_t n) { return dot_at<bytes>(x, y, n); } \
  WICK_CPU_VERSION(arch) float sum_squared_deviations_v(const float* x, int64_t n, float mean) {                   \
    return sum_squared_deviations_at<bytes>(x, n, mean);                                                           \
  }                                                                                                                \
  WICK_CPU_VERSION(arch) void add_scaled_v(const float* x, int64_t n, float s, float* y) {                         \
    add_scaled_at<bytes>(x, n, s, y);                                                                              \
  }
#if WICK_CPU_VERSIONS
WICK_ROW_LOOPS("arch=x86-64-v4", 64)
WICK_ROW_LOOPS("arch=x86-64-v3", 32)
#endif
WICK_ROW_LOOPS("default", 16)
#undef WICK_ROW_LOOPS

}  // namespace

float* thread_buffer(int64_t n) {
  thread_local std::unique_ptr<Scratch<float>> buffer;
  thread_local int64_t size = 0;
  if (n > size) {
    buffer.reset();
    size = 0;
    buffer = std::make_unique<Scratch<float>>(n);
    size = n;
  }
  return buffer->data();
}

// The public loops call the version set of their file (GCC names its dispatcher for file-local
// functions only: cpu/clones.h).
float max_of(const float* x, int64_t n) { return max_of_v(x, n); }
float sum_exp(const float* x, int64_t n, float max, float* e) { return sum_exp_v(x, n, max, e); }
float sum_of(const float* x, int64_t n) { return sum_of_v(x, n); }
float dot(const float* x, const float* y, int64_t n) { return dot_v(x, y, n); }
void add_scaled(const float* x, int64_t n, float s, float* y) { add_scaled_v(x, n, s, y); }
float sum_squared_deviations(const float* x, int64_t n, float mean) { return sum_squared_deviations_v(x, n, mean); }

WICK_CPU_CLONES void scale(float* x, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

WICK_CPU_CLONES void affine(const float* x, int64_t n, float shift, float s, const float* w, const float* b,
                            float* out) {
  if (b) {
    for (int64_t i = 0; i < n; ++i) out[i] = (x[i] - shift) * s * w[i] + b[i];
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = (x[i] - shift) * s * w[i];
  }
}

// The conversions as branch-free selects on the bits, which the compiler vectorises; each is the
// scalar conversion of float_types.h case for case.
WICK_CPU_CLONES void widen_row(const bf16* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(x[i].bits) << 16;
    std::memcpy(out + i, &u, sizeof u);
  }
}

WICK_CPU_CLONES void widen_row(const f16* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t h = x[i].bits, sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    const float sub = static_cast<float>(static_cast<int32_t>(m)) * 5.9604644775390625e-8f;  // m * 2^-24
    uint32_t sub_bits;
    std::memcpy(&sub_bits, &sub, sizeof sub_bits);
    const uint32_t u = e == 0x1fu ? sign | 0x7f800000u | (m << 13)
                       : e == 0   ? sign | sub_bits
                                  : sign | ((e + 112u) << 23) | (m << 13);
    std::memcpy(out + i, &u, sizeof u);
  }
}

WICK_CPU_CLONES void narrow_row(const float* x, int64_t n, bf16* out) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, x + i, sizeof u);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16, quiet = (u >> 16) | 0x40u;
    out[i].bits = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
  }
}

WICK_CPU_CLONES void narrow_row(const float* x, int64_t n, f16* out) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, x + i, sizeof u);
    const uint32_t sign = (u >> 16) & 0x8000u, ax = u & 0x7fffffffu;
    // Normal results: the exponent rebiased, 13 bits dropped, rounded to nearest even (a carry
    // into the exponent is right, up to inf).
    const uint32_t r = ax - ((127u - 15u) << 23);
    const uint32_t normal = (r + 0xfffu + ((r >> 13) & 1u)) >> 13;
    // Subnormal results count units of 2^-24: adding 0.5 (2^-1) aligns the float's significand so
    // that the hardware's round to nearest even lands on the unit; the low bits are the count.
    float mag;
    std::memcpy(&mag, &ax, sizeof mag);
    const float aligned = mag + 0.5f;
    uint32_t aligned_bits;
    std::memcpy(&aligned_bits, &aligned, sizeof aligned_bits);
    const uint32_t sub = aligned_bits - 0x3f000000u;
    const uint32_t h = ax > 0x7f800000u   ? 0x7e00u | ((ax >> 13) & 0x3ffu)
                       : ax >= 0x477ff000u ? 0x7c00u
                       : ax >= 0x38800000u ? normal
                                           : sub;
    out[i].bits = static_cast<uint16_t>(sign | h);
  }
}

WICK_CPU_CLONES void subtract(const float* x, int64_t n, float shift, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] - shift;
}

}  // namespace wick::cpu::rows
