// The Llama-family decoder of include/wick/models/llama.h, configured and loaded from GGUF files
// (llama.cpp's tensor names: token_embd, blk.N.attn_q, ..., output_norm, output) or Hugging Face
// checkpoints (config.json and safetensors with transformers' names, translated to llama.cpp's).
#include "wick/models/llama.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "json.h"
#include "wick/ops.h"

namespace wick::models {

namespace {

[[noreturn]] void fail(const io::GgufFile& f, std::string_view field, std::string_view what) {
  throw io::FormatError(detail::str_cat("llama: ", f.name(), ": ", field, ": ", what));
}

// A key as GgufValue's accessors name it in their errors: with the file.
std::string in_file(const io::GgufFile& f, std::string_view key) { return detail::str_cat(f.name(), ": ", key); }

// Sizes read from a file are at most 2^40 each; a model has at most kMaxLayers layers (real ones
// have a few hundred) and heads of at most kMaxHeadDim (real ones: 64 to 256), so that a hostile
// count is refused before a loop of that length starts.
constexpr int64_t kMaxSize = int64_t{1} << 40;
constexpr int64_t kMaxLayers = int64_t{1} << 16;
constexpr int64_t kMaxHeadDim = int64_t{1} << 16;

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
  if (c.architecture != "llama" && c.architecture != "qwen2")
    throw NotSupportedError(detail::str_cat("llama: ", f.name(), ": architecture \"", c.architecture,
                                            "\" (wick runs \"llama\" and \"qwen2\")"));
  const std::string a = c.architecture + ".";
  c.dim = positive(f, a + "embedding_length");
  c.hidden = positive(f, a + "feed_forward_length");
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
  if (const int64_t rot = positive(f, a + "rope.dimension_count", c.head_dim); rot != c.head_dim)
    throw NotSupportedError(detail::str_cat("llama: ", f.name(), ": rope over ", rot, " of ", c.head_dim,
                                            " features per head (wick rotates whole heads)"));
  c.rms_eps = number(f, a + "attention.layer_norm_rms_epsilon", 1e-5);
  c.rope_theta = number(f, a + "rope.freq_base", 10000);
  if (const io::GgufValue* w = f.find(a + "attention.sliding_window")) {
    c.window = w->as_int(in_file(f, a + "attention.sliding_window"));
    if (c.window < 0) fail(f, a + "attention.sliding_window", detail::str_cat(c.window, " is negative"));
  }
  c.interleaved_rope = c.architecture == "llama";
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

}  // namespace

LlamaConfig LlamaConfig::from_json(const std::string& path) {
  const nlohmann::json j = read_json_file(path, "llama");
  if (!j.is_object()) throw io::FormatError(detail::str_cat("llama: ", path, ": not a JSON object"));
  const JsonConfig f{path, j};
  LlamaConfig c;
  const nlohmann::json* type = f.find(j, "model_type");
  if (type == nullptr || !type->is_string()) f.fail("model_type", "missing");
  const std::string model_type = type->get<std::string>();
  if (model_type != "llama" && model_type != "mistral" && model_type != "qwen2")
    throw NotSupportedError(detail::str_cat("llama: ", path, ": model_type \"", model_type,
                                            "\" (wick runs \"llama\", \"mistral\" and \"qwen2\")"));
  c.architecture = model_type == "qwen2" ? "qwen2" : "llama";
  c.vocab = f.positive("vocab_size");
  c.dim = f.positive("hidden_size");
  c.hidden = f.positive("intermediate_size");
  c.layers = f.positive("num_hidden_layers");
  c.heads = f.positive("num_attention_heads");
  c.kv_heads = f.positive("num_key_value_heads", c.heads);
  if (c.dim < c.heads && f.find(j, "head_dim") == nullptr)
    f.fail("hidden_size", detail::str_cat("width ", c.dim, " is less than the ", c.heads, " heads (no head size)"));
  c.head_dim = f.positive("head_dim", c.dim / c.heads);
  c.context = f.positive("max_position_embeddings");
  if (c.heads % c.kv_heads != 0)
    f.fail("num_key_value_heads", detail::str_cat(c.kv_heads, " does not divide the ", c.heads, " heads"));
  if (c.head_dim % 2 != 0) f.fail("head_dim", detail::str_cat("head size ", c.head_dim, " is odd"));
  c.rms_eps = f.number(j, "rms_norm_eps", 1e-6);
  c.tied_embeddings = f.flag("tie_word_embeddings", false);
  if (model_type != "qwen2" && f.flag("attention_bias", false))
    throw NotSupportedError(detail::str_cat("llama: ", path, ": attention_bias (q, k, v and o biases)"));
  if (f.flag("mlp_bias", false)) throw NotSupportedError(detail::str_cat("llama: ", path, ": mlp_bias"));
  // Mistral slides always where it names a window; Qwen2 only with use_sliding_window.
  if (model_type == "mistral" || (model_type == "qwen2" && f.flag("use_sliding_window", false)))
    if (f.find(j, "sliding_window") != nullptr) c.window = f.positive("sliding_window");

  // The rope: transformers 5 keeps it in rope_parameters, earlier ones in rope_theta and rope_scaling.
  const nlohmann::json* rope = f.find(j, "rope_parameters");
  if (rope == nullptr) rope = f.find(j, "rope_scaling");
  if (rope != nullptr && !rope->is_object()) f.fail("rope_parameters", "not an object");
  c.rope_theta = f.number(j, "rope_theta", rope != nullptr ? f.number(*rope, "rope_theta", 10000) : 10000);
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
    } else if (name != "default") {
      throw NotSupportedError(detail::str_cat("llama: ", path, ": rope_type \"", name, "\" (wick knows \"default\" and \"llama3\")"));
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
    c.vocab = 152064, c.dim = 3584, c.hidden = 18944, c.layers = 28, c.heads = 28, c.kv_heads = 4, c.head_dim = 128;
    c.context = 32768, c.rope_theta = 1000000, c.rms_eps = 1e-6;
  } else {
    throw Error(detail::str_cat("llama: no preset \"", name, "\" (llama3-8b, llama3-70b, llama3-1b, llama2-7b, qwen2-7b)"));
  }
  return c;
}

