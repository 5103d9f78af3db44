// The Llama-family decoder of include/wick/models/llama.h, configured and loaded from GGUF files
// with llama.cpp's tensor names (token_embd, blk.N.attn_q, ..., output_norm, output).
#include "wick/models/llama.h"

#include <algorithm>
#include <cmath>

namespace wick::models {

namespace {

[[noreturn]] void fail(const io::GgufFile& f, std::string_view field, std::string_view what) {
  throw io::FormatError(detail::str_cat("llama: ", f.name(), ": ", field, ": ", what));
}

int64_t positive(const io::GgufFile& f, const std::string& key, std::optional<int64_t> fallback = std::nullopt) {
  const io::GgufValue* v = f.find(key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    fail(f, key, "missing");
  }
  const int64_t n = v->as_int(key);
  if (n <= 0 || n > (int64_t{1} << 40)) fail(f, key, detail::str_cat(n, " is not a positive size"));
  return n;
}

double number(const io::GgufFile& f, const std::string& key, double fallback) {
  const io::GgufValue* v = f.find(key);
  if (v == nullptr) return fallback;
  const double x = v->as_float(key);
  if (!std::isfinite(x) || x <= 0) fail(f, key, detail::str_cat(x, " is not finite and positive"));
  return x;
}

}  // namespace

LlamaConfig LlamaConfig::from_gguf(const io::GgufFile& f) {
  LlamaConfig c;
  const io::GgufValue* arch = f.find("general.architecture");
  if (arch == nullptr) fail(f, "general.architecture", "missing");
  c.architecture = arch->as_string("general.architecture");
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
  c.head_dim = positive(f, a + "attention.key_length", c.dim / c.heads);
  if (c.heads % c.kv_heads != 0)
    fail(f, a + "attention.head_count_kv", detail::str_cat(c.kv_heads, " does not divide the ", c.heads, " heads"));
  if (c.head_dim % 2 != 0) fail(f, a + "attention.key_length", detail::str_cat("head size ", c.head_dim, " is odd"));
  if (const int64_t rot = positive(f, a + "rope.dimension_count", c.head_dim); rot != c.head_dim)
    throw NotSupportedError(detail::str_cat("llama: ", f.name(), ": rope over ", rot, " of ", c.head_dim,
                                            " features per head (wick rotates whole heads)"));
  c.rms_eps = number(f, a + "attention.layer_norm_rms_epsilon", 1e-5);
  c.rope_theta = number(f, a + "rope.freq_base", 10000);
  if (const io::GgufValue* w = f.find(a + "attention.sliding_window")) c.window = w->as_int(a + "attention.sliding_window");
  c.interleaved_rope = c.architecture == "llama";
  if (const io::GgufValue* tokens = f.find("tokenizer.ggml.tokens")) c.vocab = static_cast<int64_t>(tokens->as_array().items.size());
  c.vocab = positive(f, a + "vocab_size", c.vocab > 0 ? std::optional<int64_t>(c.vocab) : std::nullopt);
  return c;
}

LlamaConfig LlamaConfig::preset(std::string_view name) {
  LlamaConfig c;
  c.architecture = "llama";
  c.interleaved_rope = true;
  if (name == "llama3-8b") {
    c.vocab = 128256, c.dim = 4096, c.hidden = 14336, c.layers = 32, c.heads = 32, c.kv_heads = 8, c.head_dim = 128;
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
    throw Error(detail::str_cat("llama: no preset \"", name, "\" (llama3-8b, llama3-1b, llama2-7b, qwen2-7b)"));
  }
  return c;
}

int64_t LlamaConfig::parameters() const {
  const int64_t attention = dim * heads * head_dim * 2 + dim * kv_heads * head_dim * 2;
  return 2 * vocab * dim + layers * (attention + 3 * dim * hidden + 2 * dim) + dim;
}

// ---- weights ------------------------------------------------------------------------------------

Tensor Linear::operator()(const Tensor& x) const {
  Tensor y = quantized.defined() ? quant::qmatmul(x, quantized) : x.matmul(dense.t());
  return bias.defined() ? y + bias : y;
}

int64_t Linear::out_features() const { return quantized.defined() ? quantized.rows() : dense.shape()[0]; }
int64_t Linear::in_features() const { return quantized.defined() ? quantized.cols() : dense.shape()[1]; }
int64_t Linear::bytes() const {
  const int64_t b = bias.defined() ? bias.numel() * dtype_size(bias.dtype()) : 0;
  return b + (quantized.defined() ? quantized.nbytes() : dense.numel() * dtype_size(dense.dtype()));
}

namespace {

// Reads weights of a GGUF file onto a device, checking each one's shape.
struct Loader {
  const io::GgufFile& f;
  Device device;
  DType dtype;

