// The C API's model runner (include/wick/wick_c.h): a model and its tokenizer from a GGUF file or a
// checkpoint folder (models::ModelFile), tokenization, and generation with a callback per token.
#include <cstring>
#include <memory>
#include <vector>

#include "wick/models/generate.h"
#include "wick/models/model.h"
#include "wick_c_internal.h"

using namespace wick;
using namespace wick::capi;

namespace {

struct OpenModel {
  std::shared_ptr<const models::Model> model;
  models::Tokenizer tokenizer;
};

// Shared, so that a call keeps its model whole while another thread frees the handle.
HandleTable<std::shared_ptr<const OpenModel>>& model_handles() {
  static auto& table = *new HandleTable<std::shared_ptr<const OpenModel>>(3);
  return table;
}

std::shared_ptr<const OpenModel> model_in(const wick_model* m, const char* op) {
  std::optional<std::shared_ptr<const OpenModel>> x;
  if (m) x = model_handles().get(handle_word(m));
  if (!x) refuse_handle(m, op, "m", "model");
  return std::move(*x);
}

const char* text_in(const char* text, const char* op) {
  if (!text) throw ArgumentError(detail::str_cat(op, ": the text is null"));
  return text;
}

}  // namespace

extern "C" {

wick_status wick_model_open(const char* path, wick_device device, int32_t dtype, wick_model** out) {
  return guard([&] {
    out_ptr(out, "model_open");
    const std::string p = text_in(path, "model_open");
    const models::ModelFile file = models::ModelFile::open(p);
    models::LoadOptions o;
    o.device = device_in(device, "model_open");
    o.dtype = dtype_in(dtype, "model_open");
    auto model = file.load(o);
    auto open = std::make_shared<const OpenModel>(OpenModel{std::move(model), file.tokenizer()});
    *out = handle_of<wick_model>(model_handles().add(std::move(open)));
  });
}

void wick_model_free(wick_model* m) {
  free_handle(model_handles(), m,
              "wick_model_free: not a live wick_model handle (freed already, or never made by wick)");
}

wick_status wick_model_encode(const wick_model* m, const char* text, int32_t* ids, size_t cap, size_t* count) {
  return guard([&] {
    if (cap > 0 && !ids) throw ArgumentError("model_encode: ids is null with a capacity of " + std::to_string(cap));
    const std::vector<int32_t> v = model_in(m, "model_encode")->tokenizer.encode(text_in(text, "model_encode"));
    if (count) *count = v.size();
    if (cap > 0 && !v.empty()) std::memcpy(ids, v.data(), sizeof(int32_t) * std::min(cap, v.size()));
  });
}

wick_status wick_model_decode(const wick_model* m, const int32_t* ids, size_t count, char* buf, size_t cap,
                              size_t* len) {
  return guard([&] {
    if (count > 0 && !ids) throw ArgumentError("model_decode: ids is null");
    text_out(model_in(m, "model_decode")->tokenizer.decode(std::span<const int32_t>(ids, count)), buf, cap, len);
  });
}

wick_generate_options wick_generate_defaults(void) {
  const models::SamplingOptions s;
  return {128, s.temperature, s.top_k, s.top_p, s.min_p, s.repetition_penalty, s.seed};
}

wick_status wick_model_generate(const wick_model* m, const char* prompt, const wick_generate_options* options,
                                wick_token_callback on_token, void* user, wick_generate_stats* stats) {
  return guard([&] {
    const std::shared_ptr<const OpenModel> held = model_in(m, "model_generate");
    const OpenModel& w = *held;
    const wick_generate_options o = options ? *options : wick_generate_defaults();
    models::GenerateOptions g;
    g.max_tokens = o.max_tokens;
    g.sampling.temperature = o.temperature;
    g.sampling.top_k = o.top_k;
    g.sampling.top_p = o.top_p;
    g.sampling.min_p = o.min_p;
    g.sampling.repetition_penalty = o.repetition_penalty;
    g.sampling.seed = o.seed;
    const std::vector<std::vector<int32_t>> prompts{w.tokenizer.encode(text_in(prompt, "model_generate"))};
    models::TextStream text(w.tokenizer);
    auto each = [&](int64_t, int32_t token) {
      const std::string piece = text.push(token);
      return !on_token || on_token(piece.data(), piece.size(), token, user) == 0;
    };
    const models::GenerateResult r = models::generate(*w.model, prompts, g, each, &w.tokenizer);
    if (on_token) {
      const std::string rest = text.finish();
      if (!rest.empty()) on_token(rest.data(), rest.size(), -1, user);
    }
    if (stats) *stats = {r.prompt_tokens, r.generated_tokens(), r.prompt_seconds, r.generate_seconds};
  });
}

}  // extern "C"
