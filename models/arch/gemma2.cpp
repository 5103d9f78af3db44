// Gemma 2: the Llama-style decoder with the embedding scaled by sqrt(dim), RMS norms after attention
// and after the MLP as well as before them (a checkpoint's norms scale by 1 + weight, which GGUF
// files hold already), a GELU (tanh) MLP, q k^T scaled by query_pre_attn_scalar^-1/2 and its
// scores soft-capped (50 * tanh(s / 50)), local layers (a sliding window) and global ones in turn,
// the logits soft-capped (30 * tanh(z / 30)), the head tied to the embedding. "gemma2".
#include "arch/arch.h"

namespace wick::models::arch {

std::shared_ptr<Model> load_gemma2(const ModelFile& file, const LoadOptions& options, DType dtype) {
  return load_decoder(file, options, dtype);
}

}  // namespace wick::models::arch