void LlamaConfig::check(std::string_view source) const {
  auto bad = [&](std::string_view field, std::string_view what) {
    throw io::FormatError(detail::str_cat("llama: ", source, ": ", field, ": ", what));
  };
  if (architecture != "llama" && architecture != "qwen2")
    throw NotSupportedError(detail::str_cat("llama: ", source, ": architecture \"", architecture,
                                            "\" (wick runs \"llama\" and \"qwen2\")"));
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
  auto positive = [&](const char* field, double x) {
    if (!std::isfinite(x) || x <= 0) bad(field, detail::str_cat(x, " is not finite and positive"));
  };
  positive("rms_eps", rms_eps);
  positive("rope_theta", rope_theta);
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
  for (const double f : inv_freq())
    if (!std::isfinite(f) || f <= 0)
      bad("rope_theta",
          detail::str_cat("base ", rope_theta, " gives a rotation rate of ", f, " over heads of ", head_dim));
}

int64_t LlamaConfig::parameters() const {
  const int64_t attention = saturated_add(saturated_mul(saturated_mul(dim, heads), saturated_mul(head_dim, 2)),
                                          saturated_mul(saturated_mul(dim, kv_heads), saturated_mul(head_dim, 2)));
  const int64_t layer =
      saturated_add(saturated_add(attention, saturated_mul(saturated_mul(dim, hidden), 3)), saturated_mul(dim, 2));
  return saturated_add(saturated_add(saturated_mul(saturated_mul(vocab, dim), 2), saturated_mul(layers, layer)), dim);
}

