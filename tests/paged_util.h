// Paged batches for the tests of the engine's decode steps.
#pragma once

#include <cstdint>
#include <vector>

#include "wick/models/model.h"

namespace wick::test {

// A decode step of tokens.size() sequences: sequence s's one new token at position length[s]
// (which then grows by one), its table the blocks s * width + width - 1 down to s * width (backwards,
// so that logical and physical order differ), every logit wanted.
inline models::PagedBatch decode_batch(const std::vector<int32_t>& tokens, std::vector<int64_t>& length, int64_t width,
                                       int64_t block_size) {
  models::PagedBatch b;
  b.max_blocks = width;
  for (size_t s = 0; s < tokens.size(); ++s) {
    const auto first = static_cast<int32_t>(static_cast<int64_t>(s) * width);
    for (int64_t j = 0; j < width; ++j) b.tables.push_back(static_cast<int32_t>(first + width - 1 - j));
    b.tokens.push_back(tokens[s]);
    b.seqs.push_back(static_cast<int32_t>(s));
    b.positions.push_back(static_cast<int32_t>(length[s]));
    b.slots.push_back(int64_t{b.tables[s * static_cast<size_t>(width) + static_cast<size_t>(length[s] / block_size)]} *
                          block_size +
                      length[s] % block_size);
    b.logits_of.push_back(static_cast<int64_t>(s));
    ++length[s];
  }
  return b;
}

}  // namespace wick::test
