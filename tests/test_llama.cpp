// The Llama-family decoder (include/wick/models/llama.h) on tiny random models written as GGUF
// files by GgufWriter: decoding token by token through the KV cache gives the logits of the whole
// sequence at once, sequences of a batch do not see each other, quantized weights stay close to
// dense ones, tied embeddings, Qwen2's biases, and files with missing or misshapen tensors. Run on
// every device present.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>
#include <thread>

#include "cpu/quant/qdot.h"
#include "models/tiny_model.h"
#include "test_util.h"
#include "wick/dist.h"
#include "wick/io.h"
#include "wick/models/generate.h"
#include "wick/models/llama.h"
#include "wick/ops.h"

namespace wick::test {
namespace {

using io::GgufValue;
using io::GgufWriter;
using models::LlamaModel;
using models::Linear;
using models::LinearGroup;

LlamaModel load(const Tiny& m, Device device, DType dtype = DType::F32) {
  return LlamaModel::from_gguf(io::GgufFile::parse(tiny_model(m).bytes(), "tiny.gguf"), device, dtype);
}

const std::vector<int64_t> kTokens = {3, 17, 42, 8, 63, 0, 25, 11, 9};

class LlamaTest : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
};

// Decoding token by token through the KV cache gives the logits of the whole sequence at once.
TEST_P(LlamaTest, StepByStepEqualsWholeSequence) {
  for (const std::string arch : {"llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3"}) {
    SCOPED_TRACE(arch);
    Tiny tiny;
    tiny.arch = arch;
    tiny.window = arch.starts_with("gemma") ? 3 : 0;  // shorter than the sequence
    const LlamaModel model = load(tiny, device());
    const auto t = static_cast<int64_t>(kTokens.size());
    auto whole_cache = model.make_cache(1, 32);
    const Tensor whole = model.forward(Tensor::from_vector(kTokens, {1, t}), whole_cache);
    ASSERT_EQ(whole.shape(), Shape({1, t, tiny.vocab}));
    EXPECT_EQ(whole_cache[0].size(), t);
    auto cache = model.make_cache(1, 32);
    // The first three at once (a prompt), then one at a time.
    std::vector<Tensor> parts = {model.forward(Tensor::from_vector(std::vector<int64_t>(kTokens.begin(), kTokens.begin() + 3), {1, 3}), cache)};
    for (int64_t i = 3; i < t; ++i) parts.push_back(model.forward(Tensor::from_vector(std::vector<int64_t>{kTokens[static_cast<size_t>(i)]}, {1, 1}), cache));
    const Tensor stepped = cat(parts, 1);
    EXPECT_LT(max_abs_diff(whole, stepped), 1e-4f);
    EXPECT_GT(max_abs_diff(whole.narrow(1, 0, 1), whole.narrow(1, 1, 1)), 1e-2f);  // the logits depend on the tokens
  }
}

// Two sequences decoded together give each one's logits alone.
TEST_P(LlamaTest, BatchedSequencesAreIndependent) {
  const LlamaModel model = load(Tiny{}, device());
  const std::vector<int64_t> other = {5, 5, 60, 1, 2, 3, 4, 33, 7};
  const auto t = static_cast<int64_t>(kTokens.size());
  std::vector<int64_t> both = kTokens;
  both.insert(both.end(), other.begin(), other.end());
  auto cache = model.make_cache(2, 16);
  const Tensor batched = model.forward(Tensor::from_vector(both, {2, t}), cache);
  for (int64_t s = 0; s < 2; ++s) {
    auto one = model.make_cache(1, 16);
    const Tensor alone = model.forward(Tensor::from_vector(s == 0 ? kTokens : other, {1, t}), one);
    EXPECT_LT(max_abs_diff(batched.narrow(0, s, 1), alone), 1e-4f) << "sequence " << s;
  }
}

// Quantized weights (Q8_0) give logits close to the dense weights they were made from; the
// embedding rows are dequantized as gathered.
TEST_P(LlamaTest, QuantizedWeightsStayClose) {
  Tiny dense, q8;
  q8.qtype = quant::QType::Q8_0;
  const auto t = static_cast<int64_t>(kTokens.size());
  auto c1 = load(dense, device()).make_cache(1, 16), c2 = c1;
  const Tensor a = load(dense, device()).forward(Tensor::from_vector(kTokens, {1, t}), c1);
  const LlamaModel qm = load(q8, device());
  auto c3 = qm.make_cache(1, 16);
  const Tensor b = qm.forward(Tensor::from_vector(kTokens, {1, t}), c3);
  const float scale = a.abs().max().item<float>();
  EXPECT_LT(max_abs_diff(a, b), 0.05f * scale);
}

// A model keeps its own copy of the weights or reads them in place from the file's mapping
// (WeightMemory): the same logits, dense and in a block format, and either outlives the GgufFile it
// came from. Bit for bit, but where the copy's blocks are arranged for the device's products
// (QTensor::arrange; the CPU's Q4_0 with AVX2 or AVX-512 VNNI): their float sums run in another
// order there, and a last bit of difference can move x's rounding to 8 bits by one step in a later
// product, which this small random model amplifies to about 1% of its largest logit. So on the CPU
// the comparison runs twice: under the portable loops, which arrange nothing (bit for bit), and
// under the machine's best kernels.
TEST_P(LlamaTest, CopiedAndMappedWeightsGiveTheSameLogits) {
  Tiny dense, q4;
  q4.qtype = quant::QType::Q4_0;
  q4.dim = q4.hidden = 512;  // whole runs of 16 blocks, as the CPU's fastest Q4_0 kernel takes them
  Tiny tied = q4;            // the head is the embedding: arranged once, its rows gathered from the arrangement
  tied.tied = true;
  namespace qdot = cpu::qdot;
  std::vector<qdot::Isa> isas = {qdot::best_isa()};
  if (device().is_cpu() && qdot::best_isa() != qdot::Isa::None) isas.push_back(qdot::Isa::None);
  for (const qdot::Isa isa : isas)
    for (const Tiny& m : {dense, q4, tied}) {
      SCOPED_TRACE(::testing::Message() << (m.qtype ? "q4_0" : "f32") << (m.tied ? ", tied" : "")
                                        << ", instruction set " << qdot::isa_name(isa));
      const qdot::Isa was = qdot::set_isa_limit(isa);
      TempDir dir;
      tiny_model(m).write(dir.file("m.gguf"));
      std::vector<Tensor> logits;
      for (models::WeightMemory memory : {models::WeightMemory::Copy, models::WeightMemory::Map}) {
        const LlamaModel model = [&] {
          const io::GgufFile file = io::GgufFile::open(dir.file("m.gguf"));
          return LlamaModel::from_gguf(file, device(), DType::F32, {}, memory);
        }();
        auto cache = model.make_cache(1, 16);
        logits.push_back(model.forward(Tensor::from_vector(kTokens, {1, static_cast<int64_t>(kTokens.size())}), cache));
      }
      const bool arranged =
          m.qtype &&
          quant::quantize(Tensor::rand_normal({16, m.dim}, 0, 1), *m.qtype).to_device(device()).arrange().arranged();
      qdot::set_isa_limit(was);
      const float scale = logits[1].abs().max().item<float>();
      EXPECT_LE(max_abs_diff(logits[0], logits[1]), arranged ? 3e-2f * scale : 0.f);
    }
}

// Linears of one format are stacked into one weight whose product, split, is each one's own;
// linears of different formats (a Q4_K_M file's q and v) stay apart.
TEST_P(LlamaTest, LinearGroupsStackWeightsOfOneFormat) {
  auto dense = [&](int64_t out, bool bias) {
    Linear l;
    l.dense = Tensor::rand_normal({out, 64}, 0.0, 1.0, DType::F32, device());
    if (bias) l.bias = Tensor::rand_normal({out}, 0.0, 1.0, DType::F32, device());
    return l;
  };
  auto blocks = [&](int64_t out, quant::QType q) {
    Linear l;
    l.quantized = quant::quantize(Tensor::rand_normal({out, 64}, 0.0, 1.0), q).to_device(device());
    return l;
  };
  const Tensor x = Tensor::rand_normal({2, 3, 64}, 0.0, 1.0, DType::F32, device());
  const std::vector<std::vector<Linear>> groups = {
      {dense(32, true), dense(16, true), dense(16, true)},
      {blocks(32, quant::QType::Q4_0), blocks(16, quant::QType::Q4_0)},
      {blocks(32, quant::QType::Q4_0), blocks(16, quant::QType::Q8_0)},
      {dense(32, true), dense(16, false)},
  };
  const std::vector<size_t> stacked = {1, 1, 2, 2};
  for (size_t i = 0; i < groups.size(); ++i) {
    SCOPED_TRACE(i);
    const LinearGroup g = LinearGroup::of(groups[i]);
    EXPECT_EQ(g.weights.size(), stacked[i]);
    const std::vector<Tensor> y = g(x);
    ASSERT_EQ(y.size(), groups[i].size());
    int64_t bytes = 0;
    for (size_t j = 0; j < y.size(); ++j) {
      const Tensor want = groups[i][j](x);
      ASSERT_EQ(y[j].shape(), want.shape());
      EXPECT_LT(max_abs_diff(y[j].contiguous(), want), 1e-4f) << "layer " << j;
      bytes += groups[i][j].bytes();
    }
    EXPECT_EQ(g.bytes(), bytes);
  }
}

TEST_P(LlamaTest, TiedEmbeddingsAndHalfActivations) {
  Tiny tied;
  tied.tied = true;
  const LlamaModel f32 = load(tied, device());
  const LlamaModel bf16 = load(tied, device(), DType::BF16);
  const auto t = static_cast<int64_t>(kTokens.size());
  auto c1 = f32.make_cache(1, 16), c2 = bf16.make_cache(1, 16);
  const Tensor a = f32.forward(Tensor::from_vector(kTokens, {1, t}), c1);
  const Tensor b = bf16.forward(Tensor::from_vector(kTokens, {1, t}), c2);
  EXPECT_EQ(b.dtype(), DType::F32);
  EXPECT_LT(max_abs_diff(a, b), 0.1f * a.abs().max().item<float>());
}

TEST_P(LlamaTest, BrokenFilesAreNamed) {
  Tiny missing;
  missing.drop = "blk.1.ffn_up.weight";
  WICK_EXPECT_ERROR(load(missing, device()), io::FormatError, "tiny.gguf", "blk.1.ffn_up.weight", "missing");
  Tiny arch;
  arch.arch = "gpt2";
  WICK_EXPECT_ERROR(load(arch, device()), NotSupportedError, "gpt2");
  GgufWriter w = tiny_model(Tiny{});
  w.set("llama.attention.head_count_kv", GgufValue::u32(3));
  WICK_EXPECT_ERROR(LlamaModel::from_gguf(io::GgufFile::parse(w.bytes(), "tiny.gguf")), io::FormatError, "head_count_kv", "3");
  // Sizes of up to 2^40 each whose weights would number past 2^62 (and overflow the products of
  // the sizes): refused before any weight is looked at.
  w = tiny_model(Tiny{});
  w.set("llama.attention.head_count", GgufValue::u64(uint64_t{1} << 32));
  w.set("llama.attention.head_count_kv", GgufValue::u64(uint64_t{1} << 32));
  w.set("llama.attention.key_length", GgufValue::u64(uint64_t{1} << 32));
  w.set("llama.rope.dimension_count", GgufValue::u64(uint64_t{1} << 32));
  WICK_EXPECT_ERROR(LlamaModel::from_gguf(io::GgufFile::parse(w.bytes(), "tiny.gguf")), io::FormatError, "tiny.gguf",
                    "4294967296 heads", "2^62 weights");
  w = tiny_model(Tiny{});
  w.set("llama.attention.sliding_window", GgufValue::i64(-4));
  WICK_EXPECT_ERROR(LlamaModel::from_gguf(io::GgufFile::parse(w.bytes(), "tiny.gguf")), io::FormatError,
                    "sliding_window", "-4 is negative");
  // A path the file system cannot look at (a name past NAME_MAX) is a file that cannot be opened.
  WICK_EXPECT_ERROR(LlamaModel::open(std::string(5000, 'a'), device()), Error, "cannot open");
  const LlamaModel model = load(Tiny{}, device());
  auto cache = model.make_cache(1, 4);
  WICK_EXPECT_ERROR(model.forward(Tensor::from_vector(kTokens, {1, 9}), cache), ShapeError, "capacity");
}

// The same weights as a Hugging Face checkpoint (config.json and safetensors under transformers'
// names, q and k rows in transformers' order) give the GGUF file's logits: Llama with its rows of q
// and k permuted in the GGUF file, Qwen2 with biases, Qwen3 with q and k norms, Phi-3 with q, k and
// v as one weight and gate and up as one, tied embeddings; Gemma 2 and 3 with their norms after
// attention and the MLP under their own names, each norm's weight w where the GGUF file holds 1 + w.
TEST_P(LlamaTest, CheckpointEqualsGguf) {
  for (const char* arch : {"llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3"}) {
    const bool gemma = std::string(arch).starts_with("gemma");
    for (const bool tied : {false, true}) {
      if (gemma && !tied) continue;  // Gemma's head is its embedding
      Tiny m;
      m.arch = arch;
      m.tied = tied;
      m.window = gemma ? 4 : 0;
      const io::GgufFile gguf = io::GgufFile::parse(tiny_model(m).bytes(), "tiny.gguf");
      const int64_t hd = m.dim / m.heads;
      io::SafetensorsWriter st;
      auto put = [&](const std::string& theirs, const std::string& ours, int64_t heads = 0) {
        Tensor t = gguf.tensor(*gguf.find_tensor(ours));
        if (gemma && ours.ends_with("norm.weight")) t = t.affine(1, -1);
        // llama.cpp's converter moves each head's rows (i, i + hd/2) next to each other.
        if (heads > 0 && m.arch == "llama")
          t = t.reshape({heads, hd / 2, 2, m.dim}).transpose(1, 2).contiguous().reshape({heads * hd, m.dim});
        st.add(theirs, t);
      };
      put("model.embed_tokens.weight", "token_embd.weight");
      for (int64_t i = 0; i < m.layers; ++i) {
        const std::string g = "blk." + std::to_string(i) + ".", h = "model.layers." + std::to_string(i) + ".";
        put(h + "input_layernorm.weight", g + "attn_norm.weight");
        if (m.arch == "phi3") {
          put(h + "self_attn.qkv_proj.weight", g + "attn_qkv.weight");
        } else {
          put(h + "self_attn.q_proj.weight", g + "attn_q.weight", m.heads);
          put(h + "self_attn.k_proj.weight", g + "attn_k.weight", m.kv_heads);
          put(h + "self_attn.v_proj.weight", g + "attn_v.weight");
        }
        if (m.arch == "qwen2")
          for (const char* x : {"q", "k", "v"}) put(h + "self_attn." + x + "_proj.bias", g + "attn_" + x + ".bias");
        if (m.arch == "qwen3" || m.arch == "gemma3")
          for (const char* x : {"q", "k"}) put(h + "self_attn." + x + "_norm.weight", g + "attn_" + x + "_norm.weight");
        put(h + "self_attn.o_proj.weight", g + "attn_output.weight");
        if (gemma) {
          put(h + "post_attention_layernorm.weight", g + "post_attention_norm.weight");
          put(h + "pre_feedforward_layernorm.weight", g + "ffn_norm.weight");
          put(h + "post_feedforward_layernorm.weight", g + "post_ffw_norm.weight");
        } else {
          put(h + "post_attention_layernorm.weight", g + "ffn_norm.weight");
        }
        if (m.arch == "phi3") {
          put(h + "mlp.gate_up_proj.weight", g + "ffn_up.weight");
        } else {
          put(h + "mlp.gate_proj.weight", g + "ffn_gate.weight");
          put(h + "mlp.up_proj.weight", g + "ffn_up.weight");
        }
        put(h + "mlp.down_proj.weight", g + "ffn_down.weight");
      }
      put("model.norm.weight", "output_norm.weight");
      if (!tied) put("lm_head.weight", "output.weight");
      TempDir dir;
      st.write(dir.file("model.safetensors"));
      const std::string model_type = m.arch == "gemma3" ? "gemma3_text" : arch;
      const std::string gemma_keys = detail::str_cat(
          R"("head_dim": )", hd, R"(, "query_pre_attn_scalar": )", hd, R"(, "sliding_window": 4, )",
          m.arch == "gemma2" ? R"("attn_logit_softcapping": 2.0, "final_logit_softcapping": 3.0, )" : "");
      dir.write(
          "config.json",
          detail::str_cat(R"({"architectures": ["X"], "model_type": ")", model_type, R"(", )", gemma ? gemma_keys : "",
                          R"("vocab_size": )", m.vocab, R"(, "hidden_size": )", m.dim, R"(, "intermediate_size": )",
                          m.hidden, R"(, "num_hidden_layers": )", m.layers, R"(, "num_attention_heads": )", m.heads,
                          R"(, "num_key_value_heads": )", m.kv_heads, R"(, "max_position_embeddings": )", m.context,
                          R"(, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": )",
                          tied ? "true" : "false", "}"));
      const LlamaModel a = LlamaModel::from_gguf(gguf, device());
      const LlamaModel b = LlamaModel::open(dir.path(), device());
      EXPECT_EQ(b.config().architecture, arch);
      EXPECT_FALSE(b.config().interleaved_rope);
      const auto t = static_cast<int64_t>(kTokens.size());
      auto ca = a.make_cache(1, 16), cb = b.make_cache(1, 16);
      const Tensor la = a.forward(Tensor::from_vector(kTokens, {1, t}), ca);
      const Tensor lb = b.forward(Tensor::from_vector(kTokens, {1, t}), cb);
      EXPECT_LT(max_abs_diff(la, lb), 1e-5f * la.abs().max().item<float>()) << arch << (tied ? " tied" : "");
      // The same directory through ModelFile: the family its model_type names, the same logits.
      const models::ModelFile file = models::ModelFile::open(dir.path());
      EXPECT_EQ(file.architecture(), model_type);
      EXPECT_FALSE(file.has_tokenizer());
      models::LoadOptions o;
      o.device = device();
      o.dtype = DType::F32;
      const std::shared_ptr<const models::Model> c = file.load(o);
      auto cc = c->make_cache(1, 16);
      EXPECT_EQ(c->forward(Tensor::from_vector(kTokens, {1, t}), cc).to_vector<float>(), lb.to_vector<float>());
    }
  }
}