std::vector<double> LlamaConfig::inv_freq() const {
  std::vector<double> f;
  const RopeScaling& r = rope_scaling;
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const double rate = std::pow(rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
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

// ---- weights ------------------------------------------------------------------------------------

Tensor Linear::operator()(const Tensor& x) const {
  Tensor y = quantized.defined() ? quant::qmatmul(x, quantized) : x.matmul(dense.t());
  return bias.defined() ? y + bias : y;
}

Linear Linear::slice(int dim, int rank, int size) const {
  const int64_t n = dim == 0 ? out_features() : in_features();
  const int64_t width = n / size;
  Linear l;
  if (quantized.defined()) {
    const quant::QType q = quantized.qtype();
    if (dim == 0) {
      l.quantized = quant::QTensor(q, width, quantized.cols(), quantized.bytes().narrow(0, width * rank, width));
    } else {
      if (width % quant::block_values(q) != 0)
        throw NotSupportedError(detail::str_cat("llama: split of a ", q, " weight of ", n, " columns in ", size,
                                                " parts of ", width, " (not whole blocks of ", quant::block_values(q), ")"));
      const int64_t piece = quant::row_bytes(q, width);
      l.quantized = quant::QTensor(q, quantized.rows(), width, quantized.bytes().narrow(1, piece * rank, piece));
    }
  } else {
    l.dense = dense.narrow(dim, width * rank, width).contiguous();
  }
  if (bias.defined()) {
    if (dim != 0) throw NotSupportedError("llama: split of a biased weight by its columns");
    l.bias = bias.narrow(0, width * rank, width).contiguous();
  }
  return l;
}

int64_t Linear::out_features() const { return quantized.defined() ? quantized.rows() : dense.shape()[0]; }
int64_t Linear::in_features() const { return quantized.defined() ? quantized.cols() : dense.shape()[1]; }
int64_t Linear::bytes() const {
  const int64_t b = bias.defined() ? bias.numel() * dtype_size(bias.dtype()) : 0;
  return b + (quantized.defined() ? quantized.nbytes() : dense.numel() * dtype_size(dense.dtype()));
}

LinearGroup LinearGroup::of(std::vector<Linear> linears) {
  LinearGroup g;
  for (const Linear& l : linears) g.widths.push_back(l.out_features());
  const Linear& first = linears.front();
  bool stack = linears.size() > 1;
  for (const Linear& l : linears) {
    stack = stack && l.quantized.defined() == first.quantized.defined() && l.bias.defined() == first.bias.defined() &&
            l.in_features() == first.in_features();
    if (l.quantized.defined() && first.quantized.defined()) stack = stack && l.quantized.qtype() == first.quantized.qtype();
    if (l.dense.defined() && first.dense.defined()) stack = stack && l.dense.dtype() == first.dense.dtype();
  }
  if (!stack) {
    g.weights = std::move(linears);
    return g;
  }
  std::vector<Tensor> rows, biases;
  for (const Linear& l : linears) {
    rows.push_back(l.quantized.defined() ? l.quantized.bytes() : l.dense);
    if (l.bias.defined()) biases.push_back(l.bias);
  }
  Linear joint;
  if (first.quantized.defined()) {
    int64_t n = 0;
    for (int64_t w : g.widths) n += w;
    joint.quantized = quant::QTensor(first.quantized.qtype(), n, first.in_features(), cat(rows, 0));
  } else {
    joint.dense = cat(rows, 0);
  }
  if (!biases.empty()) joint.bias = cat(biases, 0);
  g.weights = {joint};
  return g;
}

std::vector<Tensor> LinearGroup::operator()(const Tensor& x) const {
  std::vector<Tensor> out;
  if (weights.size() == widths.size()) {
    for (const Linear& l : weights) out.push_back(l(x));
    return out;
  }
  const Tensor y = weights.front()(x);
  int64_t from = 0;
  for (int64_t w : widths) {
    out.push_back(y.narrow(-1, from, w));
    from += w;
  }
  return out;
}

int64_t LinearGroup::bytes() const {
  int64_t n = 0;
  for (const Linear& l : weights) n += l.bytes();
  return n;
}

// The tensors of a file under the roles of llama.cpp's names ("token_embd", "blk.3.attn_q",
// "output_norm", ...), each without its ".weight"/".bias" suffix.
class LlamaModel::Weights {
 public:
  virtual ~Weights() = default;
  virtual const std::string& source() const = 0;  // the file, in messages
  // The tensor `name` (a role with its suffix): its shape, or nullopt where the file has none.
  virtual std::optional<Shape> shape(const std::string& name) const = 0;
  virtual bool quantized(const std::string& name) const = 0;
  virtual Tensor dense(const std::string& name, Device device) const = 0;
  virtual quant::QTensor blocks(const std::string& name, Device device) const = 0;

  [[noreturn]] void fail(std::string_view name, std::string_view what) const {
    throw io::FormatError(detail::str_cat("llama: ", source(), ": ", name, ": ", what));
  }
  void expect(const std::string& name, const Shape& shape_wanted) const {
    const std::optional<Shape> s = shape(name);
    if (!s) fail(name, "missing");
    if (*s != shape_wanted) fail(name, detail::str_cat("shape ", *s, ", not ", shape_wanted));
  }
  Tensor dense(const std::string& name, const Shape& shape_wanted, Device device, DType dtype) const {
    expect(name, shape_wanted);
    if (quantized(name)) fail(name, "a block-format tensor where a dense one is needed");
    return owned(floats(name, dense(name, device)), dtype);
  }
  // Weights are numbers with fractions: a tensor of integers (or f8, whose scales a file would
  // have to give) is no weight of this model.
  const Tensor& floats(std::string_view name, const Tensor& t) const {
    const DType d = t.dtype();
    if (d != DType::F32 && d != DType::F16 && d != DType::BF16 && d != DType::F64)
      fail(name, detail::str_cat("a tensor of ", d, " (weights are f32, f16, bf16 or f64, or a block format)"));
    return t;
  }
  bool copy_on_cpu = true;  // WeightMemory::Copy; load() sets it
  // t in `dtype`, copied out of the file's mapping where it still lies there on the CPU and the
  // model keeps its own weights (a conversion to another dtype is a copy already).
  Tensor owned(const Tensor& t, DType dtype) const {
    if (t.dtype() != dtype) return t.to_dtype(dtype);
    return copy_on_cpu && t.device().type() == DeviceType::Cpu ? t.copy() : t;
  }
  quant::QTensor owned(const quant::QTensor& q) const {
    if (!copy_on_cpu || q.device().type() != DeviceType::Cpu) return q;
    return quant::QTensor(q.qtype(), q.rows(), q.cols(), q.bytes().copy());
  }
  // The weight `role` (and its bias), or the part of it that `part` names: cut from the file's
  // tensor on the host, so that only that part is copied to the device. In place: not copied out
  // of the file's mapping (group() stacks it into new memory, or copies it).
  Linear linear(const std::string& role, int64_t out, int64_t in, bool bias, Device device, DType dtype, Part part = {},
                bool in_place = false) const {
    const std::string name = role + ".weight";
    expect(name, Shape({out, in}));
    const Device at = part.dim < 0 ? device : Device::cpu();
    Linear l;
    if (quantized(name))
      l.quantized = blocks(name, at);
    else
      l.dense = floats(name, dense(name, at));
    if (bias) l.bias = dense(role + ".bias", Shape({out}), at, dtype);
    if (part.dim >= 0) {
      l = l.slice(part.dim, part.rank, part.size);
      if (l.quantized.defined()) l.quantized = l.quantized.to_device(device);
      if (l.dense.defined()) l.dense = l.dense.to_device(device);
      if (l.bias.defined()) l.bias = l.bias.to_device(device);
    }
    if (l.dense.defined()) l.dense = in_place ? l.dense.to_dtype(dtype) : owned(l.dense, dtype);
    if (l.quantized.defined() && !in_place) l.quantized = owned(l.quantized);
    return l;
  }
  // Linears read in place, stacked where they can be (into new memory); those left apart are
  // copied out of the file's mapping as linear() copies one.
  LinearGroup group(std::vector<Linear> parts) const {
    LinearGroup g = LinearGroup::of(std::move(parts));
    if (g.weights.size() > 1) {
      for (Linear& l : g.weights) {
        if (l.dense.defined()) l.dense = owned(l.dense, l.dense.dtype());
        if (l.quantized.defined()) l.quantized = owned(l.quantized);
      }
    }
    return g;
  }
};

class LlamaModel::GgufWeights final : public LlamaModel::Weights {
 public:
  explicit GgufWeights(const io::GgufFile& f) : f_(f) {}
  const std::string& source() const override { return f_.name(); }
  std::optional<Shape> shape(const std::string& name) const override {
    const io::GgufTensor* t = f_.find_tensor(name);
    return t == nullptr ? std::nullopt : std::optional<Shape>(t->shape);
  }
  bool quantized(const std::string& name) const override { return f_.find_tensor(name)->qtype.has_value(); }
  Tensor dense(const std::string& name, Device device) const override { return f_.tensor(*f_.find_tensor(name), device); }
  quant::QTensor blocks(const std::string& name, Device device) const override {
    return f_.qtensor(*f_.find_tensor(name), device);
  }

 private:
  const io::GgufFile& f_;
};

// transformers' names for llama.cpp's.
class LlamaModel::CheckpointWeights final : public LlamaModel::Weights {
 public:
  explicit CheckpointWeights(const io::SafetensorsCheckpoint& c) : c_(c) {}
  const std::string& source() const override { return c_.name(); }
  std::optional<Shape> shape(const std::string& name) const override {
    const io::SafetensorsTensor* t = c_.find_tensor(translate(name));
    return t == nullptr ? std::nullopt : std::optional<Shape>(t->shape);
  }
  bool quantized(const std::string&) const override { return false; }
  Tensor dense(const std::string& name, Device device) const override { return c_.tensor(translate(name), device); }
  quant::QTensor blocks(const std::string& name, Device) const override { fail(name, "no block formats in safetensors"); }

 private:
  static std::string translate(const std::string& name) {
    static const std::pair<std::string_view, std::string_view> kLayer[] = {
        {"attn_norm", "input_layernorm"},      {"attn_q", "self_attn.q_proj"}, {"attn_k", "self_attn.k_proj"},
        {"attn_v", "self_attn.v_proj"},        {"attn_output", "self_attn.o_proj"},
        {"ffn_norm", "post_attention_layernorm"}, {"ffn_gate", "mlp.gate_proj"}, {"ffn_up", "mlp.up_proj"},
        {"ffn_down", "mlp.down_proj"}};
    static const std::pair<std::string_view, std::string_view> kTop[] = {
        {"token_embd", "model.embed_tokens"}, {"output_norm", "model.norm"}, {"output", "lm_head"}};
    const size_t dot = name.rfind('.');
    const std::string_view role = std::string_view(name).substr(0, dot), suffix = std::string_view(name).substr(dot);
    if (role.starts_with("blk.")) {
      const size_t end = role.find('.', 4);
      const std::string_view layer = role.substr(4, end - 4), what = role.substr(end + 1);
      for (const auto& [ours, theirs] : kLayer)
        if (what == ours) return detail::str_cat("model.layers.", layer, ".", theirs, suffix);
    }
    for (const auto& [ours, theirs] : kTop)
      if (role == ours) return detail::str_cat(theirs, suffix);
    return name;
  }

  const io::SafetensorsCheckpoint& c_;
};

void LlamaModel::split_over(const dist::Communicator& comm, std::optional<quant::QType> down_format) {
  const LlamaConfig& c = config_;
  heads_ = c.heads;
  kv_heads_ = c.kv_heads;
  if (!comm.defined()) return;
  if (comm.device() != device_)
    throw DeviceError(detail::str_cat("llama: a model on ", device_, " split over a communicator on ", comm.device()));
  comm_ = comm;
  rank_ = comm.rank();
  ranks_ = comm.size();
  const std::pair<const char*, int64_t> counts[] = {
      {"attention heads", c.heads}, {"KV heads", c.kv_heads}, {"MLP width", c.hidden}, {"vocabulary", c.vocab}};
  for (const auto& [what, n] : counts)
    if (n % ranks_ != 0)
      throw NotSupportedError(detail::str_cat("llama: tensor parallel over ", ranks_, " ranks: the ", n, " ", what,
                                              " do not divide in ", ranks_, " equal parts"));
  if (down_format && (c.hidden / ranks_) % quant::block_values(*down_format) != 0)
    throw NotSupportedError(detail::str_cat("llama: tensor parallel over ", ranks_, " ranks: ", c.hidden / ranks_,
                                            " columns of ffn_down per rank are not whole ", *down_format, " blocks"));
  heads_ = c.heads / ranks_;
  kv_heads_ = c.kv_heads / ranks_;
}

LlamaModel LlamaModel::load(const LlamaConfig& c, Weights& w, Device device, DType dtype,
                            const dist::Communicator& comm, WeightMemory memory) {
  w.copy_on_cpu = memory == WeightMemory::Copy;
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16)
    throw DTypeError(detail::str_cat("llama: activations in ", dtype, " (f32, f16 or bf16)"));
  LlamaModel m;
  m.config_ = c;
  m.device_ = device;
  m.dtype_ = dtype;
  std::optional<quant::QType> down_format;
  if (comm.defined() && c.layers > 0 && w.shape("blk.0.ffn_down.weight") && w.quantized("blk.0.ffn_down.weight"))
    down_format = w.blocks("blk.0.ffn_down.weight", Device::cpu()).qtype();
  m.split_over(comm, down_format);
  const Part whole, rows = m.part(0), cols = m.part(1);
  const bool split = m.ranks_ > 1;
  const bool bias = c.architecture == "qwen2";
  m.embedding_ = w.linear("token_embd", c.vocab, c.dim, false, device, dtype, split ? rows : whole);
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = detail::str_cat("blk.", i, ".");
    const Part r = split ? rows : whole, k = split ? cols : whole;
    Layer l;
    l.attn_norm = w.dense(p + "attn_norm.weight", Shape({c.dim}), device, dtype);
    l.qkv = w.group({w.linear(p + "attn_q", c.heads * c.head_dim, c.dim, bias, device, dtype, r, true),
                     w.linear(p + "attn_k", c.kv_heads * c.head_dim, c.dim, bias, device, dtype, r, true),
                     w.linear(p + "attn_v", c.kv_heads * c.head_dim, c.dim, bias, device, dtype, r, true)});
    l.o = w.linear(p + "attn_output", c.dim, c.heads * c.head_dim, false, device, dtype, k);
    l.ffn_norm = w.dense(p + "ffn_norm.weight", Shape({c.dim}), device, dtype);
    l.gate_up = w.group({w.linear(p + "ffn_gate", c.hidden, c.dim, false, device, dtype, r, true),
                         w.linear(p + "ffn_up", c.hidden, c.dim, false, device, dtype, r, true)});
    l.down = w.linear(p + "ffn_down", c.dim, c.hidden, false, device, dtype, k);
    m.layers_.push_back(std::move(l));
  }
  m.output_norm_ = w.dense("output_norm.weight", Shape({c.dim}), device, dtype);
  // Tied embeddings: no head of its own, the embedding serves.
  m.output_ = w.shape("output.weight") ? w.linear("output", c.vocab, c.dim, false, device, dtype, split ? rows : whole)
                                       : m.embedding_;

  m.inv_freq_ = c.inv_freq();
  // GGUF files carry Llama 3.1's scaling as one factor per rotated pair (rope_freqs.weight).
  if (w.shape("rope_freqs.weight")) {
    const std::vector<float> factors =
        w.dense("rope_freqs.weight", Shape({c.head_dim / 2}), Device::cpu(), DType::F32).to_vector<float>();
    for (size_t i = 0; i < factors.size(); ++i) {
      if (!std::isfinite(factors[i]) || factors[i] <= 0)
        w.fail("rope_freqs.weight",
               detail::str_cat("factor ", factors[i], " of pair ", i, " is not finite and positive"));
      m.inv_freq_[i] /= static_cast<double>(factors[i]);
    }
  }
  return m;
}

