// The CPU's products of a block-format weight with x rounded to 8 bits per 32 values: x's rounding
// (shared by every kernel), and the SIMD kernels chosen at run time for the machine (qdot_x86.cpp).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "kernels/quant.h"

namespace wick::cpu::qdot {

// The order of x's offset bytes (RoundedX::u) that the row kernels of a format read.
enum class Offset {
  None,     // the kernels read q only: u stays empty
  Natural,  // q + 128 as q lies
  Halves,   // q + 128, each 4 units (128 bytes) as their first 16 bytes, then their last 16
};

// The order the row kernels of qtype read for rows of k values, under active_isa().
Offset offset_order(quant::QType qtype, int64_t k);

// x (m, k) rounded per 32 values (kernels/quant.h's quantize_act): q (m * k bytes), and each unit's
// ActScale split for vector loads: d (one per unit), s (s0 and s1 of each unit, in turn), sum
// (s0 + s1 of each unit, the bias term of a 32-value group) and qsum (the sums of the unit's first
// and second 16 q, in turn); u, unless `order` is None, q + 128 as unsigned bytes in that order.
struct RoundedX {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<float> s;
  std::vector<float> sum;
  std::vector<int32_t> qsum;
  std::vector<uint8_t> u;
  Offset order;

  RoundedX(int64_t m, int64_t k, Offset order = Offset::None);
};

// Rounds row t of x (k values) into r with kernels/quant.h's quantize_act: the same bits, in AVX-512
// vectors where active_isa() is Avx512Vnni; and its offset bytes in r.order.
void round_row(const float* x, int64_t k, RoundedX& r, int64_t t);

// Rows of a RoundedX from row t0 on, as the kernels read them: row t's bytes at q + t * k (and u +
// t * k, or null where u is empty), its units' d at d + t * k / 32, their s0, s1 at s + 2 * t * k / 32,
// s0 + s1 at sum + t * k / 32 and the sums of q at qsum + 2 * t * k / 32.
struct XRows {
  const int8_t* q;
  const uint8_t* u;
  const float* d;
  const float* s;
  const float* sum;
  const int32_t* qsum;

  XRows(const RoundedX& x, int64_t t0, int64_t k)
      : q(x.q.data() + t0 * k),
        u(x.u.empty() ? nullptr : x.u.data() + t0 * k),
        d(x.d.data() + t0 * (k / 32)),
        s(x.s.data() + 2 * t0 * (k / 32)),
        sum(x.sum.data() + t0 * (k / 32)),
        qsum(x.qsum.data() + 2 * t0 * (k / 32)) {}
};

// The instruction sets of the SIMD kernels, in order. A machine has those of one architecture:
// x86-64's (qdot_x86.cpp) or aarch64's (qdot_arm.cpp).
enum class Isa : int {
  None,        // no SIMD kernel: the caller's portable loop
  Neon,        // aarch64 with Armv8.2's dot products: 16 bytes per half unit, sdot
  Avx2,        // AVX2, FMA and F16C: 32 bytes per unit, maddubs + madd
  Avx512Vnni,  // AVX-512 (F, BW, VL) with VNNI: two units per 64-byte vector, dpbusd
};

// The best instruction set of this machine (None where this build has no kernels for it), and the
// one simd_rows uses: the best at or below the limit (the order above), or None where that is
// another architecture's (a limit of neon on x86-64; avx2 on aarch64 still gives neon).
Isa best_isa();
Isa active_isa();

// simd_rows, and the CPU's other own kernels (AMX's tiles need Avx512Vnni, the F16C loop Avx2), use
// no instruction set above `limit` (None: simd_rows declines every call): the CPU backend's "isa"
// option, WICK_CPU_ISA, and tests reaching every kernel on one machine. Returns the previous
// limit. The limit starts as WICK_CPU_ISA names it (isa_named), else Avx512Vnni.
Isa set_isa_limit(Isa limit);

// The limit a name gives: "avx512_vnni", "avx2", "neon", or "none" (the portable loops); false for
// any other.
bool isa_named(std::string_view name, Isa* isa);
// A limit's name as isa_named reads it, and as `wick info` shows what the kernels use.
const char* isa_name(Isa isa);

// Rows [r0, r1) of the weight w (rows of k values of qtype) times m rows of x (at most kMaxRows):
// out[t * n + r]. Returns false, doing nothing, where active_isa() is None; the caller then runs
// the portable loop.
inline constexpr int64_t kMaxRows = 8;

// The rows of x per call of simd_rows in batch-invariant mode (wick::batch_invariant()): every
// kernel gives each row the same bits for any count up to this one (the AVX2 kernel changes its
// sum order above 4 rows), so tiles of it, whatever m, give each row of x bits of its own.
inline constexpr int64_t kInvariantRows = 4;
bool simd_rows(quant::QType qtype, const uint8_t* w, int64_t r0, int64_t r1, int64_t k, XRows x, int64_t m,
               float* out, int64_t n);

// For many rows of x (more than kMaxRows): rows [r0, r1) of the weight times all m rows of x, taken
// kPanelRows weight rows at a time, each repacked once into a panel that every tile of x then meets
// (qdot_x86.cpp says how). Takes whole panels only and returns the first row it did not take (r0
// where active_isa() is below Avx512Vnni); the caller runs simd_rows on the rest.
inline constexpr int64_t kPanelRows = 16;
int64_t simd_panels(quant::QType qtype, const uint8_t* w, int64_t r0, int64_t r1, int64_t k, const RoundedX& x,
                    int64_t m, float* out, int64_t n);

}  // namespace wick::cpu::qdot