// config.json: transformers 5's rope_parameters or rope_theta/rope_scaling, Llama 3.1's frequency
// scaling, Mistral's window, and broken or foreign files named.
TEST(LlamaConfig, FromJson) {
  TempDir dir;
  const std::string base = R"("vocab_size": 128256, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
      "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 131072, "rms_norm_eps": 1e-05)";
  dir.write("llama31.json", R"({"model_type": "llama", )" + base +
                                R"(, "rope_parameters": {"rope_theta": 500000.0, "rope_type": "llama3", "factor": 8.0,
      "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}})");
  const models::LlamaConfig c = models::LlamaConfig::from_json(dir.file("llama31.json"));
  EXPECT_EQ(c.parameters(), 8030261248);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.rope_theta, 500000.0);
  const std::vector<double> f = c.inv_freq();
  ASSERT_EQ(f.size(), 64u);
  // Wavelengths under 8192 / 4 keep their rate, those over 8192 turn 8 times slower.
  EXPECT_DOUBLE_EQ(f[0], 1.0);
  EXPECT_DOUBLE_EQ(f[10], std::pow(500000.0, -20.0 / 128));
  EXPECT_DOUBLE_EQ(f[63], std::pow(500000.0, -126.0 / 128) / 8);
  dir.write("old.json", R"({"model_type": "llama", )" + base +
                            R"(, "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
      "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}})");
  EXPECT_EQ(models::LlamaConfig::from_json(dir.file("old.json")).inv_freq(), f);
  dir.write("mistral.json", R"({"model_type": "mistral", "sliding_window": 4096, )" + base + "}");
  EXPECT_EQ(models::LlamaConfig::from_json(dir.file("mistral.json")).window, 4096);
  dir.write("qwen2.json", R"({"model_type": "qwen2", "sliding_window": 4096, "use_sliding_window": false, )" + base + "}");
  EXPECT_EQ(models::LlamaConfig::from_json(dir.file("qwen2.json")).window, 0);
  // Qwen3: q and k normed per head, no biases, a head size of its own.
  dir.write("qwen3.json", R"({"model_type": "qwen3", "head_dim": 256, "attention_bias": false, )" + base + "}");
  const models::LlamaConfig q3 = models::LlamaConfig::from_json(dir.file("qwen3.json"));
  EXPECT_EQ(q3.architecture, "qwen3");
  EXPECT_TRUE(q3.qk_norm);
  EXPECT_FALSE(q3.qkv_bias);
  EXPECT_FALSE(q3.interleaved_rope);
  EXPECT_EQ(q3.head_dim, 256);
  EXPECT_FALSE(models::LlamaConfig::from_json(dir.file("qwen2.json")).qk_norm);
  // Qwen's window slides only the layers from max_window_layers on (transformers' layer_types): all
  // or none, or refused.
  const std::string slide = R"({"model_type": "qwen2", "sliding_window": 4096, "use_sliding_window": true, )";
  std::string all_sliding = R"("layer_types": [)";
  for (int i = 0; i < 32; ++i) all_sliding += i ? R"(, "sliding_attention")" : R"("sliding_attention")";
  all_sliding += "], ";
  const std::pair<std::string, int64_t> windows[] = {{R"("max_window_layers": 0, )", 4096},
                                                     {R"("max_window_layers": 32, )", 0},
                                                     {all_sliding, 4096},
                                                     {"", 0}};  // transformers' default of 28: refused
  for (const auto& [extra, window] : windows) {
    dir.write("slide.json", slide + extra + base + "}");
    if (extra.empty()) {
      WICK_EXPECT_ERROR(models::LlamaConfig::from_json(dir.file("slide.json")), NotSupportedError,
                        "a sliding window on 4 of the 32 layers");
      continue;
    }
    EXPECT_EQ(models::LlamaConfig::from_json(dir.file("slide.json")).window, window) << extra;
  }
  dir.write("slide.json", slide + R"("max_window_layers": -1, )" + base + "}");
  WICK_EXPECT_ERROR(models::LlamaConfig::from_json(dir.file("slide.json")), io::FormatError, "max_window_layers", "-1");
  // Phi-3: slides where it names a window.
  dir.write("phi3.json", R"({"model_type": "phi3", "sliding_window": 2047, )" + base + "}");
  const models::LlamaConfig phi = models::LlamaConfig::from_json(dir.file("phi3.json"));
  EXPECT_EQ(phi.architecture, "phi3");
  EXPECT_EQ(phi.window, 2047);
  EXPECT_FALSE(phi.interleaved_rope);
  // Phi-4-mini: rope over int(128 * 0.75) = 96 features of each head; LongRoPE's 48 short and long
  // factors, its original context, and the paper's attention factor where none is given.
  std::string short_factors, long_factors;
  for (int i = 0; i < 48; ++i) {
    short_factors += detail::str_cat(i ? ", " : "", 1 + 0.01 * i);
    long_factors += detail::str_cat(i ? ", " : "", 2 + 0.5 * i);
  }
  const std::string longrope = R"(, "original_max_position_embeddings": 4096, "rope_scaling": {"type": "longrope",
      "short_factor": [)" + short_factors +
                               R"(], "long_factor": [)" + long_factors + "]}}";
  dir.write("phi4.json", R"({"model_type": "phi3", "partial_rotary_factor": 0.75, )" + base + longrope);
  const models::LlamaConfig phi4 = models::LlamaConfig::from_json(dir.file("phi4.json"));
  EXPECT_EQ(phi4.rotary_dim, 96);
  EXPECT_EQ(phi4.long_rope.original_context, 4096);
  EXPECT_DOUBLE_EQ(phi4.long_rope.attention_factor, std::sqrt(1 + std::log(32.0) / std::log(4096.0)));
  const std::vector<double> short_rates = phi4.inv_freq(), long_rates = phi4.inv_freq(true);
  ASSERT_EQ(short_rates.size(), 64u);
  EXPECT_DOUBLE_EQ(short_rates[5], std::pow(10000.0, -10.0 / 96) / (1 + 0.01 * 5));
  EXPECT_DOUBLE_EQ(long_rates[5], std::pow(10000.0, -10.0 / 96) / (2 + 0.5 * 5));
  EXPECT_EQ(short_rates[48], 0.0);  // passed as it is
  // Factors for another count of pairs, and a part of the head that rotates an odd count.
  dir.write("phi3-128k.json", R"({"model_type": "phi3", )" + base + longrope);
  WICK_EXPECT_ERROR(models::LlamaConfig::from_json(dir.file("phi3-128k.json")), io::FormatError, "phi3-128k.json",
                    "48 factors for 64 rotated pairs");
  dir.write("odd.json", R"({"model_type": "phi3", "partial_rotary_factor": 0.0078125, )" + base + "}");
  WICK_EXPECT_ERROR(models::LlamaConfig::from_json(dir.file("odd.json")), io::FormatError, "partial_rotary_factor",
                    "turns 1 features");

  dir.write("gpt2.json", R"({"model_type": "gpt2", )" + base + "}");
  WICK_EXPECT_ERROR(models::LlamaConfig::from_json(dir.file("gpt2.json")), NotSupportedError, "gpt2.json", "gpt2");
  dir.write("yarn.json", R"({"model_type": "llama", "rope_scaling": {"rope_type": "yarn"}, )" + base + "}");
  WICK_EXPECT_ERROR(models::LlamaConfig::from_json(dir.file("yarn.json")), NotSupportedError, "yarn");
  dir.write("heads.json", R"({"model_type": "llama", "vocab_size": 8, "hidden_size": 64, "intermediate_size": 96,
      "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 3, "max_position_embeddings": 64})");
  WICK_EXPECT_ERROR(models::LlamaConfig::from_json(dir.file("heads.json")), io::FormatError, "num_key_value_heads", "3");
  dir.write("huge.json", R"({"model_type": "llama", "vocab_size": 1099511627776, "hidden_size": 1099511627776,
      "intermediate_size": 96, "num_hidden_layers": 1, "num_attention_heads": 4, "max_position_embeddings": 64})");
  WICK_EXPECT_ERROR(models::LlamaConfig::from_json(dir.file("huge.json")), io::FormatError, "huge.json",
                    "2^62 weights");
  dir.write("context.json",
            R"({"model_type": "llama", )" + base +
                R"(, "rope_parameters": {"rope_type": "llama3", "original_max_position_embeddings": 1e300}})");
  WICK_EXPECT_ERROR(models::LlamaConfig::from_json(dir.file("context.json")), io::FormatError, "context.json",
                    "original_max_position_embeddings");
  dir.write("missing.json", R"({"model_type": "llama", "vocab_size": 8})");
  WICK_EXPECT_ERROR(models::LlamaConfig::from_json(dir.file("missing.json")), io::FormatError, "missing.json", "hidden_size");
  dir.write("text.json", "not json");
  WICK_EXPECT_ERROR(models::LlamaConfig::from_json(dir.file("text.json")), io::FormatError, "text.json", "not JSON");
  WICK_EXPECT_ERROR(models::LlamaConfig::from_json(dir.file("absent.json")), io::FormatError, "absent.json");
  // A value nested 100000 deep (which nlohmann would print, compare and free by recursion): refused
  // while it is read.
  dir.write("deep.json",
            R"({"model_type": "llama", "vocab_size": )" + std::string(100000, '[') + std::string(100000, ']') + "}");
  WICK_EXPECT_ERROR(models::LlamaConfig::from_json(dir.file("deep.json")), io::FormatError, "deep.json",
                    "nest deeper than 32");
}

