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

using Block = kq::Format<QType::Q4_0>::Block;
static_assert(sizeof(Block) == 18 && sizeof(Block::qs) == 16);

// Copies between a plain group (rows of blocks) and an arranged one, each way.
template <bool kToArranged>
void move_group(const uint8_t* from, int64_t nb, uint8_t* to) {
  for (int64_t i = 0; i < nb; ++i) {
    for (int64_t r = 0; r < kRows; ++r) {
      const int64_t block = (r * nb + i) * static_cast<int64_t>(sizeof(Block));
      const int64_t d = block + static_cast<int64_t>(offsetof(Block, d));
      const int64_t qs = block + static_cast<int64_t>(offsetof(Block, qs));
      const Q4_0Block at = q4_0_block(i, nb);
      if constexpr (kToArranged) {
        std::memcpy(to + at.d + 2 * r, from + d, 2);
        for (int64_t b = 0; b < 16; b += 4) std::memcpy(to + at.q + 16 * b + 4 * r, from + qs + b, 4);
      } else {
        std::memcpy(to + d, from + at.d + 2 * r, 2);
        for (int64_t b = 0; b < 16; b += 4) std::memcpy(to + qs + b, from + at.q + 16 * b + 4 * r, 4);
      }
    }
  }
}

template <bool kToArranged>
void move(QType qtype, const uint8_t* from, int64_t rows, int64_t k, uint8_t* to) {
  const int64_t row_bytes = quant::row_bytes(qtype, k);
  const int64_t groups = qtype == QType::Q4_0 ? rows / kRows : 0;
  parallel_for(groups, 1, [&](int64_t first, int64_t last) {
    for (int64_t g = first; g < last; ++g)
      move_group<kToArranged>(from + g * kRows * row_bytes, k / 32, to + g * kRows * row_bytes);
  });
  const int64_t done = groups * kRows * row_bytes;
  std::memcpy(to + done, from + done, static_cast<size_t>(rows * row_bytes - done));
}

}  // namespace

bool arranges(QType qtype, int64_t k) {
  return qtype == QType::Q4_0 && k % 32 == 0 && qdot::active_isa() == qdot::Isa::Avx512Vnni;
}

void arrange(QType qtype, const uint8_t* plain, int64_t rows, int64_t k, uint8_t* out) {
  move<true>(qtype, plain, rows, k, out);
}

void plain(QType qtype, const uint8_t* arranged, int64_t rows, int64_t k, uint8_t* out) {
  move<false>(qtype, arranged, rows, k, out);
}

}  // namespace wick::cpu::arranged
