// The C API's model runner (include/wick/wick_c.h): a model and its tokenizer from a GGUF file or a
// checkpoint folder (models::ModelFile), tokenization, generation with a callback per token, and
// the engine (models::Engine) with pieces read by polling.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "wick/models/engine.h"
#include "wick/models/generate.h"
#include "wick/models/model.h"
#include "wick/models/tensor_parallel.h"
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

// A handle for a model loaded from `file`, with the file's tokenizer.
wick_model* model_handle(std::shared_ptr<const models::Model> model, const models::ModelFile& file) {
  auto open = std::make_shared<const OpenModel>(OpenModel{std::move(model), file.tokenizer()});
  return handle_of<wick_model>(model_handles().add(std::move(open)));
}

std::shared_ptr<const OpenModel> model_in(const wick_model* m, const char* op) {
  std::optional<std::shared_ptr<const OpenModel>> x;
  if (m) x = model_handles().get(handle_word(m));
  if (!x) refuse_handle(m, op, "m", "model");
  return std::move(*x);
}

// Shared, as models are: wick_engine_free while another thread waits in wick_engine_next leaves the
// engine to that call.
HandleTable<std::shared_ptr<models::Engine>>& engine_handles() {
  static auto& table = *new HandleTable<std::shared_ptr<models::Engine>>(4);
  return table;
}

std::shared_ptr<models::Engine> engine_in(const wick_engine* e, const char* op) {
  std::optional<std::shared_ptr<models::Engine>> x;
  if (e) x = engine_handles().get(handle_word(e));
  if (!x) refuse_handle(e, op, "e", "engine");
  return std::move(*x);
}

// A copy of s in malloc'ed memory, NUL-terminated (wick_piece_clear frees it).
char* c_string(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (!p) throw OutOfMemoryError("engine_next: no memory for a piece's text");
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  return p;
}

// The sampling options of wick_generate_options (the rest keep SamplingOptions' defaults).
models::SamplingOptions sampling_of(const wick_generate_options& o) {
  models::SamplingOptions s;
  s.temperature = o.temperature;
  s.top_k = o.top_k;
  s.top_p = o.top_p;
  s.min_p = o.min_p;
  s.repetition_penalty = o.repetition_penalty;
  s.seed = o.seed;
  s.presence_penalty = o.presence_penalty;
  s.frequency_penalty = o.frequency_penalty;
  return s;
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
    *out = model_handle(file.load(o), file);
  });
}

