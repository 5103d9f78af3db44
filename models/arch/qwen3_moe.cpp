// Qwen3-MoE (Qwen3-30B-A3B, Qwen3-235B-A22B): Qwen3's decoder (q and k RMS-normed per head) with a
// mixture of experts on every layer (blocks/moe.cpp): 128 experts of their own width
// (expert_feed_forward_length, moe_intermediate_size), 8 per token, no shared expert, the chosen
// experts' weights renormalized to sum 1 where the file says so (norm_topk_prob; GGUF files always).
// Dense MLPs on some layers (mlp_only_layers, decoder_sparse_step) are refused by name.
#include "arch/arch.h"

namespace wick::models::arch {

std::shared_ptr<Model> load_qwen3_moe(const ModelFile& file, const LoadOptions& options, DType dtype) {
  return load_decoder(file, options, dtype);
}

}  // namespace wick::models::arch