// Gemma 3 from config.json (gemma3_text: layer_types or the default pattern, the rope of each kind of
// layer, query_pre_attn_scalar, transformers' defaults where left out) and from GGUF (llama.cpp's
// rules: every sixth layer global unless the file gives a pattern, the local base 10000 unless it
// gives one); what wick does not run refused by name. Gemma 2: every other layer global, one rope,
// its soft-capping (transformers' defaults, none where the file says null).
TEST(LlamaConfig, Gemma) {
  TempDir dir;
  const std::string base = R"("vocab_size": 262208, "hidden_size": 2560, "intermediate_size": 10240,
      "num_hidden_layers": 34, "num_attention_heads": 8, "num_key_value_heads": 4)";
  dir.write("gemma3.json", R"({"model_type": "gemma3_text", "sliding_window": 1024, "query_pre_attn_scalar": 64,
      "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
                          "sliding_attention": {"rope_type": "default", "rope_theta": 20000.0}}, )" +
                               base + "}");
  const models::LlamaConfig c = models::LlamaConfig::from_json(dir.file("gemma3.json"));
  EXPECT_EQ(c.architecture, "gemma3");
  EXPECT_EQ(c.head_dim, 256);      // transformers' default
  EXPECT_EQ(c.context, 131072);    // likewise
  EXPECT_TRUE(c.tied_embeddings);  // likewise
  EXPECT_TRUE(c.embed_scale && c.post_norms && c.qk_norm);
  EXPECT_EQ(c.activation, models::LlamaConfig::Activation::GeluTanh);
  EXPECT_EQ(c.norm_offset, 1.0);
  EXPECT_DOUBLE_EQ(c.attention_scale, 0.125);
  EXPECT_EQ(c.rope_linear, 8.0);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_local_theta, 20000.0);
  ASSERT_EQ(c.layer_windows.size(), 34u);
  for (int64_t i = 0; i < 34; ++i) {
    EXPECT_EQ(c.window_of(i), (i + 1) % 6 == 0 ? 0 : 1024) << i;
    EXPECT_EQ(c.local_rope(i), (i + 1) % 6 != 0) << i;
  }
  EXPECT_DOUBLE_EQ(c.inv_freq()[1], std::pow(1e6, -2.0 / 256) / 8);
  EXPECT_DOUBLE_EQ(c.inv_freq_local()[1], std::pow(20000.0, -2.0 / 256));
  // Each layer's type where the file lists them; the older keys for the rope.
  std::string types = R"("layer_types": [)";
  for (int i = 0; i < 34; ++i)
    types += i ? (i % 2 ? R"(, "full_attention")" : R"(, "sliding_attention")") : R"("sliding_attention")";
  types += "], ";
  dir.write("types.json", R"({"model_type": "gemma3_text", "rope_theta": 500000.0, "rope_local_base_freq": 5000.0, )" +
                              types + base + "}");
  const models::LlamaConfig t = models::LlamaConfig::from_json(dir.file("types.json"));
  EXPECT_EQ(t.window_of(0), 4096);
  EXPECT_EQ(t.window_of(1), 0);
  EXPECT_EQ(t.rope_theta, 500000.0);
  EXPECT_EQ(t.rope_local_theta, 5000.0);
  EXPECT_DOUBLE_EQ(t.attention_scale, 1 / 16.0);  // query_pre_attn_scalar's default, 256
  const std::pair<std::string, std::string> refused[] = {
      {R"("final_logit_softcapping": 30.0, )", "final_logit_softcapping"},
      {R"("attn_logit_softcapping": 50.0, )", "attn_logit_softcapping"},
      {R"("use_bidirectional_attention": true, )", "use_bidirectional_attention"},
      {R"("hidden_activation": "silu", )", "hidden_activation"}};
  for (const auto& [extra, what] : refused) {
    dir.write("refused.json", R"({"model_type": "gemma3_text", )" + extra + base + "}");
    WICK_EXPECT_ERROR(models::LlamaConfig::from_json(dir.file("refused.json")), NotSupportedError, what);
  }
  dir.write("vision.json", R"({"model_type": "gemma3", )" + base + "}");
  WICK_EXPECT_ERROR(models::LlamaConfig::from_json(dir.file("vision.json")), NotSupportedError, "gemma3_text");
  dir.write("types.json", R"({"model_type": "gemma3_text", "layer_types": ["sliding_attention"], )" + base + "}");
  WICK_EXPECT_ERROR(models::LlamaConfig::from_json(dir.file("types.json")), io::FormatError, "layer_types",
                    "a list of 34 layer types");

  // GGUF: the norms hold 1 + weight already; six layers, the sixth global.
  Tiny tiny;
  tiny.arch = "gemma3", tiny.layers = 7, tiny.window = 3;
  const models::LlamaConfig g = models::LlamaConfig::from_gguf(io::GgufFile::parse(tiny_model(tiny).bytes(), "g.gguf"));
  EXPECT_EQ(g.norm_offset, 0.0);
  EXPECT_EQ(g.rope_local_theta, 10000.0);
  EXPECT_EQ(g.attention_scale, 0.0);
  EXPECT_EQ(g.layer_windows, (std::vector<int64_t>{3, 3, 3, 3, 3, 0, 3}));
  // A period, a flag per layer, and the local base where the file gives them.
  GgufWriter w = tiny_model(tiny);
  w.set("gemma3.attention.sliding_window_pattern", GgufValue::u32(3));
  w.set("gemma3.rope.freq_base_swa", GgufValue::f32(500.f));
  const models::LlamaConfig p = models::LlamaConfig::from_gguf(io::GgufFile::parse(w.bytes(), "p.gguf"));
  EXPECT_EQ(p.layer_windows, (std::vector<int64_t>{3, 3, 0, 3, 3, 0, 3}));
  EXPECT_EQ(p.rope_local_theta, 500.0);
  io::GgufArray flags;
  flags.type = io::GgufType::Bool;
  for (int i = 0; i < 7; ++i) flags.items.push_back(GgufValue::boolean(i % 3 == 0));
  w.set("gemma3.attention.sliding_window_pattern", GgufValue::array(flags));
  EXPECT_EQ(models::LlamaConfig::from_gguf(io::GgufFile::parse(w.bytes(), "f.gguf")).layer_windows,
            (std::vector<int64_t>{3, 0, 0, 3, 0, 0, 3}));
  flags.items.pop_back();
  w.set("gemma3.attention.sliding_window_pattern", GgufValue::array(flags));
  WICK_EXPECT_ERROR(models::LlamaConfig::from_gguf(io::GgufFile::parse(w.bytes(), "f.gguf")), io::FormatError,
                    "sliding_window_pattern", "6 flags for 7 layers");

  dir.write("gemma2.json", R"({"model_type": "gemma2", "head_dim": 128, )" + base + "}");
  const models::LlamaConfig two = models::LlamaConfig::from_json(dir.file("gemma2.json"));
  EXPECT_EQ(two.architecture, "gemma2");
  EXPECT_FALSE(two.qk_norm);
  EXPECT_TRUE(two.embed_scale && two.post_norms && two.tied_embeddings);
  EXPECT_EQ(two.attn_softcap, 50.0);
  EXPECT_EQ(two.final_softcap, 30.0);
  EXPECT_EQ(two.context, 8192);
  EXPECT_EQ(two.rope_theta, 10000.0);
  EXPECT_EQ(two.rope_local_theta, 0.0);
  EXPECT_EQ(two.window_of(0), 4096);
  EXPECT_EQ(two.window_of(1), 0);
  EXPECT_EQ(two.window_of(32), 4096);
  dir.write(
      "gemma2.json",
      R"({"model_type": "gemma2", "attn_logit_softcapping": null, "final_logit_softcapping": 20.0, )" + base + "}");
  const models::LlamaConfig capped = models::LlamaConfig::from_json(dir.file("gemma2.json"));
  EXPECT_EQ(capped.attn_softcap, 0.0);
  EXPECT_EQ(capped.final_softcap, 20.0);
  Tiny tiny2;
  tiny2.arch = "gemma2", tiny2.layers = 3, tiny2.window = 3;
  const models::LlamaConfig g2 =
      models::LlamaConfig::from_gguf(io::GgufFile::parse(tiny_model(tiny2).bytes(), "g2.gguf"));
  EXPECT_EQ(g2.layer_windows, (std::vector<int64_t>{3, 0, 3}));
  EXPECT_EQ(g2.attn_softcap, 2.0);
  EXPECT_EQ(g2.final_softcap, 3.0);
  EXPECT_FALSE(g2.qk_norm);
}

