// Gemma 3 (text): the Llama-style decoder with the embedding scaled by sqrt(dim), RMS norms after
// attention and after the MLP as well as before them (a checkpoint's norms scale by 1 + weight,
// which GGUF files hold already), q and k RMS-normed per head, a GELU (tanh) MLP, q k^T scaled by
// query_pre_attn_scalar^-1/2, five local layers (a sliding window, rope at base 10000) to each
// global one (every key, rope at rope_theta with the file's linear scaling), the head tied to the
// embedding. GGUF's "gemma3" (every size's text model), config.json's "gemma3_text".
#include "arch/arch.h"

namespace wick::models::arch {

std::shared_ptr<Model> load_gemma3(const ModelFile& file, const LoadOptions& options, DType dtype) {
  return load_decoder(file, options, dtype);
}

}  // namespace wick::models::arch