LlamaModel LlamaModel::from_gguf(const io::GgufFile& f, Device device, DType dtype, const dist::Communicator& comm,
                                 WeightMemory memory) {
  GgufWeights weights(f);
  return load(LlamaConfig::from_gguf(f), weights, device, dtype, comm, memory);
}

LlamaModel LlamaModel::open(const std::string& path, Device device, DType dtype, const dist::Communicator& comm,
                            WeightMemory memory) {
  std::error_code ec;  // a path that cannot be looked at is no directory: GgufFile::open names it
  if (std::filesystem::is_directory(path, ec)) return from_checkpoint(path, device, dtype, comm, memory);
  return from_gguf(io::GgufFile::open(path), device, dtype, comm, memory);
}

LlamaModel LlamaModel::from_checkpoint(const std::string& dir, Device device, DType dtype,
                                       const dist::Communicator& comm, WeightMemory memory) {
  const LlamaConfig config = LlamaConfig::from_json(dir + "/config.json");
  const io::SafetensorsCheckpoint checkpoint = io::SafetensorsCheckpoint::open(dir);
  CheckpointWeights weights(checkpoint);
  return load(config, weights, device, dtype, comm, memory);
}

LlamaModel LlamaModel::random(const LlamaConfig& c, Device device, DType dtype, std::optional<quant::QType> weights, uint64_t seed,
                              const dist::Communicator& comm) {
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16)
    throw DTypeError(detail::str_cat("llama: activations in ", dtype, " (f32, f16 or bf16)"));
  c.check("random");
  manual_seed(seed, device);
  manual_seed(seed, Device::cpu());
  LlamaModel m;
  m.config_ = c;
  m.device_ = device;
  m.dtype_ = dtype;
  m.split_over(comm, weights);
  // Every rank draws the whole weight, then keeps its part (dim 0: rows, 1: columns).
  auto linear = [&](int64_t out, int64_t in, bool bias, int dim) {
    Linear l;
    if (weights) {
      // 256 random rows quantized on the CPU, repeated: valid blocks at any size, made quickly.
      const int64_t rows = std::min<int64_t>(out, 256);
      const quant::QTensor block = quant::quantize(Tensor::rand_normal({rows, in}, 0.0, 0.02), *weights).to_device(device);
      std::vector<int64_t> rows_of(static_cast<size_t>(out));
      for (int64_t r = 0; r < out; ++r) rows_of[static_cast<size_t>(r)] = r % rows;
      const Tensor which = Tensor::from_vector(rows_of, {out}, device);
      l.quantized = quant::QTensor(*weights, out, in, block.bytes().index_select(which, 0));
    } else {
      l.dense = Tensor::rand_normal({out, in}, 0.0, 0.02, dtype, device);
    }
    if (bias) l.bias = Tensor::rand_normal({out}, 0.0, 0.02, dtype, device);
    return m.ranks_ > 1 ? l.slice(dim, m.rank_, m.ranks_) : l;
  };
  const bool bias = c.architecture == "qwen2";
  m.embedding_.dense = Tensor::rand_normal({c.vocab, c.dim}, 0.0, 1.0, dtype, device);
  if (m.ranks_ > 1) m.embedding_ = m.embedding_.slice(0, m.rank_, m.ranks_);
  for (int64_t i = 0; i < c.layers; ++i) {
    Layer l;
    l.attn_norm = Tensor::ones({c.dim}, dtype, device);
    l.ffn_norm = Tensor::ones({c.dim}, dtype, device);
    l.qkv = LinearGroup::of({linear(c.heads * c.head_dim, c.dim, bias, 0), linear(c.kv_heads * c.head_dim, c.dim, bias, 0),
                             linear(c.kv_heads * c.head_dim, c.dim, bias, 0)});
    l.o = linear(c.dim, c.heads * c.head_dim, false, 1);
    l.gate_up = LinearGroup::of({linear(c.hidden, c.dim, false, 0), linear(c.hidden, c.dim, false, 0)});
    l.down = linear(c.dim, c.hidden, false, 1);
    m.layers_.push_back(std::move(l));
  }
  m.output_norm_ = Tensor::ones({c.dim}, dtype, device);
  m.output_ = linear(c.vocab, c.dim, false, 0);
  m.inv_freq_ = c.inv_freq();
  return m;
}

