// The model registry (include/wick/models/model.h): a model's files opened and parsed once, and
// the table from the architecture they name to the family that loads them. A new family is a file
// of its own in arch/ and a line in kFamilies.
#include <filesystem>
#include <map>

#include "arch/arch.h"
#include "json.h"
#include "model_source.h"
#include "wick/models/model.h"

namespace wick::models {

namespace {

using Loader = std::shared_ptr<Model> (*)(const ModelFile& file, const LoadOptions& options, DType dtype);

// The architecture as GGUF's general.architecture or config.json's model_type names it.
struct Family {
  std::string_view architecture;
  Loader load;
};
constexpr Family kFamilies[] = {
    {"llama", arch::load_llama},          // Llama 2, 3, 3.1, Mistral and Mixtral in GGUF files; Llama checkpoints
    {"mistral", arch::load_llama},        // Mistral checkpoints
    {"qwen2", arch::load_qwen2},          // Qwen2 and Qwen2.5
    {"qwen3", arch::load_qwen3},          // Qwen3 (dense)
    {"qwen3moe", arch::load_qwen3_moe},   // Qwen3-MoE in GGUF files
    {"qwen3_moe", arch::load_qwen3_moe},  // Qwen3-MoE checkpoints
    {"mixtral", arch::load_mixtral},      // Mixtral checkpoints (its GGUF files are "llama" ones)
    {"phi3", arch::load_phi3},            // Phi-3 mini and medium (4k), Phi-3.5, Phi-4-mini
    {"gemma2", arch::load_gemma2},        // Gemma 2
    {"gemma3", arch::load_gemma3},        // Gemma 3 in GGUF files (the text model of every size)
    {"gemma3_text", arch::load_gemma3},   // Gemma 3 text checkpoints
};

const Family* family(std::string_view architecture) {
  for (const Family& f : kFamilies)
    if (f.architecture == architecture) return &f;
  return nullptr;
}

[[noreturn]] void unknown(const std::string& path, std::string_view key, const std::string& architecture) {
  std::string known;
  for (const Family& f : kFamilies) known.append(known.empty() ? "" : ", ").append(f.architecture);
  throw NotSupportedError(detail::str_cat("models: ", path, ": ", key, " \"", architecture, "\" (wick runs ", known, ")"));
}

// The dense dtype of most of a GGUF file's bytes of matrices, or nullopt where block formats hold more.
std::optional<DType> gguf_dtype(const io::GgufFile& file) {
  std::map<std::optional<DType>, int64_t> bytes;  // nullopt: block formats
  for (const io::GgufTensor& t : file.tensors())
    if (t.shape.rank() >= 2) bytes[t.qtype ? std::nullopt : t.dtype] += t.nbytes;
  std::optional<DType> most;
  int64_t most_bytes = -1;
  for (const auto& [dtype, n] : bytes)
    if (n > most_bytes) most = dtype, most_bytes = n;
  return most;
}

// config.json's torch_dtype (newer files: dtype), where it names f32, f16 or bf16.
std::optional<DType> checkpoint_dtype(const nlohmann::json& config) {
  for (const char* key : {"torch_dtype", "dtype"}) {
    const auto it = config.find(key);
    if (it == config.end() || !it->is_string()) continue;
    const std::string name = it->get<std::string>();
    if (name == "float32") return DType::F32;
    if (name == "float16") return DType::F16;
    if (name == "bfloat16") return DType::BF16;
  }
  return std::nullopt;
}

}  // namespace

DType default_dtype(Device device) { return device.is_gpu() ? DType::BF16 : DType::F32; }

namespace {

// forward() one position a step.
class ForwardSteps final : public DecodeSteps {
 public:
  ForwardSteps(const Model& model, std::vector<nn::KvCache>& cache) : model_(model), cache_(cache) {}
  Tensor step(const Tensor& tokens, const Tensor& key_mask) override {
    return model_.forward(tokens, cache_, key_mask, true);
  }
  const std::string& recording_error() const override { return none_; }

 private:
  const Model& model_;
  std::vector<nn::KvCache>& cache_;
  std::string none_;
};

}  // namespace

std::unique_ptr<DecodeSteps> Model::decode_steps(std::vector<nn::KvCache>& cache) const {
  return std::make_unique<ForwardSteps>(*this, cache);
}

std::unique_ptr<PagedSteps> Model::paged_steps(PagedKvCache&, int64_t) const { return nullptr; }

const char* kv_type_name(KvType type) { return type == KvType::Q8_0 ? "q8_0" : "model"; }

bool parse_kv_type(std::string_view name, KvType& type) {
  for (KvType t : {KvType::Model, KvType::Q8_0})
    if (name == kv_type_name(t)) {
      type = t;
      return true;
    }
  return false;
}

ModelFile ModelFile::open(const std::string& path) {
  auto s = std::make_shared<Source>();
  s->path = path;
  std::error_code ec;  // a path that cannot be looked at is no directory: GgufFile::open names it
  if (std::filesystem::is_directory(path, ec)) {
    s->config = (std::filesystem::path(path) / "config.json").string();
    const nlohmann::json j = read_json_file(s->config, "models");
    const auto type = j.is_object() ? j.find("model_type") : j.end();
    if (type == j.end() || !type->is_string())
      throw io::FormatError(detail::str_cat("models: ", s->config, ": model_type: missing"));
    s->architecture = type->get<std::string>();
    if (family(s->architecture) == nullptr) unknown(s->config, "model_type", s->architecture);
    s->stored = checkpoint_dtype(j);
  } else {
    s->gguf = io::GgufFile::open(path);
    const io::GgufValue* arch = s->gguf->find("general.architecture");
    if (arch == nullptr) throw io::FormatError(detail::str_cat("models: ", path, ": general.architecture: missing"));
    s->architecture = arch->as_string(detail::str_cat(path, ": general.architecture"));
    if (family(s->architecture) == nullptr) unknown(path, "general.architecture", s->architecture);
    s->stored = gguf_dtype(*s->gguf);
  }
  ModelFile f;
  f.source_ = std::move(s);
  return f;
}

const std::string& ModelFile::path() const { return source_->path; }
const std::string& ModelFile::architecture() const { return source_->architecture; }

bool ModelFile::has_tokenizer() const {
  const Source& s = *source_;
  if (s.gguf) return s.gguf->find("tokenizer.ggml.model") != nullptr;
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::path(s.path) / "tokenizer.json", ec);
}

const Tokenizer& ModelFile::tokenizer() const {
  const Source& s = *source_;
  std::call_once(s.tokenizer_once, [&] { s.tokenizer = s.gguf ? Tokenizer::from_gguf(*s.gguf) : Tokenizer::open(s.path); });
  return *s.tokenizer;
}

std::optional<DType> ModelFile::stored_dtype() const { return source_->stored; }

DType ModelFile::default_dtype(Device device) const {
  if (device.is_gpu()) return models::default_dtype(device);
  const std::optional<DType> stored = stored_dtype();
  return stored == DType::F16 || stored == DType::BF16 ? *stored : DType::F32;
}

std::shared_ptr<const Model> ModelFile::load(const LoadOptions& options) const {
  const DType dtype = options.dtype.value_or(default_dtype(options.device));
  std::shared_ptr<Model> model = family(source_->architecture)->load(*this, options, dtype);
  if (has_tokenizer()) model->set_tokenizer(tokenizer());
  return model;
}

std::vector<std::string> architectures() {
  std::vector<std::string> names;
  for (const Family& f : kFamilies) names.emplace_back(f.architecture);
  return names;
}

}  // namespace wick::models
