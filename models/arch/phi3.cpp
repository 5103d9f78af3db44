// Phi-3 (mini and medium, 4k context): the Llama-style decoder whose q, k and v are the rows of one
// weight (attn_qkv, a checkpoint's qkv_proj) and whose gate and up are one too (a GGUF file's
// ffn_up of twice the MLP's width, a checkpoint's gate_up_proj), rope over halves of each head, and
// a sliding window where the file names one. LongRoPE (the 128k models) and rotation over part of
// each head (Phi-4-mini) are refused by name.
#include "arch/arch.h"

namespace wick::models::arch {

std::shared_ptr<Model> load_phi3(const ModelFile& file, const LoadOptions& options, DType dtype) {
  return load_decoder(file, options, dtype);
}

}  // namespace wick::models::arch
