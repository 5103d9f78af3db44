// What a ModelFile (include/wick/models/model.h) holds: the files of a model, parsed once, which
// the families of arch/ load. Private to models/.
#pragma once

#include <mutex>
#include <optional>
#include <string>

#include "wick/io.h"
#include "wick/models/model.h"

namespace wick::models {

struct ModelFile::Source {
  std::string path;
  std::string architecture;
  std::optional<io::GgufFile> gguf;  // a GGUF file, or
  std::string config;                // a checkpoint's config.json (its directory holds the rest)
  std::optional<DType> stored;       // ModelFile::stored_dtype
  mutable std::once_flag tokenizer_once;
  mutable std::optional<Tokenizer> tokenizer;
};

}  // namespace wick::models
