// The families of models/arch/, one file each: how a family's files become a Model. registry.cpp
// maps the architectures that files name to these. Private to models/.
#pragma once

#include <memory>

#include "wick/models/model.h"

namespace wick::models::arch {

// Llama 2, 3 and 3.1 and Mistral: GGUF's "llama", config.json's "llama" and "mistral".
std::shared_ptr<Model> load_llama(const ModelFile& file, const LoadOptions& options, DType dtype);
// Qwen2 and Qwen2.5: "qwen2".
std::shared_ptr<Model> load_qwen2(const ModelFile& file, const LoadOptions& options, DType dtype);
// Qwen3 (dense): "qwen3".
std::shared_ptr<Model> load_qwen3(const ModelFile& file, const LoadOptions& options, DType dtype);
// Qwen3-MoE: GGUF's "qwen3moe", config.json's "qwen3_moe".
std::shared_ptr<Model> load_qwen3_moe(const ModelFile& file, const LoadOptions& options, DType dtype);
// Mixtral checkpoints: "mixtral" (its GGUF files are "llama" ones).
std::shared_ptr<Model> load_mixtral(const ModelFile& file, const LoadOptions& options, DType dtype);
// Phi-3 (mini and medium, 4k): "phi3".
std::shared_ptr<Model> load_phi3(const ModelFile& file, const LoadOptions& options, DType dtype);
// Gemma 2: "gemma2".
std::shared_ptr<Model> load_gemma2(const ModelFile& file, const LoadOptions& options, DType dtype);
// Gemma 3 (text): GGUF's "gemma3", config.json's "gemma3_text".
std::shared_ptr<Model> load_gemma3(const ModelFile& file, const LoadOptions& options, DType dtype);

// The Llama-style decoder (blocks/decoder.cpp) of a GGUF file or a checkpoint, configured by the
// readers of blocks/hparams.cpp: what Llama, Mistral, Mixtral, Qwen2, Qwen3, Qwen3-MoE, Phi-3, Gemma 2
// and Gemma 3 share.
std::shared_ptr<Model> load_decoder(const ModelFile& file, const LoadOptions& options, DType dtype);

}  // namespace wick::models::arch