int64_t LlamaModel::weight_bytes() const {
  int64_t n = output_.bytes() + output_norm_.numel() * dtype_size(output_norm_.dtype());
  for (const Layer& l : layers_) {
    n += (l.attn_norm.numel() + l.ffn_norm.numel()) * dtype_size(l.attn_norm.dtype());
    n += l.qkv.bytes() + l.o.bytes() + l.gate_up.bytes() + l.down.bytes();
  }
  return n;
}

// ---- forward ------------------------------------------------------------------------------------

std::vector<nn::KvCache> LlamaModel::make_cache(int64_t batch, int64_t capacity) const {
  std::vector<nn::KvCache> cache;
  for (int64_t i = 0; i < config_.layers; ++i) cache.emplace_back(batch, kv_heads_, capacity, config_.head_dim, dtype_, device_);
  return cache;
}

std::pair<Tensor, Tensor> LlamaModel::rope_tables(int64_t from, int64_t t) const {
  const auto half = static_cast<int64_t>(inv_freq_.size());
  std::vector<float> c(static_cast<size_t>(t * half)), s(c.size());
  for (int64_t p = 0; p < t; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(from + p) * inv_freq_[static_cast<size_t>(i)];
      c[static_cast<size_t>(p * half + i)] = static_cast<float>(std::cos(angle));
      s[static_cast<size_t>(p * half + i)] = static_cast<float>(std::sin(angle));
    }
  return {Tensor::from_vector(c, {t, half}, device_).to_dtype(dtype_), Tensor::from_vector(s, {t, half}, device_).to_dtype(dtype_)};
}

