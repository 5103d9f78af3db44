// Block-format weights arranged for the CPU's products (quant::QTensor::arrange): the blocks of
// kRows weight rows at a time interleaved, so that lane r of a vector holds a word of row r and a
// product kernel sums each row in its own lane, reading its weight as one stream without repacking
// it per call. A last group of fewer than kRows rows stays as it was, after the groups; a group
// takes the bytes its rows took before, so the tensor keeps its size.
//
// Q4_0, on machines with AVX-512 VNNI or AVX2: each block of a group keeps its 16 rows' d (32
// bytes) and their quants (256 bytes: vector v, 64 bytes, holds each row's bytes qs[4v, 4v + 4) in
// lane r, bytes 64 v + 4 r.., so that its low nibbles are values 4v.. of the 16 rows and its high
// nibbles values 16 + 4v..; AVX2 takes each 64 bytes as two halves of 8 rows). Blocks go in pairs,
// the two d first (64 bytes), then the two blocks' quants, so that a group is one stream of whole
// cache lines; a last block without a pair keeps its d, then its quants.
//
// Q4_K, where AVX2's kernels are the best (no AVX-512 VNNI; Q6_K and Q8_0 below too): a group is two runs of 8 rows
// (rows 0-7's blocks, then rows 8-15's). Each block of a run (1152 bytes, 8 x 144) keeps the 8 rows' d (16 bytes),
// their dmin (16), their scale bytes as three 32-byte vectors (vector c, lane r: row r's scales[4c, 4c + 4), so that
// kq::k4_scale_word decodes all 8 rows at once), then the quants: for each pair p of groups (2p and 2p + 1, 64 values)
// 8 vectors of 32 bytes, vector v holding row r's qs[32p + 4v, 32p + 4v + 4) in lane r (low nibbles: values 4v.. of
// group 2p; high: of 2p + 1).
//
// Q6_K, there too: runs of 8 rows as Q4_K's. Each block of a run (1680 bytes, 8 x 210) keeps the 8
// rows' d (16 bytes), their 16 scales as four 32-byte vectors (vector c, lane r: row r's
// scales[4c, 4c + 4)), then ql as 32 vectors (vector 8 (2h + s) + v, lane r: row r's
// ql[64h + 32s + 4v, +4), whose low nibbles are values 4v.. of unit 4h + s and high nibbles of unit
// 4h + s + 2), then qh as 16 vectors (vector 8h + v, lane r: row r's qh[32h + 4v, +4), whose bits 2k
// and 2k + 1 go with unit 4h + k).
//
// Q8_0, there too: runs of 8 rows. Each block of a run (272 bytes, 8 x 34) keeps the 8 rows' d (16
// bytes), then 8 vectors of 32 bytes, vector v holding row r's qs[4v, 4v + 4) in lane r.
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

// A Q4_K run's rows, and where its block's parts lie from the block's start (kBlockBytes each).
namespace q4_k {
inline constexpr int64_t kRunRows = 8;
inline constexpr int64_t kBlockBytes = kRunRows * 144;
inline constexpr int64_t kD = 0, kDmin = 16, kScales = 32, kQuants = 128;
// The 32 bytes of pair p, vector v.
inline constexpr int64_t quants(int64_t p, int64_t v) { return kQuants + 32 * (8 * p + v); }
}  // namespace q4_k

// A Q6_K run's block parts, from the block's start (kBlockBytes each).
namespace q6_k {
inline constexpr int64_t kRunRows = 8;
inline constexpr int64_t kBlockBytes = kRunRows * 210;
inline constexpr int64_t kD = 0, kScales = 16, kLow = 144, kHigh = 144 + 32 * 32;
inline constexpr int64_t low(int64_t h, int64_t s, int64_t v) { return kLow + 32 * (8 * (2 * h + s) + v); }
inline constexpr int64_t high(int64_t h, int64_t v) { return kHigh + 32 * (8 * h + v); }
}  // namespace q6_k

// A Q8_0 run's block parts, from the block's start (kBlockBytes each).
namespace q8_0 {
inline constexpr int64_t kRunRows = 8;
inline constexpr int64_t kBlockBytes = kRunRows * 34;
inline constexpr int64_t kD = 0, kQuants = 16;
}  // namespace q8_0

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