wick_status wick_model_open_split(const char* path, const wick_device* devices, size_t n_devices, int32_t dtype,
                                  wick_model** out) {
  return guard([&] {
    out_ptr(out, "model_open_split");
    const std::string p = text_in(path, "model_open_split");
    if (n_devices < 2 || !devices)
      throw ArgumentError("model_open_split: needs at least 2 devices, got " + std::to_string(n_devices) +
                          (devices ? "" : " (devices is null)"));
    std::vector<Device> ds;
    for (size_t i = 0; i < n_devices; ++i) ds.push_back(device_in(devices[i], "model_open_split"));
    const models::ModelFile file = models::ModelFile::open(p);
    models::LoadOptions o;
    o.dtype = dtype_in(dtype, "model_open_split");
    *out = model_handle(models::TensorParallelModel::load(file, ds, o), file);
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
  return {128,
          s.temperature,
          s.top_k,
          s.top_p,
          s.min_p,
          s.repetition_penalty,
          s.seed,
          s.presence_penalty,
          s.frequency_penalty};
}

wick_status wick_model_generate(const wick_model* m, const char* prompt, const wick_generate_options* options,
                                wick_token_callback on_token, void* user, wick_generate_stats* stats) {
  return guard([&] {
    const std::shared_ptr<const OpenModel> held = model_in(m, "model_generate");
    const OpenModel& w = *held;
    const wick_generate_options o = options ? *options : wick_generate_defaults();
    models::GenerateOptions g;
    g.max_tokens = o.max_tokens;
    g.sampling = sampling_of(o);
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

wick_engine_options wick_engine_defaults(void) {
  const models::EngineOptions o;
  return {o.block_size,
          o.blocks,
          o.kv_memory,
          o.step_tokens,
          o.max_running,
          o.prefix_cache ? 1 : 0,
          o.deterministic ? 1 : 0,
          o.kv_fraction,
          o.kv_type == models::KvType::Q8_0 ? WICK_KV_Q8_0 : WICK_KV_MODEL};
}

wick_status wick_engine_new(const wick_model* m, const wick_engine_options* options, wick_engine** out) {
  return guard([&] {
    out_ptr(out, "engine_new");
    const std::shared_ptr<const OpenModel> held = model_in(m, "engine_new");
    const wick_engine_options o = options ? *options : wick_engine_defaults();
    models::EngineOptions eo;
    eo.block_size = o.block_size;
    eo.blocks = o.blocks;
    eo.kv_memory = o.kv_memory;
    eo.step_tokens = o.step_tokens;
    eo.max_running = o.max_running;
    eo.prefix_cache = o.prefix_cache != 0;
    eo.deterministic = o.deterministic != 0;
    eo.kv_fraction = o.kv_fraction;
    if (o.kv_type != WICK_KV_MODEL && o.kv_type != WICK_KV_Q8_0)
      throw ShapeError(
          detail::str_cat("engine_new: kv_type ", o.kv_type, " is neither WICK_KV_MODEL (0) nor WICK_KV_Q8_0 (1)"));
    eo.kv_type = o.kv_type == WICK_KV_Q8_0 ? models::KvType::Q8_0 : models::KvType::Model;
    auto engine = std::make_shared<models::Engine>(held->model, eo);
    *out = handle_of<wick_engine>(engine_handles().add(std::move(engine)));
  });
}

void wick_engine_free(wick_engine* e) {
  free_handle(engine_handles(), e,
              "wick_engine_free: not a live wick_engine handle (freed already, or never made by wick)");
}

wick_request wick_request_defaults(void) { return {nullptr, nullptr, 0, wick_generate_defaults(), 1, nullptr, 0, -1}; }

wick_status wick_engine_submit(wick_engine* e, const wick_request* r, int64_t* id) {
  return guard([&] {
    out_ptr(id, "engine_submit", "id");
    if (!r) throw ArgumentError("engine_submit: the request is null");
    const std::shared_ptr<models::Engine> engine = engine_in(e, "engine_submit");
    models::Request q;
    if (r->text) {
      q.text = r->text;
    } else {
      if (r->n_ids > 0 && !r->ids) throw ArgumentError("engine_submit: ids is null with n_ids " + std::to_string(r->n_ids));
      q.prompt.assign(r->ids, r->ids + r->n_ids);
    }
    const wick_generate_options& o = r->options;
    q.max_tokens = o.max_tokens;
    q.sampling = sampling_of(o);
    q.stop_at_end = r->stop_at_end != 0;
    if (r->n_stop > 0 && !r->stop) throw ArgumentError("engine_submit: stop is null with n_stop " + std::to_string(r->n_stop));
    for (size_t i = 0; i < r->n_stop; ++i) {
      if (!r->stop[i]) throw ArgumentError("engine_submit: stop string " + std::to_string(i) + " is null");
      q.stop_strings.emplace_back(r->stop[i]);
    }
    q.logprobs = r->logprobs;
    *id = engine->submit(std::move(q));
  });
}

wick_status wick_engine_next(wick_engine* e, int64_t id, int64_t wait_ms, wick_piece* piece, int32_t* got) {
  return guard([&] {
    out_ptr(piece, "engine_next", "piece");
    out_ptr(got, "engine_next", "got");
    *got = 0;
    *piece = {};
    const std::shared_ptr<models::Engine> engine = engine_in(e, "engine_next");
    models::Piece p;
    const auto wait = wait_ms < 0 ? std::chrono::milliseconds::max() : std::chrono::milliseconds(wait_ms);
    if (!engine->next(id, p, wait)) return;
    wick_piece out{};
    out.request = p.request;
    out.token = p.token;
    out.finish = static_cast<int32_t>(p.finish);
    out.logprob = p.logprob;
    try {
      out.text = c_string(p.text);
      out.len = p.text.size();
      if (p.finish == models::Finish::Error) out.error = c_string(p.error);
      if (!p.top_logprobs.empty()) {
        const size_t n = p.top_logprobs.size();
        out.top_tokens = static_cast<int32_t*>(std::malloc(n * sizeof(int32_t)));
        out.top_logprobs = static_cast<double*>(std::malloc(n * sizeof(double)));
        if (!out.top_tokens || !out.top_logprobs)
          throw OutOfMemoryError("engine_next: no memory for a piece's top tokens");
        out.n_top = n;
        for (size_t i = 0; i < n; ++i) {
          out.top_tokens[i] = p.top_logprobs[i].first;
          out.top_logprobs[i] = p.top_logprobs[i].second;
        }
      }
    } catch (...) {
      wick_piece_clear(&out);
      throw;
    }
    *piece = out;
    *got = 1;
  });
}

void wick_piece_clear(wick_piece* piece) {
  if (!piece) return;
  std::free(piece->text);
  std::free(piece->error);
  std::free(piece->top_tokens);
  std::free(piece->top_logprobs);
  *piece = {};
}

wick_status wick_engine_cancel(wick_engine* e, int64_t id, int32_t* cancelled) {
  return guard([&] {
    const bool done = engine_in(e, "engine_cancel")->cancel(id);
    if (cancelled) *cancelled = done ? 1 : 0;
  });
}

wick_status wick_engine_get_stats(const wick_engine* e, wick_engine_stats* out) {
  return guard([&] {
    out_ptr(out, "engine_get_stats");
    const models::EngineStats s = engine_in(e, "engine_get_stats")->stats();
    *out = {s.running,         s.waiting,           s.finished,         s.blocks,        s.blocks_used,
            s.blocks_cached,   s.blocks_free,       s.prompt_tokens,    s.prefix_hit_tokens, s.computed_tokens,
            s.generated_tokens, s.steps,            s.preemptions,      s.first_token_seconds, s.first_tokens,
            s.between_tokens_seconds, s.token_gaps};
  });
}

}  // extern "C"
