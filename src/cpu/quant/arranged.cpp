// The arrangement of arranged.h, in portable loops over groups in parallel (a weight is arranged
// once, when it is loaded).
#include "cpu/quant/arranged.h"

#include <cstddef>
#include <cstring>

#include "cpu/parallel.h"
#include "kernels/quant.h"

namespace wick::cpu::arranged {

namespace kq = kernels::quant;
using quant::QType;

namespace {

// Copies `bytes` bytes between a plain group's offset p and an arranged group's offset a, the way
// kToArranged says.
template <bool kToArranged>
void copy(const uint8_t* from, int64_t p, int64_t a, int64_t bytes, uint8_t* to) {
  if constexpr (kToArranged) {
    std::memcpy(to + a, from + p, static_cast<size_t>(bytes));
  } else {
    std::memcpy(to + p, from + a, static_cast<size_t>(bytes));
  }
}

template <QType Q, bool kToArranged>
void move_group(const uint8_t* from, int64_t nb, uint8_t* to) {
  using Block = typename kq::Format<Q>::Block;
  constexpr auto kBlock = static_cast<int64_t>(sizeof(Block));
  if constexpr (Q == QType::Q4_0) {
    static_assert(kBlock == 18 && sizeof(Block::qs) == 16);
    for (int64_t i = 0; i < nb; ++i) {
      const Q4_0Block at = q4_0_block(i, nb);
      for (int64_t r = 0; r < kRows; ++r) {
        const int64_t block = (r * nb + i) * kBlock;
        copy<kToArranged>(from, block + offsetof(Block, d), at.d + 2 * r, 2, to);
        for (int64_t b = 0; b < 16; b += 4)
          copy<kToArranged>(from, block + offsetof(Block, qs) + b, at.q + 16 * b + 4 * r, 4, to);
      }
    }
  } else {
    // Runs of 8 rows: each row r's block i, from plain offset `block` to its run's block at `at`.
    constexpr int64_t kRun = 8, kRunBlock = kRun * kBlock;
    for (int64_t run = 0; run < kRows / kRun; ++run)
      for (int64_t i = 0; i < nb; ++i)
        for (int64_t r = 0; r < kRun; ++r) {
          const int64_t at = (run * nb + i) * kRunBlock, block = ((run * kRun + r) * nb + i) * kBlock;
          const auto part = [&](int64_t plain_offset, int64_t arranged_offset, int64_t bytes) {
            copy<kToArranged>(from, block + plain_offset, at + arranged_offset + bytes * r, bytes, to);
          };
          if constexpr (Q == QType::Q8_0) {
            static_assert(kRunBlock == q8_0::kBlockBytes && kRun == q8_0::kRunRows);
            part(offsetof(Block, d), q8_0::kD, 2);
            for (int64_t v = 0; v < 8; ++v) part(offsetof(Block, qs) + 4 * v, q8_0::kQuants + 32 * v, 4);
          } else if constexpr (Q == QType::Q4_K) {
            static_assert(kRunBlock == q4_k::kBlockBytes && kRun == q4_k::kRunRows);
            part(offsetof(Block, d), q4_k::kD, 2);
            part(offsetof(Block, dmin), q4_k::kDmin, 2);
            for (int64_t c = 0; c < 3; ++c) part(offsetof(Block, scales) + 4 * c, q4_k::kScales + 32 * c, 4);
            for (int64_t p = 0; p < 4; ++p)
              for (int64_t v = 0; v < 8; ++v) part(offsetof(Block, qs) + 32 * p + 4 * v, q4_k::quants(p, v), 4);
          } else {
            static_assert(Q == QType::Q6_K && kRunBlock == q6_k::kBlockBytes && kRun == q6_k::kRunRows);
            part(offsetof(Block, d), q6_k::kD, 2);
            for (int64_t c = 0; c < 4; ++c) part(offsetof(Block, scales) + 4 * c, q6_k::kScales + 32 * c, 4);
            for (int64_t h = 0; h < 2; ++h)
              for (int64_t v = 0; v < 8; ++v) {
                for (int64_t half = 0; half < 2; ++half)
                  part(offsetof(Block, ql) + 64 * h + 32 * half + 4 * v, q6_k::low(h, half, v), 4);
                part(offsetof(Block, qh) + 32 * h + 4 * v, q6_k::high(h, v), 4);
              }
          }
        }
  }
}

template <bool kToArranged>
void move(QType qtype, const uint8_t* from, int64_t rows, int64_t k, uint8_t* to) {
  const int64_t row_bytes = quant::row_bytes(qtype, k);
  const bool arranged = qtype == QType::Q4_0 || qtype == QType::Q8_0 || qtype == QType::Q4_K || qtype == QType::Q6_K;
  const int64_t groups = arranged ? rows / kRows : 0;
  parallel_for(groups, 1, [&](int64_t first, int64_t last) {
    for (int64_t g = first; g < last; ++g) {
      const int64_t at = g * kRows * row_bytes;
      if (qtype == QType::Q4_0) {
        move_group<QType::Q4_0, kToArranged>(from + at, k / 32, to + at);
      } else if (qtype == QType::Q8_0) {
        move_group<QType::Q8_0, kToArranged>(from + at, k / 32, to + at);
      } else if (qtype == QType::Q4_K) {
        move_group<QType::Q4_K, kToArranged>(from + at, k / 256, to + at);
      } else {
        move_group<QType::Q6_K, kToArranged>(from + at, k / 256, to + at);
      }
    }
  });
  const int64_t done = groups * kRows * row_bytes;
  std::memcpy(to + done, from + done, static_cast<size_t>(rows * row_bytes - done));
}

}  // namespace

bool arranges(QType qtype, int64_t k) {
  const qdot::Isa isa = qdot::active_isa();
  if (qtype == QType::Q4_0) return k % 32 == 0 && isa >= qdot::Isa::Avx2;
  if (qtype == QType::Q8_0) return k % 32 == 0 && isa == qdot::Isa::Avx2;
  if (qtype == QType::Q4_K || qtype == QType::Q6_K) return k % 256 == 0 && isa == qdot::Isa::Avx2;
  return false;
}

void arrange(QType qtype, const uint8_t* plain, int64_t rows, int64_t k, uint8_t* out) {
  move<true>(qtype, plain, rows, k, out);
}

void plain(QType qtype, const uint8_t* arranged, int64_t rows, int64_t k, uint8_t* out) {
  move<false>(qtype, arranged, rows, k, out);
}

}  // namespace wick::cpu::arranged
