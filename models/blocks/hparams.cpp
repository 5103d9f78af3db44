// The Llama family's hyper-parameters (include/wick/models/llama.h's LlamaConfig): read from a GGUF
// file's metadata ("<arch>.embedding_length", ...) or a checkpoint's config.json, the shapes of
// released models, and the checks every configuration passes before any weight is made.
#include <cmath>
#include <tuple>

#include "json.h"
#include "wick/models/llama.h"

namespace wick::models {

namespace {

[[noreturn]] void fail(const io::GgufFile& f, std::string_view field, std::string_view what) {
  throw io::FormatError(detail::str_cat("llama: ", f.name(), ": ", field, ": ", what));
}

// A key as GgufValue's accessors name it in their errors: with the file.
std::string in_file(const io::GgufFile& f, std::string_view key) { return detail::str_cat(f.name(), ": ", key); }

// The architectures LlamaConfig describes, as GGUF's general.architecture names them.
constexpr std::string_view kArchitectures =
    "\"llama\", \"qwen2\", \"qwen3\", \"qwen3moe\", \"phi3\", \"gemma2\" and \"gemma3\"";
bool known_architecture(std::string_view a) {
  return a == "llama" || a == "qwen2" || a == "qwen3" || a == "qwen3moe" || a == "phi3" || a == "gemma2" ||
         a == "gemma3";
}

// Sizes read from a file are at most 2^40 each; a model has at most kMaxLayers layers (real ones
// have a few hundred) and heads of at most kMaxHeadDim (real ones: 64 to 256), so that a hostile
// count is refused before a loop of that length starts.
constexpr int64_t kMaxSize = int64_t{1} << 40;
constexpr int64_t kMaxLayers = int64_t{1} << 16;
constexpr int64_t kMaxHeadDim = int64_t{1} << 16;
constexpr int64_t kMaxExperts = int64_t{1} << 16;

int64_t positive(const io::GgufFile& f, const std::string& key, std::optional<int64_t> fallback = std::nullopt) {
  const io::GgufValue* v = f.find(key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    fail(f, key, "missing");
  }
  const int64_t n = v->as_int(in_file(f, key));
  if (n <= 0 || n > kMaxSize) fail(f, key, detail::str_cat(n, " is not a positive size"));
  return n;
}

double number(const io::GgufFile& f, const std::string& key, double fallback) {
  const io::GgufValue* v = f.find(key);
  if (v == nullptr) return fallback;
  const double x = v->as_float(in_file(f, key));
  if (!std::isfinite(x) || x <= 0) fail(f, key, detail::str_cat(x, " is not finite and positive"));
  return x;
}

// Gemma 2's and 3's traits, from either kind of file: the embedding scaled, norms after attention
// and the MLP as well, GELU, every `pattern`-th layer global and the others sliding over `window`
// keys, rope over halves of each head; Gemma 3's q and k normed per head.
void gemma(LlamaConfig& c, int64_t pattern) {
  c.embed_scale = c.post_norms = true;
  c.qk_norm = c.architecture == "gemma3";
  c.activation = LlamaConfig::Activation::GeluTanh;
  c.interleaved_rope = false;
  if (c.window > 0 && c.layers <= kMaxLayers) {  // (more layers: check() refuses them)
    c.layer_windows.assign(static_cast<size_t>(c.layers), c.window);
    for (int64_t i = pattern - 1; i < c.layers; i += pattern) c.layer_windows[static_cast<size_t>(i)] = 0;
  }
}

// Weight counts, saturated past kMaxWeights: no real model comes near it, and sizes read from a file
// (each up to 2^40) would overflow the products that follow.
constexpr int64_t kMaxWeights = int64_t{1} << 62;
// A size below 1 counts no weights (check() refuses it).
int64_t saturated_mul(int64_t a, int64_t b) {
  if (a <= 0 || b <= 0) return 0;
  return a > kMaxWeights / b ? kMaxWeights + 1 : a * b;
}
int64_t saturated_add(int64_t a, int64_t b) {
  a = std::max<int64_t>(a, 0), b = std::max<int64_t>(b, 0);
  return a > kMaxWeights - b ? kMaxWeights + 1 : a + b;
}

}  // namespace

LlamaConfig LlamaConfig::from_gguf(const io::GgufFile& f) {
  LlamaConfig c;
  const io::GgufValue* arch = f.find("general.architecture");
  if (arch == nullptr) fail(f, "general.architecture", "missing");
  c.architecture = arch->as_string(in_file(f, "general.architecture"));
  if (!known_architecture(c.architecture))
    throw NotSupportedError(detail::str_cat("llama: ", f.name(), ": architecture \"", c.architecture, "\" (wick runs ",
                                            kArchitectures, ")"));
  const std::string a = c.architecture + ".";
  c.dim = positive(f, a + "embedding_length");
  // A mixture of experts: Mixtral's files are "llama" ones with experts, Qwen3-MoE's name each
  // expert's width apart from the (unused) dense MLP's.
  if (f.find(a + "expert_count") != nullptr) {
    c.experts = positive(f, a + "expert_count");
    c.experts_used = positive(f, a + "expert_used_count");
    if (const io::GgufValue* v = f.find(a + "expert_weights_norm"))
      c.norm_topk = v->as_bool(in_file(f, a + "expert_weights_norm"));
  }
  c.hidden = c.experts > 0 && f.find(a + "expert_feed_forward_length") != nullptr
                 ? positive(f, a + "expert_feed_forward_length")
                 : positive(f, a + "feed_forward_length");
  c.layers = positive(f, a + "block_count");
  c.heads = positive(f, a + "attention.head_count");
  c.kv_heads = positive(f, a + "attention.head_count_kv", c.heads);
  c.context = positive(f, a + "context_length");
  if (c.dim < c.heads && f.find(a + "attention.key_length") == nullptr)
    fail(f, a + "embedding_length",
         detail::str_cat("width ", c.dim, " is less than the ", c.heads, " heads (no head size)"));
  c.head_dim = positive(f, a + "attention.key_length", c.dim / c.heads);
  if (c.heads % c.kv_heads != 0)
    fail(f, a + "attention.head_count_kv", detail::str_cat(c.kv_heads, " does not divide the ", c.heads, " heads"));
  if (c.head_dim % 2 != 0) fail(f, a + "attention.key_length", detail::str_cat("head size ", c.head_dim, " is odd"));
  if (const int64_t rot = positive(f, a + "rope.dimension_count", c.head_dim); rot != c.head_dim) {
    if (rot > c.head_dim || rot % 2 != 0)
      fail(f, a + "rope.dimension_count",
           detail::str_cat(rot, " rotated features of heads of ", c.head_dim, " (an even count up to the head size)"));
    c.rotary_dim = rot;
  }
  // LongRoPE's factors are tensors (rope_factors_long, rope_factors_short; the loader reads them).
  if (f.find(a + "rope.scaling.original_context_length") != nullptr)
    c.long_rope.original_context = positive(f, a + "rope.scaling.original_context_length");
  c.long_rope.attention_factor = number(f, a + "rope.scaling.attn_factor", 1);
  c.rms_eps = number(f, a + "attention.layer_norm_rms_epsilon", 1e-5);
  c.rope_theta = number(f, a + "rope.freq_base", 10000);
  // "linear" scaling (positions divided by the factor), as llama.cpp reads it for any architecture.
  if (const io::GgufValue* t = f.find(a + "rope.scaling.type");
      t != nullptr && t->as_string(in_file(f, a + "rope.scaling.type")) == "linear")
    c.rope_linear = number(f, a + "rope.scaling.factor", 1);
  if (const io::GgufValue* w = f.find(a + "attention.sliding_window")) {
    c.window = w->as_int(in_file(f, a + "attention.sliding_window"));
    if (c.window < 0) fail(f, a + "attention.sliding_window", detail::str_cat(c.window, " is negative"));
  }
  c.interleaved_rope = c.architecture == "llama";
  c.qkv_bias = c.architecture == "qwen2";
  c.qk_norm = c.architecture == "qwen3" || c.architecture == "qwen3moe";
  if (c.architecture == "qwen3moe" && c.experts == 0) fail(f, a + "expert_count", "missing");
  if (c.architecture == "gemma2") {
    // As llama.cpp reads these files: the norms hold 1 + weight already; every other layer global
    // (the first slides); the scores and the logits capped where the file says; q k^T scaled as
    // Gemma 3's below (27B: 46 layers).
    gemma(c, 2);
    c.attn_softcap = number(f, a + "attn_logit_softcapping", 0);
    c.final_softcap = number(f, a + "final_logit_softcapping", 0);
    if (c.layers == 46) c.attention_scale = 1 / std::sqrt(static_cast<double>(c.dim / c.heads));
  }
  if (c.architecture == "gemma3") {
    // As llama.cpp reads these files: the norms hold 1 + weight already; every sixth layer is
    // global, unless attention.sliding_window_pattern says otherwise (a period, or a flag per
    // layer: true where it slides); the local base is rope.freq_base_swa, else 10000 (rope.freq_base
    // and its linear scaling are the global layers'); q k^T scaled by head_dim^-1/2, but for the
    // 27B shape (62 layers) by (dim / heads)^-1/2, which is its query_pre_attn_scalar (the files
    // do not hold it).
    const std::string key = a + "attention.sliding_window_pattern";
    const io::GgufValue* pattern = f.find(key);
    gemma(c, pattern != nullptr && pattern->type != io::GgufType::Array ? positive(f, key) : 6);
    if (pattern != nullptr && pattern->type == io::GgufType::Array && c.window > 0 && c.layers <= kMaxLayers) {
      const io::GgufArray& flags = pattern->as_array(in_file(f, key));
      if (static_cast<int64_t>(flags.items.size()) != c.layers)
        fail(f, key, detail::str_cat(flags.items.size(), " flags for ", c.layers, " layers"));
      for (size_t i = 0; i < flags.items.size(); ++i)
        c.layer_windows[i] = flags.items[i].as_bool(in_file(f, key)) ? c.window : 0;
    }
    c.rope_local_theta = number(f, a + "rope.freq_base_swa", 10000);
    if (c.layers == 62) c.attention_scale = 1 / std::sqrt(static_cast<double>(c.dim / c.heads));
  }
  int64_t tokens = 0;
  if (const io::GgufValue* t = f.find("tokenizer.ggml.tokens"))
    tokens = static_cast<int64_t>(t->as_array(in_file(f, "tokenizer.ggml.tokens")).items.size());
  c.vocab = positive(f, a + "vocab_size", tokens > 0 ? std::optional<int64_t>(tokens) : std::nullopt);
  // The logits are the tokenizer's tokens: a vocabulary of another size gives ids no token has, or
  // tokens no logit scores.
  if (tokens > 0 && tokens != c.vocab)
    fail(f, a + "vocab_size", detail::str_cat(c.vocab, " logits for the ", tokens, " tokens of tokenizer.ggml.tokens"));
  c.check(f.name());
  return c;
}

namespace {

// config.json's values, checked as from_gguf checks GGUF's.
struct JsonConfig {
  const std::string& path;
  const nlohmann::json& j;