  const io::GgufTensor& find(const std::string& name) const {
    const io::GgufTensor* t = f.find_tensor(name);
    if (t == nullptr) fail(f, name, "missing");
    return *t;
  }
  void expect(const io::GgufTensor& t, const Shape& shape) const {
    if (t.shape != shape) fail(f, t.name, detail::str_cat("shape ", t.shape, ", not ", shape));
  }
  Tensor dense(const std::string& name, const Shape& shape) const {
    const io::GgufTensor& t = find(name);
    expect(t, shape);
    if (!t.dtype) fail(f, name, detail::str_cat("a ", quant::qtype_name(*t.qtype), " tensor where a dense one is needed"));
    return f.tensor(t, device).to_dtype(dtype);
  }
  Linear linear(const std::string& name, int64_t out, int64_t in, bool bias = false) const {
    const io::GgufTensor& t = find(name + ".weight");
    expect(t, Shape({out, in}));
    Linear l;
    if (t.qtype)
      l.quantized = f.qtensor(t, device);
    else
      l.dense = f.tensor(t, device).to_dtype(dtype);
    if (bias) l.bias = dense(name + ".bias", Shape({out}));
    return l;
  }
};

}  // namespace

LlamaModel LlamaModel::from_gguf(const io::GgufFile& f, Device device, DType dtype) {
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16)
    throw DTypeError(detail::str_cat("llama: activations in ", dtype, " (f32, f16 or bf16)"));
  LlamaModel m;
  m.config_ = LlamaConfig::from_gguf(f);
  m.device_ = device;
  m.dtype_ = dtype;
  const LlamaConfig& c = m.config_;
  const Loader load{f, device, dtype};
  const bool bias = c.architecture == "qwen2";
  m.embedding_ = load.linear("token_embd", c.vocab, c.dim);
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = detail::str_cat("blk.", i, ".");
    Layer l;
    l.attn_norm = load.dense(p + "attn_norm.weight", Shape({c.dim}));
    l.q = load.linear(p + "attn_q", c.heads * c.head_dim, c.dim, bias);
    l.k = load.linear(p + "attn_k", c.kv_heads * c.head_dim, c.dim, bias);
    l.v = load.linear(p + "attn_v", c.kv_heads * c.head_dim, c.dim, bias);
    l.o = load.linear(p + "attn_output", c.dim, c.heads * c.head_dim);
    l.ffn_norm = load.dense(p + "ffn_norm.weight", Shape({c.dim}));
    l.gate = load.linear(p + "ffn_gate", c.hidden, c.dim);
    l.up = load.linear(p + "ffn_up", c.hidden, c.dim);
    l.down = load.linear(p + "ffn_down", c.dim, c.hidden);
    m.layers_.push_back(std::move(l));
  }
  m.output_norm_ = load.dense("output_norm.weight", Shape({c.dim}));
  // Tied embeddings: no output.weight, the embedding serves as the head.
  m.output_ = f.find_tensor("output.weight") != nullptr ? load.linear("output", c.vocab, c.dim) : m.embedding_;

  // Llama 3.1's frequency scaling comes as one factor per rotated pair (rope_freqs.weight).
  std::vector<float> factors(static_cast<size_t>(c.head_dim / 2), 1.f);
  if (const io::GgufTensor* r = f.find_tensor("rope_freqs.weight")) {
    load.expect(*r, Shape({c.head_dim / 2}));
    factors = f.tensor(*r).to_dtype(DType::F32).to_vector<float>();
  }
  for (int64_t i = 0; i < c.head_dim / 2; ++i)
    m.inv_freq_.push_back(std::pow(c.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(c.head_dim)) /
                          static_cast<double>(factors[static_cast<size_t>(i)]));
  return m;
}

LlamaModel LlamaModel::random(const LlamaConfig& c, Device device, DType dtype, std::optional<quant::QType> weights, uint64_t seed) {
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16)
    throw DTypeError(detail::str_cat("llama: activations in ", dtype, " (f32, f16 or bf16)"));
  manual_seed(seed, device);
  manual_seed(seed, Device::cpu());
  LlamaModel m;
  m.config_ = c;
  m.device_ = device;
  m.dtype_ = dtype;
  auto linear = [&](int64_t out, int64_t in, bool bias) {
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
    return l;
  };
  const bool bias = c.architecture == "qwen2";
  m.embedding_.dense = Tensor::rand_normal({c.vocab, c.dim}, 0.0, 1.0, dtype, device);
  for (int64_t i = 0; i < c.layers; ++i) {
    Layer l;
    l.attn_norm = Tensor::ones({c.dim}, dtype, device);
    l.ffn_norm = Tensor::ones({c.dim}, dtype, device);
    l.q = linear(c.heads * c.head_dim, c.dim, bias);
    l.k = linear(c.kv_heads * c.head_dim, c.dim, bias);
    l.v = linear(c.kv_heads * c.head_dim, c.dim, bias);
    l.o = linear(c.dim, c.heads * c.head_dim, false);
    l.gate = linear(c.hidden, c.dim, false);
    l.up = linear(c.hidden, c.dim, false);
    l.down = linear(c.dim, c.hidden, false);
    m.layers_.push_back(std::move(l));
  }
  m.output_norm_ = Tensor::ones({c.dim}, dtype, device);
  m.output_ = linear(c.vocab, c.dim, false);
  for (int64_t i = 0; i < c.head_dim / 2; ++i)
    m.inv_freq_.push_back(std::pow(c.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(c.head_dim)));
  return m;
}