// Greedy generation through the KV cache picks what the argmax of a whole-sequence forward picks,
// step after step; prompts of different lengths decoded together get their own tokens.
TEST_P(LlamaTest, GreedyGenerationMatchesWholeSequenceArgmax) {
  const LlamaModel model = load(Tiny{}, device());
  const std::vector<int32_t> prompt = {1, 17, 42, 8};
  models::GenerateOptions options;
  options.max_tokens = 6;
  const std::vector<std::vector<int32_t>> one = {prompt};
  const models::GenerateResult r = models::generate(model, one, options);
  ASSERT_EQ(r.tokens.size(), 1u);
  ASSERT_EQ(r.tokens[0].size(), 6u);
  EXPECT_EQ(r.prompt_tokens, 4);
  std::vector<int64_t> seq(prompt.begin(), prompt.end());
  for (int32_t got : r.tokens[0]) {
    auto cache = model.make_cache(1, 16);
    const Tensor logits = model.forward(Tensor::from_vector(seq, {1, static_cast<int64_t>(seq.size())}), cache);
    const auto want = static_cast<int32_t>(logits.narrow(1, static_cast<int64_t>(seq.size()) - 1, 1).reshape({Tiny{}.vocab}).argmax(0).item<uint32_t>());
    EXPECT_EQ(got, want);
    seq.push_back(got);
  }
  // Three prompts of three lengths at once: each gets the tokens it gets alone.
  const std::vector<std::vector<int32_t>> three = {prompt, {1, 5}, {1, 60, 61, 62, 63, 2, 9}};
  const models::GenerateResult batch = models::generate(model, three, options);
  for (size_t s = 0; s < three.size(); ++s) {
    const std::vector<std::vector<int32_t>> alone = {three[s]};
    EXPECT_EQ(batch.tokens[s], models::generate(model, alone, options).tokens[0]) << "sequence " << s;
  }
  // A stop token ends its sequence (and is kept); the callback sees each token and may stop.
  options.stop_tokens = {r.tokens[0][2]};
  EXPECT_EQ(models::generate(model, one, options).tokens[0], std::vector<int32_t>(r.tokens[0].begin(), r.tokens[0].begin() + 3));
  options.stop_tokens.clear();
  int calls = 0;
  const auto stopped = models::generate(model, one, options, [&](int64_t, int32_t) { return ++calls < 2; });
  EXPECT_EQ(stopped.tokens[0].size(), 2u);
}

