// Products of block-format weights on AMX's tiles (the matrix units of Intel Xeons from Sapphire
// Rapids on), for many rows of x (prompts, and engine steps that carry prompt chunks). A group of 16
// weight rows is first unpacked, block by block, into the layout `tdpbssd` takes as its second
// operand; each block of up to 16 rows of x (8-bit, kernels/quant.h's quantize_act) is the first;
// each block's int32 sums go through memory into the vector registers, to be scaled by the two
// blocks' d. Arranged Q4_0 (arranged_x86.cpp) and plain Q8_0 take it.
#pragma once

#include <cstdint>

#include "cpu/quant/qdot.h"

namespace wick::cpu::amx {

// One 32-value block of a group of 16 weight rows, unpacked: 8 rows of 64 signed bytes (row j holds
// each weight row's values 4j..4j + 3, lane r for weight row r), then the 16 rows' d as floats.
inline constexpr int64_t kBlockBytes = 8 * 64 + 64;

// Rows of x from which the products take the tiles. Below them the vector kernels are faster: on 2
// cores of an Emerald Rapids Xeon, engine steps of 4 sequences of a Q4_0 model took 52.7 ms a token
// on the tiles against 39.4 on the vector kernel, steps of 16 105.3 against 105.3, and 512-token
// prompts 419.8 tokens/s against 303 (docs/performance.md, "AMX for prompts").
inline constexpr int64_t kMinRows = 32;

// Whether the tiles are used: the processor has AMX's tiles and 8-bit products, Linux grants this
// process their state, the instruction-set limit is Avx512Vnni (qdot::set_isa_limit), and
// set_allowed has not turned them off.
bool active();

// Testing aid: whether the tiles may be used. Returns the previous setting.
bool set_allowed(bool allowed);

// out[t * n + r] (t < m, r < 16) = the sum over the nb blocks at `unpacked` of d_r x's d_t times the
// integer sum of weight row r's block and row t's; as the vector kernels compute it:
// fma(d_r, float(sum) * d_t, acc). Needs active().
void group_products(const uint8_t* unpacked, int64_t nb, const qdot::RoundedX& x, int64_t m, int64_t k, float* out,
                    int64_t n);

// Rows [r0, r1) of a plain Q8_0 weight (r0 a multiple of 16, rows of k values) times the m rows of
// x, whole groups of 16 rows: out[t * n + r]. Returns the first row it did not take (r0 where the
// tiles are not active()).
int64_t q8_0_rows(const uint8_t* w, int64_t r0, int64_t r1, int64_t k, const qdot::RoundedX& x, int64_t m, float* out,
                  int64_t n);

}  // namespace wick::cpu::amx
