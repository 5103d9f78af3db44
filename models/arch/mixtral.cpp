// Mixtral: Mistral's decoder with a mixture of experts in place of each layer's MLP (eight experts,
// two per token, their weights the softmax of the chosen ones' scores; blocks/moe.cpp). Its GGUF
// files are "llama" ones with expert_count; checkpoints name it "mixtral" (block_sparse_moe.gate,
// block_sparse_moe.experts.E.w1, w3 and w2).
#include "arch/arch.h"

namespace wick::models::arch {

std::shared_ptr<Model> load_mixtral(const ModelFile& file, const LoadOptions& options, DType dtype) {
  return load_decoder(file, options, dtype);
}

}  // namespace wick::models::arch
