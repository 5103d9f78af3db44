// Qwen3 (dense): the Llama-style decoder without biases, each head of q and of k RMS-normed before
// rope (LlamaConfig::qk_norm; GGUF's attn_q_norm and attn_k_norm, a checkpoint's self_attn.q_norm
// and k_norm), rope over halves of each head, a head size of its own (key_length, head_dim) and
// the head tied to the embedding where the file says so.
#include "arch/arch.h"

namespace wick::models::arch {

std::shared_ptr<Model> load_qwen3(const ModelFile& file, const LoadOptions& options, DType dtype) {
  return load_decoder(file, options, dtype);
}

}  // namespace wick::models::arch