  [[noreturn]] void fail(std::string_view key, std::string_view what) const {
    throw io::FormatError(detail::str_cat("llama: ", path, ": ", key, ": ", what));
  }
  const nlohmann::json* find(const nlohmann::json& in, const char* key) const {
    const auto it = in.find(key);
    return it == in.end() || it->is_null() ? nullptr : &*it;
  }
  int64_t positive(const char* key, std::optional<int64_t> fallback = std::nullopt) const {
    const nlohmann::json* v = find(j, key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      fail(key, "missing");
    }
    if (!v->is_number_integer()) fail(key, detail::str_cat(v->dump(), " is not an integer"));
    const auto n = v->get<int64_t>();
    if (n <= 0 || n > kMaxSize) fail(key, detail::str_cat(n, " is not a positive size"));
    return n;
  }
  double number(const nlohmann::json& in, const char* key, double fallback) const {
    const nlohmann::json* v = find(in, key);
    if (v == nullptr) return fallback;
    if (!v->is_number()) fail(key, detail::str_cat(v->dump(), " is not a number"));
    const auto x = v->get<double>();
    if (!std::isfinite(x) || x <= 0) fail(key, detail::str_cat(x, " is not finite and positive"));
    return x;
  }
  bool flag(const char* key, bool fallback) const {
    const nlohmann::json* v = find(j, key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) fail(key, detail::str_cat(v->dump(), " is not true or false"));
    return v->get<bool>();
  }
};

// Gemma 2 and Gemma 3's text model (gemma2, gemma3_text): the traits (gemma() above), with
// transformers' defaults for what the file leaves out; what wick does not run (Gemma 3 with
// soft-capping, bidirectional attention, another activation) refused by name.
void gemma_json(const JsonConfig& f, LlamaConfig& c) {
  const nlohmann::json& j = f.j;
  const bool three = c.architecture == "gemma3";
  // Gemma 2 caps at 50 and 30 unless the file says otherwise (null: no cap).
  for (const auto& [key, cap, fallback] : {std::tuple{"attn_logit_softcapping", &c.attn_softcap, 50.0},
                                           std::tuple{"final_logit_softcapping", &c.final_softcap, 30.0}}) {
    const bool null = j.contains(key) && j.at(key).is_null();
    if (three && f.find(j, key) != nullptr)
      throw NotSupportedError(detail::str_cat("llama: ", f.path, ": ", key, " (soft-capping; Gemma 3 has none)"));
    if (!three) *cap = null ? 0 : f.number(j, key, fallback);
  }
  if (f.flag("use_bidirectional_attention", false))
    throw NotSupportedError(
        detail::str_cat("llama: ", f.path, ": use_bidirectional_attention (wick runs causal models)"));
  if (const nlohmann::json* act = f.find(j, "hidden_activation");
      act != nullptr && (!act->is_string() || act->get<std::string>() != "gelu_pytorch_tanh"))
    throw NotSupportedError(detail::str_cat("llama: ", f.path, ": hidden_activation ", act->dump().substr(0, 40),
                                            " (Gemma's is \"gelu_pytorch_tanh\")"));
  c.norm_offset = 1;
  c.attention_scale = 1 / std::sqrt(f.number(j, "query_pre_attn_scalar", 256));
  c.window = f.positive("sliding_window", 4096);
  gemma(c, three ? f.positive("sliding_window_pattern", 6) : 2);
  // transformers 5 writes each layer's type (past kMaxLayers layers, check() refuses the count).
  if (const nlohmann::json* types = f.find(j, "layer_types"); types != nullptr && c.layers <= kMaxLayers) {
    if (!types->is_array() || static_cast<int64_t>(types->size()) != c.layers)
      f.fail("layer_types",
             detail::str_cat(types->dump().substr(0, 80), " is not a list of ", c.layers, " layer types"));
    for (size_t i = 0; i < types->size(); ++i) {
      const nlohmann::json& t = (*types)[i];
      const std::string kind = t.is_string() ? t.get<std::string>() : "";
      if (kind != "sliding_attention" && kind != "full_attention")
        f.fail("layer_types", detail::str_cat(t.dump().substr(0, 40), " (sliding_attention or full_attention)"));
      c.layer_windows[i] = kind == "sliding_attention" ? c.window : 0;
    }
  }
  if (!three) return;
  // Gemma 3's local layers' base: rope_parameters' sliding_attention, or rope_local_base_freq.
  double local = f.number(j, "rope_local_base_freq", 10000);
  if (const nlohmann::json* rope = f.find(j, "rope_parameters"); rope != nullptr && rope->is_object())
    if (const nlohmann::json* s = f.find(*rope, "sliding_attention"); s != nullptr && s->is_object()) {
      local = f.number(*s, "rope_theta", local);
      const nlohmann::json* kind = f.find(*s, "rope_type");
      if (kind != nullptr && (!kind->is_string() || kind->get<std::string>() != "default"))
        throw NotSupportedError(detail::str_cat("llama: ", f.path, ": rope_parameters.sliding_attention.rope_type ",
                                                kind->dump().substr(0, 40), " (the local layers' rope is unscaled)"));
    }
  c.rope_local_theta = local;
}

}  // namespace

LlamaConfig LlamaConfig::from_json(const std::string& path) {
  const nlohmann::json j = read_json_file(path, "llama");
  if (!j.is_object()) throw io::FormatError(detail::str_cat("llama: ", path, ": not a JSON object"));
  const JsonConfig f{path, j};
  LlamaConfig c;
  const nlohmann::json* type = f.find(j, "model_type");
  if (type == nullptr || !type->is_string()) f.fail("model_type", "missing");
  const std::string model_type = type->get<std::string>();
  if (model_type == "gemma3")
    throw NotSupportedError(detail::str_cat("llama: ", path, ": model_type \"gemma3\" (Gemma 3 with its vision ",
                                            "encoder; wick runs the text model's checkpoints, \"gemma3_text\", and ",
                                            "GGUF files of every size)"));
  if (model_type != "llama" && model_type != "mistral" && model_type != "mixtral" && model_type != "qwen2" &&
      model_type != "qwen3" && model_type != "qwen3_moe" && model_type != "phi3" && model_type != "gemma2" &&
      model_type != "gemma3_text")
    throw NotSupportedError(detail::str_cat("llama: ", path, ": model_type \"", model_type,
                                            "\" (wick runs \"llama\", \"mistral\", \"mixtral\", \"qwen2\", "
                                            "\"qwen3\", \"qwen3_moe\", \"phi3\", \"gemma2\" and \"gemma3_text\")"));
  const bool qwen = model_type == "qwen2" || model_type == "qwen3" || model_type == "qwen3_moe";
  const bool gemma = model_type == "gemma3_text" || model_type == "gemma2";
  // GGUF's names: Mixtral's files are "llama" ones with experts, Qwen3-MoE's "qwen3moe", Gemma 3's "gemma3".
  c.architecture = model_type == "qwen3_moe"     ? "qwen3moe"
                   : model_type == "gemma3_text" ? "gemma3"
                   : model_type == "qwen2" || model_type == "qwen3" || model_type == "phi3" || model_type == "gemma2"
                       ? model_type
                       : "llama";
  c.qkv_bias = model_type == "qwen2";
  c.qk_norm = model_type == "qwen3" || model_type == "qwen3_moe";
  c.vocab = f.positive("vocab_size");
  c.dim = f.positive("hidden_size");
  if (model_type == "mixtral" || model_type == "qwen3_moe") {
    // transformers 5 names Qwen3-MoE's count num_local_experts as Mixtral's; released files num_experts.
    c.experts = f.positive(f.find(j, "num_local_experts") != nullptr || model_type == "mixtral" ? "num_local_experts"
                                                                                                : "num_experts");
    c.experts_used = f.positive("num_experts_per_tok");
    // Mixtral's weights are the softmax over the chosen experts' scores: renormalized.
    c.norm_topk = model_type == "mixtral" || f.flag("norm_topk_prob", false);
    c.hidden = f.positive(model_type == "qwen3_moe" ? "moe_intermediate_size" : "intermediate_size");
    if (model_type == "qwen3_moe") {
      // Every layer a mixture is what wick runs: a dense MLP on some layers is refused.
      if (const nlohmann::json* only = f.find(j, "mlp_only_layers");
          only != nullptr && (!only->is_array() || !only->empty()))
        throw NotSupportedError(detail::str_cat("llama: ", path, ": mlp_only_layers ", only->dump().substr(0, 80),
                                                " (dense MLPs on some layers; wick runs experts on every layer)"));
      if (f.positive("decoder_sparse_step", 1) != 1)
        throw NotSupportedError(detail::str_cat("llama: ", path, ": decoder_sparse_step ",
                                                f.positive("decoder_sparse_step"),
                                                " (experts on every layer is what wick runs)"));
    }
  } else {
    c.hidden = f.positive("intermediate_size");
  }
  c.layers = f.positive("num_hidden_layers");
  c.heads = f.positive("num_attention_heads");
  c.kv_heads = f.positive("num_key_value_heads", c.heads);
  if (c.dim < c.heads && f.find(j, "head_dim") == nullptr)
    f.fail("hidden_size", detail::str_cat("width ", c.dim, " is less than the ", c.heads, " heads (no head size)"));
  // (transformers' defaults for what a Gemma 3 config may leave out)
  c.head_dim = f.positive("head_dim", gemma ? 256 : c.dim / c.heads);
  c.context = f.positive("max_position_embeddings",
                         gemma ? std::optional<int64_t>(model_type == "gemma2" ? 8192 : 131072) : std::nullopt);
  if (c.heads % c.kv_heads != 0)
    f.fail("num_key_value_heads", detail::str_cat(c.kv_heads, " does not divide the ", c.heads, " heads"));
  if (c.head_dim % 2 != 0) f.fail("head_dim", detail::str_cat("head size ", c.head_dim, " is odd"));
  c.rms_eps = f.number(j, "rms_norm_eps", 1e-6);
  c.tied_embeddings = f.flag("tie_word_embeddings", gemma);
  if (model_type != "qwen2" && f.flag("attention_bias", false))
    throw NotSupportedError(detail::str_cat("llama: ", path, ": attention_bias (q, k, v and o biases)"));
  if (f.flag("mlp_bias", false)) throw NotSupportedError(detail::str_cat("llama: ", path, ": mlp_bias"));
  // Mistral and Phi-3 slide always where they name a window; Qwen2 and Qwen3 only with
  // use_sliding_window, and then (as transformers builds their layer_types) only the layers from
  // max_window_layers on: all of them or none is what wick runs, a window on some layers is refused.
  if (model_type == "mistral" || model_type == "mixtral" || model_type == "phi3" ||
      (qwen && f.flag("use_sliding_window", false)))
    if (f.find(j, "sliding_window") != nullptr) c.window = f.positive("sliding_window");
  if (qwen && c.window > 0) {
    int64_t sliding = 0;
    if (const nlohmann::json* types = f.find(j, "layer_types")) {
      if (!types->is_array() || static_cast<int64_t>(types->size()) != c.layers)
        f.fail("layer_types",
               detail::str_cat(types->dump().substr(0, 80), " is not a list of ", c.layers, " layer types"));
      for (const nlohmann::json& t : *types) sliding += t.is_string() && t.get<std::string>() == "sliding_attention";
    } else {
      int64_t first = 28;  // transformers' default
      if (const nlohmann::json* v = f.find(j, "max_window_layers")) {
        if (!v->is_number_integer() || v->get<int64_t>() < 0)
          f.fail("max_window_layers", detail::str_cat(v->dump(), " is not a layer count"));
        first = v->get<int64_t>();
      }
      sliding = std::max<int64_t>(0, c.layers - first);
    }
    if (sliding == 0) c.window = 0;
    if (sliding > 0 && sliding < c.layers)
      throw NotSupportedError(detail::str_cat("llama: ", path, ": a sliding window on ", sliding, " of the ", c.layers,
                                              " layers (max_window_layers, layer_types); wick slides all or none"));
  }

  if (gemma) gemma_json(f, c);

  // The rope: transformers 5 keeps it in rope_parameters, earlier ones in rope_theta and rope_scaling.
  const nlohmann::json* rope = f.find(j, "rope_parameters");
  if (rope == nullptr) rope = f.find(j, "rope_scaling");
  // Gemma 3's per layer type: the global layers' here, the local layers' base in gemma_json.
  if (gemma && rope != nullptr && rope->is_object() && rope->contains("full_attention"))
    rope = f.find(*rope, "full_attention");
  if (rope != nullptr && !rope->is_object()) f.fail("rope_parameters", "not an object");
  const double theta = model_type == "gemma3_text" ? 1e6 : 10000;
  c.rope_theta = f.number(j, "rope_theta", rope != nullptr ? f.number(*rope, "rope_theta", theta) : theta);
  // Rotation over part of each head (Phi-4-mini's 0.75): transformers turns int(head_dim * factor).
  if (const double part =
          f.number(j, "partial_rotary_factor", rope != nullptr ? f.number(*rope, "partial_rotary_factor", 1) : 1);
      part != 1) {
    const auto rot = static_cast<int64_t>(static_cast<double>(c.head_dim) * part);
    if (part > 1 || rot < 2 || rot % 2 != 0)
      f.fail("partial_rotary_factor", detail::str_cat(part, " of heads of ", c.head_dim, " turns ", rot,
                                                      " features (an even count up to the head size)"));
    c.rotary_dim = rot;
  }
  if (rope != nullptr) {
    const nlohmann::json* kind = f.find(*rope, "rope_type");
    if (kind == nullptr) kind = f.find(*rope, "type");
    const std::string name = kind != nullptr && kind->is_string() ? kind->get<std::string>() : "default";
    if (name == "llama3") {
      RopeScaling& r = c.rope_scaling;
      r.factor = f.number(*rope, "factor", 8);
      r.low_freq_factor = f.number(*rope, "low_freq_factor", 1);
      r.high_freq_factor = f.number(*rope, "high_freq_factor", 4);
      const double original = f.number(*rope, "original_max_position_embeddings", 8192);
      if (original > static_cast<double>(kMaxSize))
        f.fail("original_max_position_embeddings", detail::str_cat(original, " is not a size"));
      r.original_context = static_cast<int64_t>(original);
      if (r.high_freq_factor <= r.low_freq_factor)
        f.fail("rope_parameters", detail::str_cat("high_freq_factor ", r.high_freq_factor, " is not above low_freq_factor ",
                                                  r.low_freq_factor));
    } else if (name == "longrope" || name == "su") {
      LongRope& l = c.long_rope;
      auto factors = [&](const char* key) {
        const nlohmann::json* v = f.find(*rope, key);
        if (v == nullptr || !v->is_array()) f.fail(key, "missing (LongRoPE's factors, one per rotated pair)");
        std::vector<double> out;
        for (const nlohmann::json& x : *v) {
          if (!x.is_number()) f.fail(key, detail::str_cat(x.dump(), " is not a number"));
          out.push_back(x.get<double>());
        }
        return out;
      };
      l.short_factor = factors("short_factor");
      l.long_factor = factors("long_factor");
      const double original = f.number(*rope, "original_max_position_embeddings",
                                       f.number(j, "original_max_position_embeddings", static_cast<double>(c.context)));
      if (original > static_cast<double>(kMaxSize))
        f.fail("original_max_position_embeddings", detail::str_cat(original, " is not a size"));
      l.original_context = static_cast<int64_t>(original);
      // transformers' defaults: the factor from the two contexts, and the paper's attention factor.
      const double factor = f.number(*rope, "factor", static_cast<double>(c.context) / original);
      l.attention_factor =
          f.number(*rope, "attention_factor", factor <= 1 ? 1.0 : std::sqrt(1 + std::log(factor) / std::log(original)));
    } else if (name == "linear") {
      c.rope_linear = f.number(*rope, "factor", 1);
    } else if (name != "default") {
      throw NotSupportedError(detail::str_cat("llama: ", path, ": rope_type \"", name,
                                              "\" (wick knows \"default\", \"linear\", \"llama3\" and \"longrope\")"));
    }
  }
  c.check(path);
  return c;
}

LlamaConfig LlamaConfig::preset(std::string_view name) {
  LlamaConfig c;
  c.architecture = "llama";
  c.interleaved_rope = true;
  if (name == "llama3-8b") {
    c.vocab = 128256, c.dim = 4096, c.hidden = 14336, c.layers = 32, c.heads = 32, c.kv_heads = 8, c.head_dim = 128;
    c.context = 8192, c.rope_theta = 500000;
  } else if (name == "llama3-70b") {
    c.vocab = 128256, c.dim = 8192, c.hidden = 28672, c.layers = 80, c.heads = 64, c.kv_heads = 8, c.head_dim = 128;
    c.context = 8192, c.rope_theta = 500000;
  } else if (name == "llama3-1b") {
    c.vocab = 128256, c.dim = 2048, c.hidden = 8192, c.layers = 16, c.heads = 32, c.kv_heads = 8, c.head_dim = 64;
    c.context = 8192, c.rope_theta = 500000;
  } else if (name == "llama2-7b") {
    c.vocab = 32000, c.dim = 4096, c.hidden = 11008, c.layers = 32, c.heads = 32, c.kv_heads = 32, c.head_dim = 128;
    c.context = 4096;
  } else if (name == "qwen2-7b") {
    c.architecture = "qwen2";
    c.interleaved_rope = false;
    c.qkv_bias = true;
    c.vocab = 152064, c.dim = 3584, c.hidden = 18944, c.layers = 28, c.heads = 28, c.kv_heads = 4, c.head_dim = 128;
    c.context = 32768, c.rope_theta = 1000000, c.rms_eps = 1e-6;
  } else if (name == "qwen3-8b") {
    c.architecture = "qwen3";
    c.interleaved_rope = false;
    c.qk_norm = true;
    c.vocab = 151936, c.dim = 4096, c.hidden = 12288, c.layers = 36, c.heads = 32, c.kv_heads = 8, c.head_dim = 128;
    c.context = 40960, c.rope_theta = 1000000, c.rms_eps = 1e-6;
  } else if (name == "mixtral-8x7b") {
    c.vocab = 32000, c.dim = 4096, c.hidden = 14336, c.layers = 32, c.heads = 32, c.kv_heads = 8, c.head_dim = 128;
    c.context = 32768, c.rope_theta = 1000000;
    c.experts = 8, c.experts_used = 2;
  } else if (name == "qwen3-30b-a3b") {
    c.architecture = "qwen3moe";
    c.interleaved_rope = false;
    c.qk_norm = true;
    c.vocab = 151936, c.dim = 2048, c.hidden = 768, c.layers = 48, c.heads = 32, c.kv_heads = 4, c.head_dim = 128;
    c.context = 40960, c.rope_theta = 1000000, c.rms_eps = 1e-6;
    c.experts = 128, c.experts_used = 8;
  } else if (name == "gemma3-1b" || name == "gemma3-4b" || name == "gemma3-27b") {
    c.architecture = "gemma3";
    c.rms_eps = 1e-6, c.rope_theta = 1000000, c.rope_local_theta = 10000, c.tied_embeddings = true;
    c.vocab = 262208, c.context = 131072, c.window = 1024, c.rope_linear = 8;
    if (name == "gemma3-1b") {
      c.vocab = 262144, c.dim = 1152, c.hidden = 6912, c.layers = 26, c.heads = 4, c.kv_heads = 1, c.head_dim = 256;
      c.context = 32768, c.window = 512, c.rope_linear = 1;
    } else if (name == "gemma3-4b") {
      c.dim = 2560, c.hidden = 10240, c.layers = 34, c.heads = 8, c.kv_heads = 4, c.head_dim = 256;
    } else {
      c.dim = 5376, c.hidden = 21504, c.layers = 62, c.heads = 32, c.kv_heads = 16, c.head_dim = 128;
      c.attention_scale = 1 / std::sqrt(168.0);
    }
    gemma(c, 6);
  } else if (name == "gemma2-9b") {
    c.architecture = "gemma2";
    c.rms_eps = 1e-6, c.tied_embeddings = true, c.attn_softcap = 50, c.final_softcap = 30;
    c.vocab = 256000, c.dim = 3584, c.hidden = 14336, c.layers = 42, c.heads = 16, c.kv_heads = 8, c.head_dim = 256;
    c.context = 8192, c.window = 4096;
    gemma(c, 2);
  } else {
    throw Error(detail::str_cat("llama: no preset \"", name,
                                "\" (llama3-8b, llama3-70b, llama3-1b, llama2-7b, qwen2-7b, qwen3-8b, mixtral-8x7b, ",
                                "qwen3-30b-a3b, gemma2-9b, gemma3-1b, gemma3-4b, gemma3-27b)"));
  }
  return c;
}

void LlamaConfig::check(std::string_view source) const {
  auto bad = [&](std::string_view field, std::string_view what) {
    throw io::FormatError(detail::str_cat("llama: ", source, ": ", field, ": ", what));
  };
  if (!known_architecture(architecture))
    throw NotSupportedError(
        detail::str_cat("llama: ", source, ": architecture \"", architecture, "\" (wick runs ", kArchitectures, ")"));
  const std::pair<const char*, int64_t> sizes[] = {{"vocab", vocab},       {"dim", dim},        {"hidden", hidden},
                                                   {"layers", layers},     {"heads", heads},    {"kv_heads", kv_heads},
                                                   {"head_dim", head_dim}, {"context", context}};
  for (const auto& [field, n] : sizes)
    if (n <= 0 || n > kMaxSize) bad(field, detail::str_cat(n, " is not a size from 1 to 2^40"));
  if (parameters() > kMaxWeights)
    throw io::FormatError(detail::str_cat("llama: ", source, ": the sizes (width ", dim, ", MLP ", hidden, ", ", layers,
                                          " layers, ", heads, " heads and ", kv_heads, " KV heads of ", head_dim,
                                          ", vocabulary ", vocab, ") describe more than 2^62 weights"));
  if (layers > kMaxLayers) bad("layers", detail::str_cat(layers, " layers (at most ", kMaxLayers, ")"));
  if (head_dim > kMaxHeadDim) bad("head_dim", detail::str_cat("head size ", head_dim, " (at most ", kMaxHeadDim, ")"));
  if (head_dim % 2 != 0) bad("head_dim", detail::str_cat("head size ", head_dim, " is odd"));
  if (heads % kv_heads != 0) bad("kv_heads", detail::str_cat(kv_heads, " does not divide the ", heads, " heads"));
  if (window < 0) bad("window", detail::str_cat(window, " is negative"));
  if (!layer_windows.empty() && static_cast<int64_t>(layer_windows.size()) != layers)
    bad("layer_windows", detail::str_cat(layer_windows.size(), " windows for ", layers, " layers"));
  for (const int64_t w : layer_windows)
    if (w < 0) bad("layer_windows", detail::str_cat(w, " is negative"));
  for (const auto& [field, x] : {std::pair{"attention_scale", attention_scale},
                                 {"rope_local_theta", rope_local_theta},
                                 {"attn_softcap", attn_softcap},
                                 {"final_softcap", final_softcap}})
    if (!std::isfinite(x) || x < 0) bad(field, detail::str_cat(x, " is not finite and at least 0 (0: none)"));
  if (!std::isfinite(norm_offset)) bad("norm_offset", detail::str_cat(norm_offset, " is not finite"));
  if (experts < 0 || experts > kMaxExperts)
    bad("experts", detail::str_cat(experts, " experts (0: none, at most ", kMaxExperts, ")"));
  if (experts > 0 && (experts_used < 1 || experts_used > experts))
    bad("experts_used", detail::str_cat(experts_used, " experts per token of ", experts, " (from 1 to ", experts, ")"));
  if (experts == 0 && experts_used != 0)
    bad("experts_used", detail::str_cat(experts_used, " experts per token of a model without experts"));
  auto positive = [&](const char* field, double x) {
    if (!std::isfinite(x) || x <= 0) bad(field, detail::str_cat(x, " is not finite and positive"));
  };
  positive("rms_eps", rms_eps);
  positive("rope_theta", rope_theta);
  positive("rope_linear", rope_linear);
  const RopeScaling& r = rope_scaling;
  if (!std::isfinite(r.factor) || r.factor < 0)
    bad("rope_scaling.factor", detail::str_cat(r.factor, " is not finite and at least 0"));
  if (r.factor > 0) {
    positive("rope_scaling.low_freq_factor", r.low_freq_factor);
    positive("rope_scaling.high_freq_factor", r.high_freq_factor);
    if (r.high_freq_factor <= r.low_freq_factor)
      bad("rope_scaling", detail::str_cat("high_freq_factor ", r.high_freq_factor, " is not above low_freq_factor ",
                                          r.low_freq_factor));
    if (r.original_context <= 0 || r.original_context > kMaxSize)
      bad("rope_scaling.original_context", detail::str_cat(r.original_context, " is not a size from 1 to 2^40"));
  }
  if (rotary_dim < 0 || rotary_dim > head_dim || rotary_dim % 2 != 0)
    bad("rotary_dim", detail::str_cat(rotary_dim, " rotated features of heads of ", head_dim,
                                      " (an even count up to the head size; 0: all)"));
  const LongRope& l = long_rope;
  if (!l.short_factor.empty() || !l.long_factor.empty()) {
    for (const std::vector<double>* v : {&l.short_factor, &l.long_factor}) {
      if (static_cast<int64_t>(v->size()) != rotated() / 2)
        bad("long_rope", detail::str_cat(v->size(), " factors for ", rotated() / 2, " rotated pairs"));
      for (const double x : *v)
        if (!std::isfinite(x) || x <= 0) bad("long_rope", detail::str_cat("factor ", x, " is not finite and positive"));
    }
    if (l.original_context <= 0 || l.original_context > kMaxSize)
      bad("long_rope.original_context", detail::str_cat(l.original_context, " is not a size from 1 to 2^40"));
  }
  positive("long_rope.attention_factor", l.attention_factor);
  for (const int kind : {0, 1, 2}) {  // the rates, the long ones, the local ones
    if (kind == 2 && rope_local_theta == 0) continue;
    const std::vector<double> rates = kind == 2 ? inv_freq_local() : inv_freq(kind == 1);
    for (int64_t i = 0; i < rotated() / 2; ++i) {
      const double f = rates[static_cast<size_t>(i)];
      if (!std::isfinite(f) || f <= 0)
        bad("rope_theta",
            detail::str_cat("base ", rope_theta, " gives a rotation rate of ", f, " over heads of ", head_dim));
    }
  }
}

int64_t LlamaConfig::parameters() const {
  const int64_t attention = saturated_add(saturated_mul(saturated_mul(dim, heads), saturated_mul(head_dim, 2)),
                                          saturated_mul(saturated_mul(dim, kv_heads), saturated_mul(head_dim, 2)));
  // A mixture: each expert's MLP and the router's row for it.
  const int64_t mlp = experts > 0
                          ? saturated_mul(experts, saturated_add(saturated_mul(saturated_mul(dim, hidden), 3), dim))
                          : saturated_mul(saturated_mul(dim, hidden), 3);
  const int64_t layer =
      saturated_add(saturated_add(attention, mlp),
                    saturated_add(saturated_mul(dim, post_norms ? 4 : 2), qk_norm ? saturated_mul(head_dim, 2) : 0));
  // The embedding, and the head unless the embedding serves as it.
  const int64_t table = saturated_mul(vocab, dim);
  return saturated_add(saturated_add(tied_embeddings ? table : saturated_mul(table, 2), saturated_mul(layers, layer)),
                       dim);
}

std::vector<double> LlamaConfig::inv_freq(bool long_factors) const {
  std::vector<double> f;
  const RopeScaling& r = rope_scaling;
  const int64_t rot = rotated();
  const std::vector<double>& ext = long_factors ? long_rope.long_factor : long_rope.short_factor;
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    if (i >= rot / 2) {  // passed as it is
      f.push_back(0);
      continue;
    }
    double rate = std::pow(rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(rot)) / rope_linear;
    if (static_cast<size_t>(i) < ext.size()) rate /= ext[static_cast<size_t>(i)];
    if (r.factor <= 0) {
      f.push_back(rate);
      continue;
    }
    const double wavelength = 2 * M_PI / rate, context = static_cast<double>(r.original_context);
    if (wavelength > context / r.low_freq_factor) {
      f.push_back(rate / r.factor);
    } else if (wavelength < context / r.high_freq_factor) {
      f.push_back(rate);
    } else {
      const double smooth = (context / wavelength - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
      f.push_back((1 - smooth) * rate / r.factor + smooth * rate);
    }
  }
  return f;
}

std::vector<double> LlamaConfig::inv_freq_local() const {
  std::vector<double> f;
  if (rope_local_theta <= 0) return f;
  const int64_t rot = rotated();
  for (int64_t i = 0; i < head_dim / 2; ++i)
    f.push_back(i < rot / 2 ? std::pow(rope_local_theta, -2.0 * static_cast<double>(i) / static_cast<double>(rot)) : 0);
  return f;
}

}  // namespace wick::models
