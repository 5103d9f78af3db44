// Llama 2, 3 and 3.1, and Mistral: the decoder of models/blocks/ (RMS norm, rotary positions over
// interleaved pairs in GGUF files and over halves in checkpoints, grouped-query attention, Mistral's
// sliding window, Llama 3.1's rope scaling, a SwiGLU MLP), without biases.
#include <filesystem>

#include "arch/arch.h"
#include "model_source.h"
#include "wick/models/llama.h"

namespace wick::models::arch {

std::shared_ptr<Model> load_decoder(const ModelFile& file, const LoadOptions& o, DType dtype) {
  const ModelFile::Source& s = file.source();
  if (s.gguf) return std::make_shared<LlamaModel>(LlamaModel::from_gguf(*s.gguf, o.device, dtype, o.comm, o.memory));
  const std::string dir = std::filesystem::path(s.config).parent_path().string();
  return std::make_shared<LlamaModel>(LlamaModel::from_checkpoint(
      LlamaConfig::from_json(s.config), io::SafetensorsCheckpoint::open(dir), o.device, dtype, o.comm, o.memory));
}

std::shared_ptr<Model> load_llama(const ModelFile& file, const LoadOptions& options, DType dtype) {
  return load_decoder(file, options, dtype);
}

}  // namespace wick::models::arch