// New tokens stop where the sequences fill the model's context (the longest prompt sets the
// positions), however many were asked for; a prompt that fills it is refused.
TEST_P(LlamaTest, GenerationStopsAtTheContext) {
  Tiny tiny;
  tiny.context = 12;
  const LlamaModel model = load(tiny, device());
  models::GenerateOptions options;
  options.max_tokens = std::numeric_limits<int64_t>::max();
  const std::vector<std::vector<int32_t>> prompts = {{1, 17, 42, 8}, {1, 5}};
  const models::GenerateResult r = models::generate(model, prompts, options);
  EXPECT_EQ(r.tokens[0].size(), 8u);
  EXPECT_EQ(r.tokens[1].size(), 8u);
  const std::vector<std::vector<int32_t>> full = {std::vector<int32_t>(12, 3)};
  WICK_EXPECT_ERROR(models::generate(model, full, options), ShapeError, "generate: ", "12 tokens", "context of 12");
}

// DecodeGraph's steps give forward()'s logits, past a span's end (a new recording), for Llama,
// Qwen2's biases, a sliding window, block-format weights, a padded batch, and Gemma 3's local and
// global layers (a window on some layers: a mask per window), Gemma 2's soft-capping, a mixture of
// experts in a block format; and refuse what is not theirs to take.
TEST_P(LlamaTest, DecodeGraphStepsEqualForward) {
  struct Case {
    std::string name;
    Tiny tiny;
    int64_t window = 0;
    int64_t batch = 1;
  };
  std::vector<Case> cases = {{"llama", Tiny{}},        {"qwen2", Tiny{}},       {"window", Tiny{}, 5},
                             {"q8_0", Tiny{}},         {"batch", Tiny{}, 0, 2}, {"qwen3", Tiny{}},
                             {"gemma3", Tiny{}, 0, 2}, {"gemma2", Tiny{}},      {"qwen3moe", Tiny{}, 0, 2}};
  cases[1].tiny.arch = "qwen2";
  cases[3].tiny.qtype = quant::QType::Q8_0;
  cases[5].tiny.arch = "qwen3";
  // Gemma 3: a local layer (a window of 5, its own rope base), a global one, a local one.
  cases[6].tiny.arch = "gemma3", cases[6].tiny.layers = 3, cases[6].tiny.window = 5, cases[6].tiny.pattern = 2;
  // Gemma 2: its scores and logits soft-capped, local and global layers in turn.
  cases[7].tiny.arch = "gemma2", cases[7].tiny.window = 5;
  // Qwen3-MoE's experts in Q8_0: stacked on a GPU, their routing and grouped products recorded.
  cases[8].tiny.arch = "qwen3moe", cases[8].tiny.experts = 6, cases[8].tiny.experts_used = 3;
  cases[8].tiny.hidden = 32, cases[8].tiny.qtype = quant::QType::Q8_0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    LlamaModel model = load(c.tiny, device());
    if (c.window > 0) model = LlamaModel::from_gguf(io::GgufFile::parse([&] {
      GgufWriter w = tiny_model(c.tiny);
      w.set("llama.attention.sliding_window", GgufValue::u32(static_cast<uint32_t>(c.window)));
      return w.bytes();
    }(), "window.gguf"), device());
    const int64_t b = c.batch, steps = models::DecodeGraph::kSpan + 6, prompt = 3;
    auto eager = model.make_cache(b, prompt + steps + 1), graphed = model.make_cache(b, prompt + steps + 1);
    // Sequence 1 of the batch starts one position later: its first key is masked.
    auto mask = [&](int64_t t_kv) -> Tensor {
      if (b == 1) return {};
      std::vector<float> m(static_cast<size_t>(b * t_kv), 0.f);
      m[static_cast<size_t>(t_kv)] = -INFINITY;
      return Tensor::from_vector(m, {b, t_kv});
    };
    std::vector<int64_t> ids(static_cast<size_t>(b * prompt));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i * 5 + 1) % c.tiny.vocab;
    const Tensor first = Tensor::from_vector(ids, {b, prompt});
    (void)model.forward(first, eager, mask(prompt), true);
    (void)model.forward(first, graphed, mask(prompt), true);
    models::DecodeGraph graph(model, graphed);
    float worst = 0, scale = 0;
    (void)graph.step(Tensor::from_vector(std::vector<int64_t>(static_cast<size_t>(b), 1), {b, 1}), mask(prompt + 1));
    (void)model.forward(Tensor::from_vector(std::vector<int64_t>(static_cast<size_t>(b), 1), {b, 1}), eager, mask(prompt + 1), true);
    EXPECT_EQ(graph.recording_error(), "");  // the steps replay a recording
    for (int64_t s = 0; s < steps; ++s) {
      std::vector<int64_t> next(static_cast<size_t>(b));
      for (int64_t j = 0; j < b; ++j) next[static_cast<size_t>(j)] = (s * 7 + j * 3 + 2) % c.tiny.vocab;
      const Tensor tokens = Tensor::from_vector(next, {b, 1});
      // Tokens on the device as u32 for half the steps.
      const Tensor given = s % 2 == 0 ? tokens : tokens.to_dtype(DType::U32).to_device(device());
      const Tensor want = model.forward(tokens, eager, mask(prompt + s + 2), true);
      const Tensor got = graph.step(given, mask(prompt + s + 2));
      ASSERT_EQ(got.shape(), Shape({b, 1, c.tiny.vocab}));
      ASSERT_EQ(graphed[0].size(), prompt + s + 2);
      worst = std::max(worst, max_abs_diff(want, got));
      scale = std::max(scale, want.abs().max().item<float>());
    }
    // A step's attention runs over the span's keys, the later ones masked, and forward()'s over the
    // keys present: on a GPU the key ranges split differently, so x differs in its last bits. A
    // block-format product rounds x to 8 bits per 32 values, and such a difference can move one
    // rounding step: on an H100 the q8_0 case differed by 0.15% of the largest logit.
    const float tolerance = c.tiny.qtype ? 1e-2f : 1e-5f;
    EXPECT_LT(worst, tolerance * std::max(1.f, scale)) << "largest logit " << scale;
    WICK_EXPECT_ERROR(graph.step(Tensor::from_vector(std::vector<int64_t>{1}, {1, 1}), mask(prompt + steps + 2)),
                      ShapeError, "DecodeGraph::step");
  }
  const LlamaModel model = load(Tiny{}, device());
  auto cache = model.make_cache(1, 2);
  models::DecodeGraph graph(model, cache);
  const Tensor one = Tensor::from_vector(std::vector<int64_t>{1}, {1, 1});
  WICK_EXPECT_ERROR(graph.step(Tensor::from_vector(std::vector<int64_t>{1, 2}, {1, 2})), ShapeError, "tokens of shape");
  WICK_EXPECT_ERROR(graph.step(one, Tensor::zeros({1, 3})), ShapeError, "key mask of shape");
  graph.step(one);
  graph.step(one);
  WICK_EXPECT_ERROR(graph.step(one), ShapeError, "full");
  cache[1].truncate(1);
  WICK_EXPECT_ERROR(graph.step(one), ShapeError, "no longer hold one number of positions");
  auto few = model.make_cache(1, 4);
  few.pop_back();
  WICK_EXPECT_ERROR(models::DecodeGraph(model, few), ShapeError, "1 caches for 2 layers");
}

