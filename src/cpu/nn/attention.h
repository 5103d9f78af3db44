// The CPU's attention tiles (attention.cpp) for the paged kernel (paged_attention.cpp).
#pragma once

#include "backend/nn_kernels.h"

namespace wick::cpu {

// nn::paged_attention on the tiles of attention.cpp (backend/nn_kernels.h gives the arguments): T
// the queries' and result's element, P the pools' (T, or uint8_t for Q8_0 pools). Defined for T
// f32, f64, f16 and bf16.
template <typename T, typename P>
void paged_attention_tiles(const View& q, const View& k_pool, const View& v_pool, const View& tables, const View& seqs,
                           const View& positions, const AttentionArgs& args, T* out);

}  // namespace wick::cpu
