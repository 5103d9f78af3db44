// The fast path of the CPU nn kernels: dense rows in f32 math, in loops the compiler vectorises.
// Reductions keep kLanes partial results, as one, two or four vectors of the target's width,
// combined in a fixed order at the end, so that the answer does not depend on the vector width the
// machine runs (each loop is compiled for AVX-512, AVX2 and the baseline, chosen at run time). Rows of f16 and
// bf16 are widened to f32 a block at a time.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cpu/scratch.h"
#include "kernels/numeric.h"

namespace wick::cpu::rows {

inline constexpr int kLanes = 16;
// Elements a half row is widened in at a time (on the stack).
inline constexpr int64_t kBlock = 1024;

// The largest element (NaN ignored; -inf for an empty or all -inf row).
float max_of(const float* x, int64_t n);
// The sum of exp(x - max), -inf adding nothing; writes each exponential to e when e is not null.
float sum_exp(const float* x, int64_t n, float max, float* e);
// The sum of x, and the sum of (x - mean)^2.
float sum_of(const float* x, int64_t n);
// The sum of x[i] * y[i].
float dot(const float* x, const float* y, int64_t n);
// y[i] += s * x[i].
void add_scaled(const float* x, int64_t n, float s, float* y);
float sum_squared_deviations(const float* x, int64_t n, float mean);
// x[i] *= s.
void scale(float* x, int64_t n, float s);
// out[i] = (x[i] - shift) * s * w[i] + (b ? b[i] : 0): rms_norm (shift 0, b null) and layer_norm.
void affine(const float* x, int64_t n, float shift, float s, const float* w, const float* b, float* out);
// out[i] = x[i] - shift.
void subtract(const float* x, int64_t n, float shift, float* out);

// The fast path's element types: f32 and the halves, whose math type is f32.
template <typename T>
inline constexpr bool kTakes = std::is_same_v<kernels::opmath_t<T>, float>;

// The calling thread's f32 buffer of at least n elements, kept for its next rows (OutOfMemoryError
// where the host cannot give it).
float* thread_buffer(int64_t n);

// Rows of halves to f32 and back in vectorised loops, bit for bit the conversions of f16 and bf16
// (round to nearest even; NaN stays NaN, with its payload as the scalar conversions keep it).
void widen_row(const bf16* x, int64_t n, float* out);
void widen_row(const f16* x, int64_t n, float* out);
void narrow_row(const float* x, int64_t n, bf16* out);
void narrow_row(const float* x, int64_t n, f16* out);

// A row of T as f32: the row itself for f32, else widened into buf.
template <typename T>
const float* widen(const T* row, int64_t n, float* buf) {
  if constexpr (std::is_same_v<T, float>) {
    return row;
  } else if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, f16>) {
    widen_row(row, n, buf);
    return buf;
  } else {
    for (int64_t i = 0; i < n; ++i) buf[i] = kernels::to_opmath(row[i]);
    return buf;
  }
}
// Where a row's f32 results go: the output row for f32, buf otherwise (then narrow()).
template <typename T>
float* results(T* out, float* buf) {
  if constexpr (std::is_same_v<T, float>) {
    return out;
  } else {
    return buf;
  }
}
template <typename T>
void narrow(const float* buf, int64_t n, T* out) {
  if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, f16>) {
    narrow_row(buf, n, out);
  } else if constexpr (!std::is_same_v<T, float>) {
    for (int64_t i = 0; i < n; ++i) out[i] = kernels::from_opmath<T>(buf[i]);
  }
}

// A norm's weight or bias (n elements at a stride) as a dense f32 row: its own memory when it is
// f32 with stride 1, else a copy made once per call.
class FeatureRow {
 public:
  template <typename T>
  FeatureRow(const T* p, int64_t n, int64_t stride) {
    if constexpr (std::is_same_v<T, float>) {
      if (stride == 1 || n <= 1) {
        data_ = p;
        return;
      }
    }
    copy_ = std::make_unique<Scratch<float>>(n);
    for (int64_t i = 0; i < n; ++i) (*copy_)[i] = kernels::to_opmath(p[i * stride]);
    data_ = copy_->data();
  }
  const float* data() const { return data_; }

 private:
  std::unique_ptr<Scratch<float>> copy_;
  const float* data_ = nullptr;
};

// exp(x) for f32 in straight-line code (no call, no branch) so that it runs on vectors of lanes as
// on one float (F: float, or a GCC vector of floats with I the vector of int32 of its width): 2^k
// times a degree-7 polynomial of the remainder after a two-part ln 2 reduction, the power applied
// in two halves so that results near the overflow and in the subnormal range come out right.
// Within 1 ulp of the correctly rounded value on a sample of 4.4e7 inputs; NaN stays NaN.
// Vectors travel by reference: passed by value, their ABI would depend on the instruction set.
template <typename F, typename I>
[[gnu::always_inline]] inline void exp_f32_into(const F& x, F& out) {
  constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  constexpr float kLow = -104.f, kHigh = 88.73f;  // exp(kLow) rounds to 0, exp(kHigh) to inf
  // Round to the nearest integer by adding and removing 1.5 * 2^23 (exact for |c * log2e| < 2^22).
  constexpr float kRound = 12582912.f;
  const F c = x < kLow ? F{} + kLow : x > kHigh ? F{} + kHigh : x;
  const F k = (c * kLog2e + kRound) - kRound;
  const F r = (c - k * kLn2Hi) - k * kLn2Lo;  // |r| <= 0.35
  // 1 + r + r^2/2! + ... + r^7/7!: the truncation error is below 6e-9 relative.
  F p = F{} + 1.f / 5040;
  p = p * r + 1.f / 720;
  p = p * r + 1.f / 120;
  p = p * r + 1.f / 24;
  p = p * r + 1.f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  I ki, half;
  if constexpr (std::is_same_v<F, float>) {
    ki = static_cast<I>(k);
  } else {
    ki = __builtin_convertvector(k, I);
  }
  half = ki / 2;
  // 2^half * 2^(k - half), each from its exponent bits (both within [-126, 127]).
  const I bits_half = (half + 127) << 23, bits_rest = (ki - half + 127) << 23;
  F two_half, two_rest;
  __builtin_memcpy(&two_half, &bits_half, sizeof two_half);
  __builtin_memcpy(&two_rest, &bits_rest, sizeof two_rest);
  const F y = p * two_half * two_rest;
  out = x != x ? x : x < kLow ? F{} : y;
}

[[gnu::always_inline]] inline float exp_f32(float x) {
  float y;
  exp_f32_into<float, int32_t>(x, y);
  return y;
}

}  // namespace wick::cpu::rows