// Random models of a given shape (for benchmarks), the last position alone, and the presets.
TEST_P(LlamaTest, RandomModelsAndLastPositionLogits) {
  models::LlamaConfig c = models::LlamaConfig::preset("llama3-8b");
  EXPECT_EQ(c.parameters(), 8030261248);  // Llama 3 8B's count, untied
  EXPECT_EQ(models::LlamaConfig::preset("qwen2-7b").architecture, "qwen2");
  EXPECT_EQ(models::LlamaConfig::preset("qwen3-8b").parameters(), 8190735360);  // Qwen3 8B's, q and k norms included
  WICK_EXPECT_ERROR(models::LlamaConfig::preset("gpt-9"), Error, "gpt-9", "llama3-8b");
  c.vocab = 96, c.dim = 64, c.hidden = 128, c.layers = 2, c.heads = 4, c.kv_heads = 2, c.head_dim = 16;
  for (const std::optional<quant::QType> q : {std::optional<quant::QType>{}, std::optional<quant::QType>{quant::QType::Q8_0}}) {
    const LlamaModel m = LlamaModel::random(c, device(), DType::F32, q);
    const int64_t linear = 2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128;
    EXPECT_EQ(m.weight_bytes(), q ? 2 * (linear / 32 * 34) + 96 * 64 / 32 * 34 + 5 * 64 * 4 : (2 * linear + 96 * 64 + 5 * 64) * 4);
    auto c1 = m.make_cache(2, 8), c2 = m.make_cache(2, 8);
    const Tensor tokens = Tensor::from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
    const Tensor all = m.forward(tokens, c1);
    const Tensor last = m.forward(tokens, c2, {}, true);
    ASSERT_EQ(last.shape(), Shape({2, 1, 96}));
    EXPECT_LT(max_abs_diff(all.narrow(1, 3, 1).contiguous(), last), 1e-5f);
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, LlamaTest, ::testing::ValuesIn(devices()), device_name);

// ---- tensor parallel --------------------------------------------------------------------------

// The model split over 2 and 4 CPU ranks (Megatron's split) gives the whole model's logits, within
// the rounding of its partial sums, and the same greedy tokens; for dense and block-format
// weights, Qwen2's biases, Qwen3's q and k norms, Phi-3's fused weights, tied embeddings and Gemma
// 3's norms after the ranks' sums.
TEST(LlamaTensorParallel, SplitModelsMatchTheWholeModel) {
  for (const std::string arch : {"llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3"})
    for (const std::optional<quant::QType> q : {std::optional<quant::QType>{}, std::optional<quant::QType>{quant::QType::Q8_0}})
      for (int n : {2, 4}) {
        Tiny m;
        m.arch = arch, m.qtype = q, m.dim = 128, m.heads = 8, m.kv_heads = 4, m.hidden = 256, m.tied = arch == "qwen2";
        m.window = arch.starts_with("gemma") ? 3 : 0;
        const std::vector<uint8_t> bytes = tiny_model(m).bytes();
        const io::GgufFile file = io::GgufFile::parse(bytes, "tiny.gguf");
        const LlamaModel whole = LlamaModel::from_gguf(file, Device::cpu());
        const std::vector<dist::Communicator> comms = dist::Communicator::local(std::vector<Device>(static_cast<size_t>(n), Device::cpu()));
        std::vector<LlamaModel> parts;
        for (int r = 0; r < n; ++r) parts.push_back(LlamaModel::from_gguf(file, Device::cpu(), DType::F32, comms[static_cast<size_t>(r)]));
        EXPECT_LT(parts[1].weight_bytes() * n, whole.weight_bytes() * 11 / 10);

        const Tensor tokens = Tensor::from_vector(kTokens, {1, static_cast<int64_t>(kTokens.size())});
        auto cache = whole.make_cache(1, 16);
        const Tensor want = whole.forward(tokens, cache);
        std::vector<Tensor> got(static_cast<size_t>(n));
        dist::on_threads(n, [&](int r) {
          auto c = parts[static_cast<size_t>(r)].make_cache(1, 16);
          got[static_cast<size_t>(r)] = parts[static_cast<size_t>(r)].forward(tokens, c);
        });
        for (int r = 0; r < n; ++r) {
          ASSERT_EQ(got[static_cast<size_t>(r)].shape(), want.shape());
          EXPECT_LT(max_abs_diff(got[static_cast<size_t>(r)], want), 2e-4f) << arch << " " << n << " ranks, rank " << r;
          EXPECT_EQ(max_abs_diff(got[static_cast<size_t>(r)], got[0]), 0.f);  // every rank the same bits
        }

        const std::vector<std::vector<int32_t>> prompts = {{1, 17, 42, 8}, {1, 5}};
        models::GenerateOptions o;
        o.max_tokens = 8;
        const models::GenerateResult alone = models::generate(whole, prompts, o);
        std::vector<models::GenerateResult> split(static_cast<size_t>(n));
        dist::on_threads(n, [&](int r) { split[static_cast<size_t>(r)] = models::generate(parts[static_cast<size_t>(r)], prompts, o); });
        for (int r = 0; r < n; ++r) EXPECT_EQ(split[static_cast<size_t>(r)].tokens, alone.tokens) << arch << " rank " << r;
      }
}

// Where two GPUs are present: the model split over them against the whole model on one, in f32
// (2e-4 of the largest logit, the same greedy tokens) and bf16 (2% of the largest logit; the
// partial sums are rounded to bf16 before they are added). The differences are printed.
TEST(LlamaTensorParallel, SplitOverTwoGpusMatchesOneGpu) {
  std::vector<Device> gpus;
  for (Device d : devices())
    if (!d.is_cpu()) gpus.push_back(d);
  if (gpus.size() < 2) GTEST_SKIP() << "needs two GPUs";
  Tiny m;
  m.dim = 128, m.heads = 8, m.kv_heads = 4, m.hidden = 256;
  const std::vector<uint8_t> bytes = tiny_model(m).bytes();
  const io::GgufFile file = io::GgufFile::parse(bytes, "tiny.gguf");
  const auto comms = dist::Communicator::local({gpus[0], gpus[1]});
  for (DType dt : {DType::F32, DType::BF16}) {
    const LlamaModel whole = LlamaModel::from_gguf(file, gpus[0], dt);
    std::vector<LlamaModel> parts;
    for (int r = 0; r < 2; ++r) parts.push_back(LlamaModel::from_gguf(file, gpus[static_cast<size_t>(r)], dt, comms[static_cast<size_t>(r)]));
    const Tensor tokens = Tensor::from_vector(kTokens, {1, static_cast<int64_t>(kTokens.size())});
    auto cache = whole.make_cache(1, 16);
    const Tensor want = whole.forward(tokens, cache).to_device(Device::cpu());
    std::vector<Tensor> got(2);
    dist::on_threads(2, [&](int r) {
      auto c = parts[static_cast<size_t>(r)].make_cache(1, 16);
      got[static_cast<size_t>(r)] = parts[static_cast<size_t>(r)].forward(tokens, c).to_device(Device::cpu());
    });
    const float scale = want.abs().max().item<float>(), diff = max_abs_diff(got[0], want);
    std::printf("split over %s and %s, %s: largest logit %.4f, largest difference %.3g (%.3g of it)\n", gpus[0].to_string().c_str(),
                gpus[1].to_string().c_str(), std::string(dtype_name(dt)).c_str(), scale, diff, diff / scale);
    EXPECT_LT(diff, (dt == DType::F32 ? 2e-4f : 2e-2f) * scale) << dtype_name(dt);
    EXPECT_EQ(max_abs_diff(got[1], got[0]), 0.f);
    if (dt == DType::F32) {
      const std::vector<std::vector<int32_t>> prompts = {{1, 17, 42, 8}, {1, 5}};
      models::GenerateOptions o;
      o.max_tokens = 8;
      const models::GenerateResult alone = models::generate(whole, prompts, o);
      std::vector<models::GenerateResult> split(2);
      dist::on_threads(2, [&](int r) { split[static_cast<size_t>(r)] = models::generate(parts[static_cast<size_t>(r)], prompts, o); });
      EXPECT_EQ(split[0].tokens, alone.tokens);
      EXPECT_EQ(split[1].tokens, alone.tokens);
    }
  }
}

TEST(LlamaTensorParallel, SampledTokensAndStopsComeFromRankZero) {
  Tiny m;
  const std::vector<uint8_t> bytes = tiny_model(m).bytes();
  const io::GgufFile file = io::GgufFile::parse(bytes, "tiny.gguf");
  const LlamaModel whole = LlamaModel::from_gguf(file, Device::cpu());
  const std::vector<dist::Communicator> comms = dist::Communicator::local({Device::cpu(), Device::cpu()});
  std::vector<LlamaModel> parts;
  for (int r = 0; r < 2; ++r) parts.push_back(LlamaModel::from_gguf(file, Device::cpu(), DType::F32, comms[static_cast<size_t>(r)]));
  const std::vector<std::vector<int32_t>> prompts = {{1, 17, 42, 8}};
  models::GenerateOptions o;
  o.max_tokens = 12;
  o.sampling.temperature = 0.9, o.sampling.top_k = 20, o.sampling.seed = 5;
  const models::GenerateResult alone = models::generate(whole, prompts, o);
  std::vector<models::GenerateResult> split(2);
  std::vector<int> seen(2);
  dist::on_threads(2, [&](int r) {
    // Rank 0's callback stops after 5 tokens; rank 1's would go on, and is overruled.
    split[static_cast<size_t>(r)] = models::generate(parts[static_cast<size_t>(r)], prompts, o, [&, r](int64_t, int32_t) {
      return ++seen[static_cast<size_t>(r)] < 5 || r == 1;
    });
  });
  const std::vector<int32_t> first5(alone.tokens[0].begin(), alone.tokens[0].begin() + 5);
  EXPECT_EQ(split[0].tokens[0], first5);
  EXPECT_EQ(split[1].tokens[0], first5);
  EXPECT_EQ(seen[1], 5);
}

TEST(LlamaTensorParallel, SplitsThatDoNotDivideAreRefused) {
  Tiny m;  // 4 heads, 2 KV heads, MLP 96
  const std::vector<uint8_t> bytes = tiny_model(m).bytes();
  const io::GgufFile file = io::GgufFile::parse(bytes, "tiny.gguf");
  const auto three = dist::Communicator::local({Device::cpu(), Device::cpu(), Device::cpu()});
  WICK_EXPECT_ERROR(LlamaModel::from_gguf(file, Device::cpu(), DType::F32, three[0]), NotSupportedError, "3 ranks", "4 attention heads");
  m.qtype = quant::QType::Q8_0;  // 96 / 2 = 48 columns of ffn_down: not whole blocks of 32
  const std::vector<uint8_t> qbytes = tiny_model(m).bytes();
  const auto two = dist::Communicator::local({Device::cpu(), Device::cpu()});
  WICK_EXPECT_ERROR(LlamaModel::from_gguf(io::GgufFile::parse(qbytes, "q.gguf"), Device::cpu(), DType::F32, two[0]), NotSupportedError,
                    "48 columns of ffn_down", "q8_0");
  // A token outside the vocabulary is an IndexError, as it is for the whole model.
  const LlamaModel part = LlamaModel::from_gguf(file, Device::cpu(), DType::F32, two[0]);
  auto cache = part.make_cache(1, 4);
  WICK_EXPECT_ERROR(part.forward(Tensor::from_vector(std::vector<int64_t>{1, 64}, {1, 2}), cache), IndexError, "token 64");
}

TEST(LlamaTensorParallel, RandomModelsSplitTheSameWeights) {
  models::LlamaConfig c = models::LlamaConfig::preset("llama3-8b");
  c.vocab = 96, c.dim = 64, c.hidden = 128, c.layers = 2, c.heads = 4, c.kv_heads = 2, c.head_dim = 16;
  const LlamaModel whole = LlamaModel::random(c, Device::cpu(), DType::F32, std::nullopt, 3);
  const auto comms = dist::Communicator::local({Device::cpu(), Device::cpu()});
  std::vector<LlamaModel> parts;
  for (int r = 0; r < 2; ++r) parts.push_back(LlamaModel::random(c, Device::cpu(), DType::F32, std::nullopt, 3, comms[static_cast<size_t>(r)]));
  const Tensor tokens = Tensor::from_vector(std::vector<int64_t>{1, 2, 3, 4}, {1, 4});
  auto cache = whole.make_cache(1, 8);
  const Tensor want = whole.forward(tokens, cache);
  std::vector<Tensor> got(2);
  dist::on_threads(2, [&](int r) {
    auto rc = parts[static_cast<size_t>(r)].make_cache(1, 8);
    got[static_cast<size_t>(r)] = parts[static_cast<size_t>(r)].forward(tokens, rc);
  });
  EXPECT_LT(max_abs_diff(got[0], want), 2e-4f);
}

// ---- sampling ------------------------------------------------------------------------------------

TEST(Sampler, GreedyTopKMinPAndTopPAgreeAtTheirLimits) {
  const std::vector<float> logits = {0.5f, 2.f, -1.f, 2.f, 1.9f};
  models::SamplingOptions o;
  EXPECT_EQ(models::Sampler(o).sample(logits, {}), 1);  // the lower id of a tie
  o.temperature = 0.8;
  o.top_k = 1;
  EXPECT_EQ(models::Sampler(o).sample(logits, {}), 1);
  o.top_k = 0;
  o.min_p = 1;
  EXPECT_EQ(models::Sampler(o).sample(logits, {}), 1);
  o.min_p = 0;
  o.top_p = 1e-9;
  EXPECT_EQ(models::Sampler(o).sample(logits, {}), 1);
}

TEST(Sampler, DrawsFollowTheSoftmaxAndTheSeed) {
  const std::vector<float> logits = {0.f, std::log(3.f)};
  models::SamplingOptions o;
  o.temperature = 1;
  o.seed = 11;
  models::Sampler a(o);
  std::vector<int32_t> first;
  int ones = 0;
  for (int i = 0; i < 4000; ++i) {
    const int32_t id = a.sample(logits, {});
    if (i < 50) first.push_back(id);
    ones += id;
  }
  EXPECT_NEAR(ones / 4000.0, 0.75, 0.03);
  models::Sampler b(o);
  for (int32_t want : first) EXPECT_EQ(b.sample(logits, {}), want);  // the same seed, the same draws
}

// The sampler ranks a whole vocabulary band by band of weights, sorting each band as the walks
// reach it. Against a full sort of every candidate, with the same draws: ties of equal logits (the
// lower id first), walks deep into the smallest bands, top_p and min_p cuts.
TEST(Sampler, RankingByBandsIsTheFullSort) {
  constexpr int kDraws = 256;  // the sampler's first batch of draws
  // id 7 alone at 0, a third of the ids at -12 (weights 6e-6: the second band), the rest at -25
  // (1.4e-11), and a vocabulary of normal logits.
  std::vector<float> banded(20000), normal(128256);
  for (size_t i = 0; i < banded.size(); ++i) banded[i] = i == 7 ? 0.f : i % 3 == 0 ? -12.f : -25.f;
  std::mt19937 gen(5);
  std::normal_distribution<float> dist(0.f, 3.f);
  for (float& v : normal) v = dist(gen);
  struct Setting {
    double temperature, top_p, min_p;
  };
  for (const auto& [logits, settings] :
       {std::pair{banded, std::vector<Setting>{{1, 1, 0}, {1, 0.99, 0}, {1, 1, 1e-6}, {0.5, 1, 0}}},
        std::pair{normal, std::vector<Setting>{{0.8, 0.95, 0}, {0.8, 1, 0}, {1.5, 0.9, 0.01}}}}) {
    for (const Setting& st : settings) {
      models::SamplingOptions o;
      o.temperature = st.temperature;
      o.top_p = st.top_p;
      o.min_p = st.min_p;
      o.seed = 17;
      models::Sampler sampler(o);
      std::vector<int32_t> got;
      for (int i = 0; i < kDraws; ++i) got.push_back(sampler.sample(logits, {}));
      // The same draws, through a full sort.
      manual_seed(o.seed, Device::cpu());
      const std::vector<double> draws = Tensor::rand_uniform({kDraws}, 0.0, 1.0, DType::F64).to_vector<double>();
      std::vector<int32_t> ids(logits.size());
      std::iota(ids.begin(), ids.end(), 0);
      std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
        return logits[static_cast<size_t>(a)] != logits[static_cast<size_t>(b)]
                   ? logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)]
                   : a < b;
      });
      const float top = logits[static_cast<size_t>(ids[0])];
      std::vector<double> w(ids.size());
      double total = 0;
      for (size_t i = 0; i < logits.size(); ++i) total += std::exp((logits[i] - top) / o.temperature);
      for (size_t i = 0; i < ids.size(); ++i)
        w[i] = std::exp((logits[static_cast<size_t>(ids[i])] - top) / o.temperature) / total;
      size_t keep = ids.size();
      double cumulative = 0;
      for (size_t i = 0; i < ids.size() && o.top_p < 1; ++i)
        if ((cumulative += w[i]) >= o.top_p) {
          keep = i + 1;
          break;
        }
      size_t i = 1;
      while (o.min_p > 0 && i < keep && w[i] >= o.min_p * w[0]) ++i;
      if (o.min_p > 0) keep = i;
      const double mass =
          keep == ids.size() ? 1 : std::accumulate(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
      int deep = 0;  // draws past the first band
      for (int d = 0; d < kDraws; ++d) {
        const double u = draws[static_cast<size_t>(d)] * mass;
        double c = 0;
        size_t at = 0;
        while (at + 1 < keep && u >= (c += w[at])) ++at;
        deep += w[at] < 1e-4 * w[0];
        ASSERT_EQ(got[static_cast<size_t>(d)], ids[at])
            << "draw " << d << ", temperature " << o.temperature << ", top_p " << o.top_p << ", min_p " << o.min_p;
      }
      if (logits.size() == banded.size() && o.top_p == 1 && o.min_p == 0 && o.temperature == 1) {
        EXPECT_GT(deep, 0) << "no draw reached the second band";
      }
    }
  }
}

