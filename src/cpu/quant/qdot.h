// The CPU's products of a block-format weight with x rounded to 8 bits per 32 values: x's rounding
// (shared by every kernel), and the SIMD kernels chosen at run time for the machine (qdot_x86.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/quant.h"

namespace wick::cpu::qdot {

// x (m, k) rounded per 32 values (kernels/quant.h's quantize_act): q (m * k bytes) and one
// ActScale per 32.
struct RoundedX {
  std::vector<int8_t> q;
  std::vector<kernels::quant::ActScale> scale;
};

// Rows [r0, r1) of the weight w (rows of k values of qtype) times every row of x (m of them, at most
// kMaxRows): out[t * n + r]. Returns false, doing nothing, where this machine or this build has no
// SIMD kernel for qtype; the caller then runs the portable loop.
inline constexpr int64_t kMaxRows = 8;
bool simd_rows(quant::QType qtype, const uint8_t* w, int64_t r0, int64_t r1, int64_t k, const RoundedX& x,
               int64_t m, float* out, int64_t n);

// Testing aid: with false, simd_rows declines every call, so that tests reach the portable loop on a
// machine with SIMD kernels; true restores it. Returns the previous setting.
bool set_simd(bool enabled);

}  // namespace wick::cpu::qdot
