// Qwen2 and Qwen2.5: the Llama-style decoder with biases on q, k and v (LlamaConfig::qkv_bias), rope
// over halves of each head in GGUF files too, and a sliding window only where config.json's
// use_sliding_window asks for one (blocks/hparams.cpp reads each from the architecture).
#include "arch/arch.h"

namespace wick::models::arch {

std::shared_ptr<Model> load_qwen2(const ModelFile& file, const LoadOptions& options, DType dtype) {
  return load_decoder(file, options, dtype);
}

}  // namespace wick::models::arch