// A NaN logit is never picked nor drawn; +inf logits share all the probability; logits with
// nothing above -inf are an error.
TEST(Sampler, NanAndInfiniteLogits) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  models::SamplingOptions o;
  EXPECT_EQ(models::Sampler(o).sample(std::vector<float>{nan, 2.f, 2.f}, {}), 1);
  o.temperature = 1;
  for (int64_t top_k : {0, 3}) {
    o.top_k = top_k;
    models::Sampler with_nan(o), with_inf(o);
    int infinite[2] = {0, 0};
    for (int i = 0; i < 200; ++i) {
      const int32_t a = with_nan.sample(std::vector<float>{nan, 1.f, 3.f, nan}, {});
      EXPECT_TRUE(a == 1 || a == 2) << a;
      const int32_t b = with_inf.sample(std::vector<float>{0.f, inf, 5.f, inf}, {});
      ASSERT_TRUE(b == 1 || b == 3) << b;
      ++infinite[b == 3];
    }
    EXPECT_GT(infinite[0], 50);
    EXPECT_GT(infinite[1], 50);
  }
  for (double t : {0.0, 1.0}) {
    o.temperature = t;
    WICK_EXPECT_ERROR(models::Sampler(o).sample(std::vector<float>{nan, nan}, {}), Error, "sampler", "NaN");
    WICK_EXPECT_ERROR(models::Sampler(o).sample(std::vector<float>{-inf, nan}, {}), Error, "sampler", "-inf");
  }
}

