// Fuzzes the Llama-family loaders (include/wick/models/llama.h), which read a model's shape and
// weights from untrusted files. The fuzzer's bytes make a GGUF file: the llama.* (or qwen2.*)
// metadata, each value the one a small model of the chosen shape needs, an edge number, another
// type or none; and the weights of that shape, each of the right shape, one dim off, of another
// dtype (f16, Q8_0 where the rows are whole blocks) or missing; sometimes a mixture of experts in
// place of the MLPs (the counts and the stacked experts' weights likewise). When the first byte says so they
// make the text of a config.json instead, or the fields of a LlamaConfig given to check() and
// parameters() (which must not overflow). Loading must succeed or raise a wick::Error. A model that
// loads runs a forward pass over a few tokens (some outside the vocabulary, the index ops' skip
// sentinels among them): logits of shape (1, t, vocab), or an IndexError where a token lies outside.
#include <cmath>
#include <optional>

#include "fuzz_input.h"
#include "wick/io.h"
#include "wick/models/llama.h"
#include "wick/quant.h"

namespace wick::fuzz {
namespace {

using models::LlamaConfig;
using models::LlamaModel;

// The shape of the model the weights are made for (the metadata may say otherwise).
struct Dims {
  int64_t dim, hidden, layers, heads, kv_heads, head_dim, vocab;
};

Dims dims(Bytes& in) {
  static constexpr int64_t kDim[] = {8, 16, 32}, kHeads[] = {1, 2, 4};
  Dims d;
  d.dim = kDim[in.byte() % 3];
  d.heads = kHeads[in.byte() % 3];
  d.kv_heads = in.byte() % 2 == 0 ? d.heads : 1;
  d.head_dim = d.dim / d.heads;
  d.hidden = kDim[in.byte() % 3];
  d.layers = 1 + in.byte() % 2;
  d.vocab = 4 + in.byte() % 12;
  return d;
}

// A size entry: usually `want`, sometimes an edge number, another type or none.
void size_entry(io::GgufWriter& w, Bytes& in, const std::string& key, int64_t want) {
  const uint8_t sel = in.byte();
  if (sel < 200)
    w.set(key, io::GgufValue::u32(static_cast<uint32_t>(want)));
  else if (sel < 230)
    w.set(key, io::GgufValue::i64(in.number()));
  else if (sel < 240)
    w.set(key, io::GgufValue::string("8"));
  else if (sel < 248)
    w.set(key, io::GgufValue::f32(static_cast<float>(want)));
  // else: none
}

// A float entry (epsilon, rope base): usually sensible, sometimes zero, negative, NaN or none.
void float_entry(io::GgufWriter& w, Bytes& in, const std::string& key, float want) {
  static constexpr float kOdd[] = {0.f, -1.f, NAN, INFINITY, 1e30f, 1e-30f};
  const uint8_t sel = in.byte();
  if (sel < 200)
    w.set(key, io::GgufValue::f32(want));
  else if (sel < 240)
    w.set(key, io::GgufValue::f32(kOdd[sel % std::size(kOdd)]));
  else if (sel < 248)
    w.set(key, io::GgufValue::u32(3));
}

// The weight `name` of shape (rows, cols) or (rows) where cols is 0: as asked, one dim off,
// another dtype, or missing.
void weight(io::GgufWriter& w, Bytes& in, const std::string& name, int64_t rows, int64_t cols) {
  const uint8_t sel = in.byte();
  if (sel >= 250) return;  // missing
  if (sel >= 242) (sel % 2 == 0 || cols == 0 ? rows : cols) += 1;
  const Shape shape = cols == 0 ? Shape({rows}) : Shape({rows, cols});
  const Tensor t = Tensor::rand_normal(shape, 0.0, 0.5);
  const uint8_t kind = in.byte();
  if (kind < 24 && cols != 0 && cols % 32 == 0)
    w.add(name, quant::quantize(t, quant::QType::Q8_0));
  else if (kind >= 250)
    w.add(name, (t * 8.f).to_dtype(DType::I32));  // no weight of a model: refused
  else if (kind < 48)
    w.add(name, t.to_dtype(DType::F16));
  else
    w.add(name, t);
}

// Experts stacked as (experts, rows, cols): as asked, one dim off, Q8_0 where the rows are whole
// blocks, or missing.
void stacked(io::GgufWriter& w, Bytes& in, const std::string& name, int64_t experts, int64_t rows, int64_t cols) {
  const uint8_t sel = in.byte();
  if (sel >= 250) return;  // missing
  if (sel >= 242) (sel % 2 == 0 ? experts : cols) += 1;
  const Tensor t = Tensor::rand_normal({experts, rows, cols}, 0.0, 0.5);
  if (in.byte() < 32 && cols % 32 == 0)
    w.add(name, quant::quantize(t.reshape({experts * rows, cols}), quant::QType::Q8_0), t.shape());
  else
    w.add(name, t);
}

std::vector<uint8_t> gguf_model(Bytes& in) {
  const Dims d = dims(in);
  const uint8_t arch_sel = in.byte();
  const std::string arch = arch_sel < 120   ? "llama"
                           : arch_sel < 200 ? "qwen2"
                           : arch_sel < 220 ? "gemma2"
                           : arch_sel < 240 ? "gemma3"
                                            : "gpt2";
  const bool gemma = arch.starts_with("gemma");
  const std::string a = arch + ".";
  io::GgufWriter w;
  if (in.byte() < 250) w.set("general.architecture", io::GgufValue::string(arch));
  size_entry(w, in, a + "embedding_length", d.dim);
  size_entry(w, in, a + "feed_forward_length", d.hidden);
  size_entry(w, in, a + "block_count", d.layers);
  size_entry(w, in, a + "attention.head_count", d.heads);
  size_entry(w, in, a + "attention.head_count_kv", d.kv_heads);
  size_entry(w, in, a + "context_length", 16);
  size_entry(w, in, a + "attention.key_length", d.head_dim);
  size_entry(w, in, a + "rope.dimension_count", d.head_dim);
  size_entry(w, in, a + "vocab_size", d.vocab);
  float_entry(w, in, a + "attention.layer_norm_rms_epsilon", 1e-5f);
  float_entry(w, in, a + "rope.freq_base", 10000.f);
  if (const uint8_t s = in.byte(); s >= 240) w.set(a + "attention.sliding_window", io::GgufValue::i64(in.number()));
  // Gemma's: a window and its pattern (a period or a flag per layer, as asked or odd), the local
  // rope base, the caps.
  if (gemma) {
    size_entry(w, in, a + "attention.sliding_window", 1 + in.byte() % 4);
    if (const uint8_t p = in.byte(); p >= 128) {
      if (p < 192) {
        size_entry(w, in, a + "attention.sliding_window_pattern", 1 + in.byte() % 4);
      } else {
        io::GgufArray flags;
        flags.type = io::GgufType::Bool;
        const int64_t n = in.byte() < 200 ? d.layers : in.byte() % 5;
        for (int64_t i = 0; i < n; ++i) flags.items.push_back(io::GgufValue::boolean(in.byte() % 2 == 0));
        w.set(a + "attention.sliding_window_pattern", io::GgufValue::array(flags));
      }
    }
    float_entry(w, in, a + "rope.freq_base_swa", 10000.f);
    float_entry(w, in, a + "attn_logit_softcapping", 50.f);
    float_entry(w, in, a + "final_logit_softcapping", 30.f);
  }

  const bool bias = arch == "qwen2";
  weight(w, in, "token_embd.weight", d.vocab, d.dim);
  for (int64_t i = 0; i < d.layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    weight(w, in, p + "attn_norm.weight", d.dim, 0);
    weight(w, in, p + "attn_q.weight", d.heads * d.head_dim, d.dim);
    weight(w, in, p + "attn_k.weight", d.kv_heads * d.head_dim, d.dim);
    weight(w, in, p + "attn_v.weight", d.kv_heads * d.head_dim, d.dim);
    if (bias) {
      weight(w, in, p + "attn_q.bias", d.heads * d.head_dim, 0);
      weight(w, in, p + "attn_k.bias", d.kv_heads * d.head_dim, 0);
      weight(w, in, p + "attn_v.bias", d.kv_heads * d.head_dim, 0);
    }
    if (arch == "gemma3") {
      weight(w, in, p + "attn_q_norm.weight", d.head_dim, 0);
      weight(w, in, p + "attn_k_norm.weight", d.head_dim, 0);
    }
    weight(w, in, p + "attn_output.weight", d.dim, d.heads * d.head_dim);
    if (gemma) weight(w, in, p + "post_attention_norm.weight", d.dim, 0);
    weight(w, in, p + "ffn_norm.weight", d.dim, 0);
    weight(w, in, p + "ffn_gate.weight", d.hidden, d.dim);
    weight(w, in, p + "ffn_up.weight", d.hidden, d.dim);
    weight(w, in, p + "ffn_down.weight", d.dim, d.hidden);
    if (gemma) weight(w, in, p + "post_ffw_norm.weight", d.dim, 0);
  }
  weight(w, in, "output_norm.weight", d.dim, 0);
  if (in.byte() % 2 == 0) weight(w, in, "output.weight", d.vocab, d.dim);  // else tied
  if (const uint8_t r = in.byte(); r >= 224) {
    if (r < 240) {
      weight(w, in, "rope_freqs.weight", d.head_dim / 2, 0);
    } else {  // factors of 0, NaN, inf or negative: refused
      static constexpr float kOdd[] = {0.f, NAN, INFINITY, -1.f};
      std::vector<float> f(static_cast<size_t>(d.head_dim / 2), 1.f);
      f[in.byte() % f.size()] = kOdd[r % std::size(kOdd)];
      w.add("rope_freqs.weight", Tensor::from_vector(f, {d.head_dim / 2}));
    }
  }
  // A mixture of experts in place of the MLPs (Mixtral's layout): counts as asked or odd (more
  // per token than there are experts among them), the router and the stacked experts' weights.
  if (const uint8_t m = in.byte(); m >= 192) {
    const int64_t experts = 1 + in.byte() % 4, used = 1 + in.byte() % 4;
    size_entry(w, in, a + "expert_count", experts);
    size_entry(w, in, a + "expert_used_count", used);
    for (int64_t i = 0; i < d.layers; ++i) {
      const std::string p = "blk." + std::to_string(i) + ".";
      weight(w, in, p + "ffn_gate_inp.weight", experts, d.dim);
      stacked(w, in, p + "ffn_gate_exps.weight", experts, d.hidden, d.dim);
      stacked(w, in, p + "ffn_up_exps.weight", experts, d.hidden, d.dim);
      stacked(w, in, p + "ffn_down_exps.weight", experts, d.dim, d.hidden);
    }
  }
  return w.bytes();
}

// A config.json of the bytes up to a zero byte.
void json_config(Bytes& in) {
  const std::filesystem::path file = scratch_file("config.json", in.until_zero());
  step([&] {
    const LlamaConfig c = LlamaConfig::from_json(file.string());
    require(c.dim > 0 && c.heads > 0 && c.kv_heads > 0 && c.head_dim > 0 && c.layers > 0 && c.vocab > 0,
            "config.json accepted with a size that is not positive");
    require(c.heads % c.kv_heads == 0, "config.json accepted with KV heads that do not divide the heads");
  });
}

// A LlamaConfig of any numbers: check() accepts it or raises a wick::Error, and what it accepts
// has positive sizes and finite rotation rates; parameters() never overflows (UBSan checks).
void config_fields(Bytes& in) {
  LlamaConfig c;
  c.architecture = in.byte() % 8 == 0 ? "gpt2" : "llama";
  for (int64_t* n : {&c.vocab, &c.dim, &c.hidden, &c.layers, &c.heads, &c.kv_heads, &c.head_dim, &c.context, &c.window})
    *n = in.byte() < 128 ? 1 + in.byte() % 64 : in.number();
  auto real = [&](double fallback) {
    static constexpr double kOdd[] = {0.0, -1.0, NAN, INFINITY, 1e300, 1e-300, 1.0};
    const uint8_t sel = in.byte();
    return sel < 160 ? fallback : kOdd[sel % std::size(kOdd)];
  };
  c.rms_eps = real(1e-5);
  c.rope_theta = real(10000);
  c.rope_scaling.factor = real(0);
  c.rope_scaling.low_freq_factor = real(1);
  c.rope_scaling.high_freq_factor = real(4);
  c.rope_scaling.original_context = in.byte() < 200 ? 8192 : in.number();
  // Gemma's fields: each layer's window (as many as the layers, or not), the local base, the caps.
  if (in.byte() >= 160) {
    const int64_t n = in.byte() < 200 ? std::min<int64_t>(c.layers, 64) : in.byte() % 8;
    for (int64_t i = 0; i < n; ++i)
      c.layer_windows.push_back(in.byte() < 240 ? in.byte() % 8 : std::min<int64_t>(in.number(), -1));  // refused
    c.rope_local_theta = real(10000);
    c.rope_linear = real(1);
    c.attention_scale = real(0.1);
    c.attn_softcap = real(50);
    c.final_softcap = real(30);
    c.norm_offset = real(1);
  }
  (void)c.parameters();
  step([&] {
    c.check("fuzz");
    require(c.vocab > 0 && c.dim > 0 && c.layers > 0 && c.head_dim > 0 && c.head_dim % 2 == 0, "a size accepted");
    for (const double f : c.inv_freq()) require(std::isfinite(f) && f > 0, "a rotation rate accepted");
    for (const double f : c.inv_freq_local()) require(std::isfinite(f) && f > 0, "a local rotation rate accepted");
    require(c.layer_windows.empty() || static_cast<int64_t>(c.layer_windows.size()) == c.layers,
            "windows for another count of layers accepted");
  });
}

void run(const uint8_t* data, size_t size) {
  Bytes in(data, size);
  const uint8_t mode = in.byte() % 8;
  if (mode == 3 || mode == 7) {
    json_config(in);
    return;
  }
  if (mode == 5) {
    config_fields(in);
    return;
  }
  manual_seed(7);
  const std::vector<uint8_t> bytes = gguf_model(in);
  std::optional<LlamaModel> model;
  step([&] { model = LlamaModel::from_gguf(io::GgufFile::parse(bytes, "fuzz.gguf")); });
  if (!model) return;
  const LlamaConfig& c = model->config();
  const int64_t t = 1 + in.byte() % 3;
  std::vector<int64_t> ids(static_cast<size_t>(t));
  bool outside = false;
  for (int64_t& id : ids) {
    id = in.byte() < 240 ? in.byte() % (c.vocab + 2) : in.number();  // now and then outside the vocabulary
    outside = outside || id < 0 || id >= c.vocab;
  }
  step([&] {
    std::vector<nn::KvCache> cache = model->make_cache(1, 4);
    const Tensor logits = model->forward(Tensor::from_vector(ids, {1, t}), cache);
    require(!outside, "logits for a token outside the vocabulary");
    require(logits.shape() == Shape({1, t, c.vocab}) && logits.dtype() == DType::F32, "logits of the wrong shape");
  });
}

}  // namespace
}  // namespace wick::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  wick::fuzz::run(data, size);
  return 0;
}