Tensor LlamaModel::reduce(const Tensor& x) const {
  if (ranks_ == 1) return x;
  Tensor y = x.contiguous();  // x is a product of this step's own: reduced where it lies
  comm_.all_reduce_(y);
  return y;
}

void LlamaModel::check_tokens(const Tensor& tokens, std::string_view op) const {
  if (tokens.dtype() != DType::I64 && tokens.dtype() != DType::U32 && tokens.dtype() != DType::I32)
    throw DTypeError(detail::str_cat("llama: ", op, ": token ids of ", tokens.dtype(), " (i64, u32 or i32)"));
  if (tokens.numel() == 0) return;
  const std::vector<int64_t> ids =
      tokens.to_device(Device::cpu()).to_dtype(DType::I64).reshape({tokens.numel()}).to_vector<int64_t>();
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= config_.vocab)
      throw IndexError(detail::str_cat("llama: ", op, ": token ", ids[i], " (at ", i, " of tokens ", tokens.shape(),
                                       ") is outside the vocabulary of ", config_.vocab));
}

Tensor LlamaModel::embed(const Tensor& tokens) const {
  // i64's and u32's maxima are the gathers' skip sentinel, which would give a token of zeros:
  // every id past the vocabulary becomes `vocab`, which the gather refuses (IndexError).
  Tensor ids = tokens.reshape({tokens.numel()}).to_dtype(DType::I64).minimum(config_.vocab);
  Tensor mine;  // split: 1 where this rank holds the token's row, else 0
  if (ranks_ > 1) {
    const int64_t rows = embedding_.out_features();
    const Tensor local = ids.to_dtype(DType::I64).sub(rows * rank_);
    mine = (local.ge(0) * local.lt(rows)).to_dtype(dtype_).unsqueeze(1);
    ids = local.clamp(0, rows - 1);
  }
  Tensor x;
  if (!embedding_.quantized.defined()) {
    x = embedding_.dense.index_select(ids, 0);
  } else {
    // The rows' blocks, gathered, then dequantized: only the rows the tokens use.
    const quant::QTensor& q = embedding_.quantized;
    const quant::QTensor rows(q.qtype(), tokens.numel(), q.cols(), q.bytes().index_select(ids, 0));
    x = quant::dequantize(rows, dtype_);
  }
  return ranks_ > 1 ? reduce(x * mine) : x;
}