TEST(Sampler, RepetitionPenaltyAndBadOptions) {
  const std::vector<float> logits = {1.f, 3.f, 2.5f, -2.f};
  models::SamplingOptions o;
  o.repetition_penalty = 1.5;
  const std::vector<int32_t> history = {1, 3};
  EXPECT_EQ(models::Sampler(o).sample(logits, history), 2);  // 3 / 1.5 = 2 < 2.5
  o.penalty_last_n = 1;  // only the last token (3) is penalized
  EXPECT_EQ(models::Sampler(o).sample(logits, history), 1);
  models::SamplingOptions bad;
  bad.temperature = -1;
  WICK_EXPECT_ERROR(models::Sampler{bad}, Error, "temperature");
  bad = {};
  bad.top_p = 0;
  WICK_EXPECT_ERROR(models::Sampler{bad}, Error, "top_p");
  bad = {};
  bad.repetition_penalty = 0;
  WICK_EXPECT_ERROR(models::Sampler{bad}, Error, "repetition_penalty");
  bad = {};
  bad.presence_penalty = 2.5;
  WICK_EXPECT_ERROR(models::Sampler{bad}, Error, "presence_penalty");
  bad = {};
  bad.frequency_penalty = std::nan("");
  WICK_EXPECT_ERROR(models::Sampler{bad}, Error, "frequency_penalty");
}

// OpenAI's penalties: presence takes a fixed amount off each token seen, frequency that amount per
// time seen, both within the last penalty_last_n tokens, after the repetition penalty.
TEST(Sampler, PresenceAndFrequencyPenalties) {
  const std::vector<float> logits = {1.f, 3.f, 2.5f, 2.8f};
  const std::vector<int32_t> history = {3, 1, 1, 1};
  models::SamplingOptions o;
  EXPECT_EQ(models::Sampler(o).sample(logits, history), 1);
  o.presence_penalty = 0.4;  // 3 - 0.4 = 2.6 > 2.5; 2.8 - 0.4 = 2.4
  EXPECT_EQ(models::Sampler(o).sample(logits, history), 1);
  o.presence_penalty = 0;
  o.frequency_penalty = 0.2;  // 3 - 3 * 0.2 = 2.4 < 2.5 and 2.8 - 0.2 = 2.6
  EXPECT_EQ(models::Sampler(o).sample(logits, history), 3);
  o.penalty_last_n = 2;  // only {1, 1}: 3 - 0.4 = 2.6 < 2.8
  EXPECT_EQ(models::Sampler(o).sample(logits, history), 3);
  o.frequency_penalty = -2;  // a negative penalty favours what was seen
  o.penalty_last_n = 64;
  const std::vector<float> flat = {0.f, 0.f, 5.f, 0.f};
  EXPECT_EQ(models::Sampler(o).sample(flat, history), 1);
  EXPECT_TRUE(o.penalized());
  EXPECT_FALSE(models::SamplingOptions{}.penalized());
}

}  // namespace
}  // namespace wick::test