int64_t LlamaModel::weight_bytes() const {
  int64_t n = output_.bytes() + output_norm_.numel() * dtype_size(output_norm_.dtype());
  for (const Layer& l : layers_) {
    n += (l.attn_norm.numel() + l.ffn_norm.numel()) * dtype_size(l.attn_norm.dtype());
    for (const Linear* w : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) n += w->bytes();
  }
  return n;
}

// ---- forward ------------------------------------------------------------------------------------

std::vector<nn::KvCache> LlamaModel::make_cache(int64_t batch, int64_t capacity) const {
  std::vector<nn::KvCache> cache;
  for (int64_t i = 0; i < config_.layers; ++i) cache.emplace_back(batch, config_.kv_heads, capacity, config_.head_dim, dtype_, device_);
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

Tensor LlamaModel::embed(const Tensor& tokens) const {
  const Tensor ids = tokens.reshape({tokens.numel()});
  if (!embedding_.quantized.defined()) return embedding_.dense.index_select(ids, 0);
  // The rows' blocks, gathered, then dequantized: only the rows the tokens use.
  const quant::QTensor& q = embedding_.quantized;
  const quant::QTensor rows(q.qtype(), tokens.numel(), q.cols(), q.bytes().index_select(ids, 0));
  return quant::dequantize(rows, dtype_);
}

Tensor LlamaModel::forward(const Tensor& tokens, std::vector<nn::KvCache>& cache, const Tensor& key_mask,
                           bool last_only) const {
  const LlamaConfig& c = config_;
  if (tokens.rank() != 2) throw ShapeError(detail::str_cat("llama: forward: tokens of shape ", tokens.shape(), ", not (batch, t)"));
  if (static_cast<int64_t>(cache.size()) != c.layers)
    throw ShapeError(detail::str_cat("llama: forward: ", cache.size(), " caches for ", c.layers, " layers"));
  const int64_t b = tokens.shape()[0], t = tokens.shape()[1];
  const int64_t from = cache[0].size();
  const Tensor ids = tokens.to_device(device_);
  Tensor x = embed(ids).reshape({b, t, c.dim});
  const auto [cos, sin] = rope_tables(from, t);
  nn::AttentionOptions attention;
  attention.causal = true;
  attention.window = c.window;
  if (key_mask.defined()) {
    const int64_t t_kv = from + t;
    if (key_mask.shape() != Shape({b, t_kv}))
      throw ShapeError(detail::str_cat("llama: forward: key mask of shape ", key_mask.shape(), ", not ", Shape({b, t_kv})));
    attention.mask = key_mask.to_device(device_).to_dtype(dtype_).reshape({b, 1, 1, t_kv});
  }
  // (b, t, heads * head_dim) -> (b, heads, t, head_dim), rotated.
  auto heads = [&](const Tensor& y, int64_t n, bool rotate) {
    const Tensor h = y.reshape({b, t, n, c.head_dim}).transpose(1, 2);
    if (!rotate) return h;
    return c.interleaved_rope ? nn::rope_i(h, cos, sin) : nn::rope(h, cos, sin);
  };
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = layers_[i];
    const Tensor h = nn::rms_norm(x, l.attn_norm, c.rms_eps);
    const Tensor q = heads(l.q(h), c.heads, true);
    const auto [keys, values] = cache[i].append(heads(l.k(h), c.kv_heads, true), heads(l.v(h), c.kv_heads, false));
    const Tensor a = nn::scaled_dot_product_attention(q, keys, values, attention);
    x = x + l.o(a.transpose(1, 2).contiguous().reshape({b, t, c.heads * c.head_dim}));
    const Tensor g = nn::rms_norm(x, l.ffn_norm, c.rms_eps);
    x = x + l.down(l.gate(g).silu() * l.up(g));
  }
  if (last_only) x = x.narrow(1, t - 1, 1);
  return output_(nn::rms_norm(x, output_norm_, c.rms_eps)).to_dtype(DType::F32);
}

}  // namespace wick::models