Tensor LlamaModel::forward(const Tensor& tokens, std::vector<nn::KvCache>& cache, const Tensor& key_mask,
                           bool last_only) const {
  const LlamaConfig& c = config_;
  if (tokens.rank() != 2) throw ShapeError(detail::str_cat("llama: forward: tokens of shape ", tokens.shape(), ", not (batch, t)"));
  if (static_cast<int64_t>(cache.size()) != c.layers)
    throw ShapeError(detail::str_cat("llama: forward: ", cache.size(), " caches for ", c.layers, " layers"));
  const int64_t b = tokens.shape()[0], t = tokens.shape()[1];
  const int64_t from = cache[0].size();
  // Ids on the host are checked here; on a device, embed() turns an unknown one into an IndexError
  // of the gather at the next sync. A split model checks on the host either way: its ranks' gathers
  // would each read an unknown token as another rank's.
  if (tokens.device().is_cpu() || ranks_ > 1) check_tokens(tokens, "forward");
  for (const nn::KvCache& layer : cache)
    if (layer.size() != from) throw ShapeError("llama: forward: the caches do not hold one number of positions");
  if (t > cache[0].capacity() - from)
    throw ShapeError(detail::str_cat("llama: forward: cannot add ", t, " positions to caches holding ", from,
                                     " of their capacity ", cache[0].capacity()));
  const Tensor ids = tokens.to_device(device_);
  Tensor x = embed(ids).reshape({b, t, c.dim});
  // Named tensors, not a structured binding, which lambdas capture only from clang 16 on.
  const std::pair<Tensor, Tensor> tables = rope_tables(from, t);
  const Tensor& cos = tables.first;
  const Tensor& sin = tables.second;
  nn::AttentionOptions attention;
  attention.causal = true;
  attention.window = c.window;
  if (key_mask.defined()) {
    const int64_t t_kv = from + t;
    if (key_mask.shape() != Shape({b, t_kv}))
      throw ShapeError(detail::str_cat("llama: forward: key mask of shape ", key_mask.shape(), ", not ", Shape({b, t_kv})));
    attention.mask = key_mask.to_device(device_).to_dtype(dtype_).reshape({b, 1, 1, t_kv});
  }
  // A step of one position (a split model's decoding) goes through rope_write_at's one kernel;
  // longer ones turn q and k, then append: a strided copy into the cache.
  const Tensor at = t == 1 ? Tensor::from_vector(std::vector<int64_t>{from}, {1}, device_) : Tensor();
  auto turn = [&](const Tensor& y) { return c.interleaved_rope ? nn::rope_i(y, cos, sin) : nn::rope(y, cos, sin); };
  Tensor logits = run(
      x,
      [&](size_t i, const Tensor& q, const Tensor& k, const Tensor& v) -> nn::KvCache::Rotated {
        if (at.defined()) return cache[i].rope_write_at(q, k, v, cos, sin, c.interleaved_rope, at, from + 1);
        auto [keys, values] = cache[i].append(turn(k), v);
        return {turn(q), std::move(keys), std::move(values)};
      },
      attention, last_only);
  if (at.defined())
    for (nn::KvCache& layer : cache) layer.set_size(from + 1);
  return logits;
}

Tensor LlamaModel::run(Tensor x, const KvWrite& kv, const nn::AttentionOptions& attention, bool last_only) const {
  const LlamaConfig& c = config_;
  const int64_t b = x.shape()[0], t = x.shape()[1];
  // (b, t, heads * head_dim) -> (b, heads, t, head_dim).
  auto heads = [&](const Tensor& y, int64_t n) { return y.reshape({b, t, n, c.head_dim}).transpose(1, 2); };
  // Each residual add is fused with the norm after it: the feed-forward's, the next layer's
  // attention's, and after the last layer the output's.
  Tensor normed = nn::rms_norm(x, layers_.front().attn_norm, c.rms_eps);
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = layers_[i];
    Tensor q, k, v;
    if (l.qkv.weights.size() == 1) {
      // One product of stacked q, k and v, seen as the three.
      const Tensor y = l.qkv.weights.front()(normed);
      q = heads(y.narrow(-1, 0, heads_ * c.head_dim), heads_);
      k = heads(y.narrow(-1, heads_ * c.head_dim, kv_heads_ * c.head_dim), kv_heads_);
      v = heads(y.narrow(-1, (heads_ + kv_heads_) * c.head_dim, kv_heads_ * c.head_dim), kv_heads_);
    } else {
      const std::vector<Tensor> qkv = l.qkv(normed);
      q = heads(qkv[0], heads_);
      k = heads(qkv[1], kv_heads_);
      v = heads(qkv[2], kv_heads_);
    }
    const nn::KvCache::Rotated r = kv(i, q, k, v);
    const Tensor a = nn::scaled_dot_product_attention(r.q, r.keys, r.values, attention);
    nn::AddRmsNorm added = nn::add_rms_norm(
        x, reduce(l.o(a.transpose(1, 2).contiguous().reshape({b, t, heads_ * c.head_dim}))), l.ffn_norm, c.rms_eps);
    const std::vector<Tensor> gate_up = l.gate_up(added.normed);
    Tensor y = reduce(l.down(nn::silu_mul(gate_up[0], gate_up[1])));
    x = std::move(added.sum);
    const bool last = i + 1 == layers_.size();
    if (last && last_only) {
      x = x.narrow(1, t - 1, 1);
      y = y.narrow(1, t - 1, 1);
    }
    added = nn::add_rms_norm(x, y, last ? output_norm_ : layers_[i + 1].attn_norm, c.rms_eps);
    x = std::move(added.sum);
    normed = std::move(added.normed);
  }
  const Tensor logits = output_(normed);
  return (ranks_ > 1 ? comm_.all_gather(logits, 2) : logits).to_dtype(DType::F32);
}

