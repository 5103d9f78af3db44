// Block-format weights arranged for the CPU's products (quant::QTensor::arrange): the blocks of
// kRows weight rows at a time interleaved, so that a 16-lane vector holds one word of each of the
// 16 rows and a product kernel reads its weight as one stream without repacking it per call.
//
// Q4_0, the only format arranged so far, on machines with AVX-512 VNNI: rows are taken in groups
// of 16 (a last group of fewer rows stays as it was, after the groups). Each block of a group
// keeps its 16 rows' d (32 bytes) and their quants (256 bytes: vector v, 64 bytes, holds each
// row's bytes qs[4v, 4v + 4) in lane r, bytes 64 v + 4 r.., so that its low nibbles are values 4v..
// of the 16 rows and its high nibbles values 16 + 4v..). Blocks go in pairs, the two d first
// (64 bytes), then the two blocks' quants, so that a group is one stream of whole cache lines; a
// last block without a pair keeps its d, then its quants. A group takes the bytes its rows took
// before: the tensor keeps its size.
#pragma once

#include <cstdint>

#include "cpu/quant/qdot.h"
#include "wick/quant.h"

namespace wick::cpu::arranged {

inline constexpr int64_t kRows = quant::QTensor::kArrangedRows;

// Where block i of a Q4_0 group of nb blocks per row keeps its d and its quants, from the group's
// start.
struct Q4_0Block {
  int64_t d, q;
};
inline Q4_0Block q4_0_block(int64_t i, int64_t nb) {
  constexpr int64_t kBlock = kRows * 18;  // a block's bytes in a group
  const int64_t pair = i / 2 * 2 * kBlock;
  if (i % 2 == 0 && i + 1 == nb) return {pair, pair + 32};
  return {pair + 32 * (i % 2), pair + 64 + 256 * (i % 2)};
}

// Whether weights of qtype, rows of k values, are arranged on this machine (its active_isa()).
bool arranges(quant::QType qtype, int64_t k);

// The blocks of `rows` rows of k values (plain: GGUF's order) in the arrangement, at out (as many
// bytes), which arranges() allows; and back, whatever the machine.
void arrange(quant::QType qtype, const uint8_t* plain, int64_t rows, int64_t k, uint8_t* out);
void plain(quant::QType qtype, const uint8_t* arranged, int64_t rows, int64_t k, uint8_t* out);

// Rows [r0, r1) of an arranged weight w (r0 a multiple of kRows, rows of k values) times the m rows
// of x: out[t * n + r]. Takes whole groups with the machine's kernel and returns the first row it
// did not take (r0 where it has none).
int64_t simd_rows(quant::QType qtype, const uint8_t* w, int64_t r0, int64_t r1, int64_t k, const qdot::RoundedX& x,
                  int64_t m, float* out, int64_t n);

}  // namespace wick::cpu::arranged