// ---- decode steps as a graph --------------------------------------------------------------------

DecodeGraph::DecodeGraph(const LlamaModel& model, std::vector<nn::KvCache>& cache) : model_(model), cache_(cache) {
  const LlamaConfig& c = model.config_;
  if (static_cast<int64_t>(cache.size()) != c.layers)
    throw ShapeError(detail::str_cat("llama: DecodeGraph: ", cache.size(), " caches for ", c.layers, " layers"));
  if (model.ranks_ > 1) return;  // forward()'s path
  batch_ = cache[0].keys().shape()[0];
  capacity_ = cache[0].capacity();
  const Device d = model.device_;
  inputs_ = Tensor::zeros({batch_ + 1}, DType::I64, d);
  mask_ = Tensor::zeros({batch_, capacity_}, model.dtype_, d);
  const std::pair<Tensor, Tensor> tables = model.rope_tables(0, capacity_);
  cos_ = tables.first;
  sin_ = tables.second;
  logits_ = Tensor::zeros({batch_, 1, c.vocab}, DType::F32, d);
}

void DecodeGraph::run_step(int64_t length) {
  const LlamaModel& m = model_;
  const Tensor ids = inputs_.narrow(0, 0, batch_).reshape({batch_, 1});
  const Tensor at = inputs_.narrow(0, batch_, 1);
  nn::AttentionOptions attention;  // t_q = 1: the mask alone hides keys, the window's too
  attention.causal = true;
  attention.mask = mask_.narrow(1, 0, length).unsqueeze(1).unsqueeze(1);
  const Tensor x = m.embed(ids).reshape({batch_, 1, m.config_.dim});
  const Tensor cos = cos_.index_select(at, 0), sin = sin_.index_select(at, 0);
  const bool interleaved = m.config_.interleaved_rope;
  logits_.copy_from(m.run(
      x,
      [&](size_t i, const Tensor& q, const Tensor& k, const Tensor& v) {
        return cache_[i].rope_write_at(q, k, v, cos, sin, interleaved, at, length);
      },
      attention, true));
}

Tensor DecodeGraph::step(const Tensor& tokens, const Tensor& key_mask) {
  const LlamaModel& m = model_;
  if (m.ranks_ > 1) return m.forward(tokens, cache_, key_mask, true);
  const int64_t pos = cache_[0].size();
  // (A cache of another batch is refused by write_at, which checks k against it.)
  for (const nn::KvCache& c : cache_)
    if (c.size() != pos || c.capacity() != capacity_)
      throw ShapeError("llama: DecodeGraph::step: the caches changed shape or no longer hold one number of positions");
  if (tokens.shape() != Shape({batch_, 1}))
    throw ShapeError(detail::str_cat("llama: DecodeGraph::step: tokens of shape ", tokens.shape(), ", not ", Shape({batch_, 1})));
  if (tokens.device().is_cpu()) m.check_tokens(tokens, "DecodeGraph::step");
  if (pos >= capacity_)
    throw ShapeError(detail::str_cat("llama: DecodeGraph::step: the caches are full (", capacity_, " positions)"));
  if (key_mask.defined() && key_mask.shape() != Shape({batch_, pos + 1}))
    throw ShapeError(detail::str_cat("llama: DecodeGraph::step: key mask of shape ", key_mask.shape(), ", not ",
                                     Shape({batch_, pos + 1})));
  // The inputs: ids and position in one copy from the host where the ids are there.
  if (tokens.device().is_cpu()) {
    std::vector<int64_t> in = tokens.to_dtype(DType::I64).reshape({batch_}).to_vector<int64_t>();
    in.push_back(pos);
    inputs_.copy_from(Tensor::from_vector(in, {batch_ + 1}, m.device_));
  } else {
    inputs_.narrow(0, 0, batch_).copy_from(tokens.to_device(m.device_).to_dtype(DType::I64).reshape({batch_}));
    inputs_.narrow(0, batch_, 1).copy_from(Tensor::from_vector(std::vector<int64_t>{pos}, {1}, m.device_));
  }
  // The span's mask: the key mask (or 0) up to the position, -inf past it, and before the window.
  const int64_t length = std::min(capacity_, (pos / kSpan + 1) * kSpan);
  const double hidden = -std::numeric_limits<double>::infinity();
  if (key_mask.defined())
    mask_.narrow(1, 0, pos + 1).copy_from(key_mask.to_device(m.device_).to_dtype(m.dtype_));
  else
    mask_.narrow(1, 0, pos + 1).zero();
  if (length > pos + 1) mask_.narrow(1, pos + 1, length - pos - 1).fill(hidden);
  if (const int64_t w = m.config_.window; w > 0 && pos >= w) mask_.narrow(1, 0, pos - w + 1).fill(hidden);

  if (!graph_.defined() || length != length_) {
    graph_ = Graph();  // the last span's recording and its memory go first
    run_step(length);  // this step, run: it also makes what the ops make on first use
    if (recording_error_.empty()) {
      try {
        graph_ = Graph::record(m.device_, [this, length] { run_step(length); });
        length_ = length;
      } catch (const Error& e) {
        recording_error_ = e.what();  // from now on every step runs op by op
      }
    }
  } else {
    graph_.replay();
  }
  for (nn::KvCache& c : cache_) c.set_size(pos + 1);
  return logits_;
}

}  // namespace wick::models
