// Mixtures of experts (Mixtral's layout in "llama" files, Qwen3-MoE's in "qwen3moe" ones; the
// decoder's blocks/moe.cpp) on tiny random GGUF files and checkpoints: the experts a token picks
// and their weights against a dense MLP that computes the same sum, decoding token by token against
// the whole sequence, sequences of a batch apart, block-format experts, checkpoints' names against
// GGUF's, a split over ranks, and files that describe no mixture wick runs. On every device present.
#include <random>

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
using models::LlamaModel;

const std::vector<int64_t> kTokens = {3, 17, 42, 8, 63, 0, 25, 11, 9};

LlamaModel load(const io::GgufWriter& w, Device device, DType dtype = DType::F32) {
  return LlamaModel::from_gguf(io::GgufFile::parse(w.bytes(), "tiny.gguf"), device, dtype);
}

Tensor logits(const LlamaModel& m, const std::vector<int64_t>& tokens = kTokens) {
  auto cache = m.make_cache(1, 32);
  return m.forward(Tensor::from_vector(tokens, {1, static_cast<int64_t>(tokens.size())}), cache);
}

Tiny mixtral() {
  Tiny m;
  m.experts = 4, m.experts_used = 2;
  return m;
}

Tiny qwen3_moe() {
  Tiny m;
  m.arch = "qwen3moe", m.experts = 6, m.experts_used = 3, m.hidden = 32;
  return m;
}

class MoeTest : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
};

// A router of zeros scores every expert the same: the first `used` experts are chosen (the lower
// index first among equal scores), each weighted 1/used (1/experts where the weights are not
// renormalized). Experts 0 and 1 made of the halves of a dense MLP of twice their width, their
// down weights scaled by the inverse of that weight, give that dense model's logits; the third
// expert, of other weights, must not be read.
TEST_P(MoeTest, TheChosenExpertsWeightedSumIsTheDenseMlpOfTheirHalves) {
  for (const bool renormalize : {true, false}) {
    SCOPED_TRACE(renormalize ? "renormalized" : "softmax weights");
    Tiny dense;
    dense.hidden = 96;
    io::GgufWriter w = tiny_model(dense);
    const io::GgufFile d = io::GgufFile::parse(w.bytes(), "dense.gguf");
    const int64_t h = dense.hidden / 2, experts = 3, used = 2;
    const float scale = renormalize ? 2.f : 3.f;  // the inverse of each chosen expert's weight
    w.set("llama.feed_forward_length", GgufValue::u32(static_cast<uint32_t>(h)));
    w.set("llama.expert_count", GgufValue::u32(experts));
    w.set("llama.expert_used_count", GgufValue::u32(used));
    w.set("llama.expert_weights_norm", GgufValue::boolean(renormalize));
    const Tensor other = Tensor::rand_normal({1, h, dense.dim}, 0.0, 0.5);
    for (int64_t i = 0; i < dense.layers; ++i) {
      const std::string p = "blk." + std::to_string(i) + ".";
      auto read = [&](const char* name) { return d.tensor(*d.find_tensor(p + name + ".weight")); };
      w.add(p + "ffn_gate_inp.weight", Tensor::zeros({experts, dense.dim}));
      for (const char* part : {"ffn_gate", "ffn_up"}) {
        const Tensor t = read(part);
        w.add(p + part + "_exps.weight",
              cat({t.narrow(0, 0, h).unsqueeze(0), t.narrow(0, h, h).unsqueeze(0), other}, 0));
      }
      const Tensor down = read("ffn_down") * scale;
      w.add(p + "ffn_down_exps.weight",
            cat({down.narrow(1, 0, h).unsqueeze(0), down.narrow(1, h, h).unsqueeze(0), other.transpose(1, 2)}, 0));
    }
    const LlamaModel mixture = load(w, device()), mlp = load(tiny_model(dense), device());
    EXPECT_EQ(mixture.config().experts, experts);
    EXPECT_EQ(mixture.config().norm_topk, renormalize);
    const Tensor want = logits(mlp);
    EXPECT_LT(max_abs_diff(logits(mixture), want), 2e-5f * (1 + want.abs().max().item<float>()));
  }
}

// Decoding token by token gives the whole sequence's logits, and two sequences decoded together
// each one's alone (a token's experts do not depend on the others'); dense experts in f32 and
// bf16, and Q8_0 experts (stacked blocks) close to the dense ones they were made from.
TEST_P(MoeTest, StepsBatchesAndBlockFormatsAgree) {
  for (const Tiny& base : {mixtral(), qwen3_moe()}) {
    SCOPED_TRACE(base.arch);
    const LlamaModel m = load(tiny_model(base), device());
    const auto t = static_cast<int64_t>(kTokens.size());
    const Tensor whole = logits(m);
    auto cache = m.make_cache(1, 32);
    std::vector<Tensor> parts = {
        m.forward(Tensor::from_vector(std::vector<int64_t>(kTokens.begin(), kTokens.begin() + 4), {1, 4}), cache)};
    for (int64_t i = 4; i < t; ++i)
      parts.push_back(
          m.forward(Tensor::from_vector(std::vector<int64_t>{kTokens[static_cast<size_t>(i)]}, {1, 1}), cache));
    EXPECT_LT(max_abs_diff(whole, cat(parts, 1)), 1e-4f);

    const std::vector<int64_t> other = {5, 5, 60, 1, 2, 3, 4, 33, 7};
    std::vector<int64_t> both = kTokens;
    both.insert(both.end(), other.begin(), other.end());
    auto two = m.make_cache(2, 16);
    const Tensor batched = m.forward(Tensor::from_vector(both, {2, t}), two);
    EXPECT_LT(max_abs_diff(batched.narrow(0, 0, 1), whole), 1e-4f);
    EXPECT_LT(max_abs_diff(batched.narrow(0, 1, 1), logits(m, other)), 1e-4f);

    const Tensor bf16 = logits(load(tiny_model(base), device(), DType::BF16));
    const float top = whole.abs().max().item<float>();
    EXPECT_LT(max_abs_diff(bf16, whole), 0.05f * top);
    Tiny q = base;
    q.qtype = quant::QType::Q8_0;
    EXPECT_LT(max_abs_diff(logits(load(tiny_model(q), device())), whole), 0.05f * top);
  }
}

// Files of llama.cpp's older converter hold one tensor per expert (blk.N.ffn_gate.E.weight): the
// same weights give the stacked file's logits, dense and in Q8_0.
TEST_P(MoeTest, OneTensorPerExpertEqualsTheStackedTensors) {
  for (const std::optional<quant::QType> q :
       {std::optional<quant::QType>{}, std::optional<quant::QType>{quant::QType::Q8_0}}) {
    Tiny stacked = mixtral();
    stacked.qtype = q;
    Tiny apart = stacked;
    apart.expert_tensors = true;
    const io::GgufFile file = io::GgufFile::parse(tiny_model(apart).bytes(), "apart.gguf");
    ASSERT_NE(file.find_tensor("blk.1.ffn_down.3.weight"), nullptr);
    ASSERT_EQ(file.find_tensor("blk.1.ffn_down_exps.weight"), nullptr);
    EXPECT_EQ(max_abs_diff(logits(LlamaModel::from_gguf(file, device())), logits(load(tiny_model(stacked), device()))),
              0.f);
  }
}

// A checkpoint with transformers' names (Qwen3-MoE's mlp.gate and mlp.experts.E.gate_proj, up_proj,
// down_proj; Mixtral's block_sparse_moe.gate and experts.E.w1, w3, w2) gives the GGUF file's logits.
TEST_P(MoeTest, CheckpointEqualsGguf) {
  for (const Tiny& m : {mixtral(), qwen3_moe()}) {
    const bool qwen = m.arch == "qwen3moe";
    SCOPED_TRACE(m.arch);
    const io::GgufFile gguf = io::GgufFile::parse(tiny_model(m).bytes(), "tiny.gguf");
    const int64_t hd = m.dim / m.heads;
    io::SafetensorsWriter st;
    auto read = [&](const std::string& name) { return gguf.tensor(*gguf.find_tensor(name)); };
    auto put = [&](const std::string& theirs, const std::string& ours, int64_t heads = 0) {
      Tensor t = read(ours);
      // llama.cpp's converter moves each head's rows (i, i + hd/2) of a "llama" file next to each other.
      if (heads > 0 && !qwen)
        t = t.reshape({heads, hd / 2, 2, m.dim}).transpose(1, 2).contiguous().reshape({heads * hd, m.dim});
      st.add(theirs, t);
    };
    put("model.embed_tokens.weight", "token_embd.weight");
    for (int64_t i = 0; i < m.layers; ++i) {
      const std::string g = "blk." + std::to_string(i) + ".", h = "model.layers." + std::to_string(i) + ".";
      put(h + "input_layernorm.weight", g + "attn_norm.weight");
      put(h + "self_attn.q_proj.weight", g + "attn_q.weight", m.heads);
      put(h + "self_attn.k_proj.weight", g + "attn_k.weight", m.kv_heads);
      put(h + "self_attn.v_proj.weight", g + "attn_v.weight");
      if (qwen)
        for (const char* x : {"q", "k"}) put(h + "self_attn." + x + "_norm.weight", g + "attn_" + x + "_norm.weight");
      put(h + "self_attn.o_proj.weight", g + "attn_output.weight");
      put(h + "post_attention_layernorm.weight", g + "ffn_norm.weight");
      const std::string moe = h + (qwen ? "mlp." : "block_sparse_moe.");
      put(moe + "gate.weight", g + "ffn_gate_inp.weight");
      const std::pair<const char*, const char*> parts[] = {{"ffn_gate_exps", qwen ? "gate_proj" : "w1"},
                                                           {"ffn_up_exps", qwen ? "up_proj" : "w3"},
                                                           {"ffn_down_exps", qwen ? "down_proj" : "w2"}};
      for (const auto& [ours, theirs] : parts) {
        const Tensor all = read(g + ours + ".weight");
        for (int64_t e = 0; e < m.experts; ++e)
          st.add(detail::str_cat(moe, "experts.", e, ".", theirs, ".weight"),
                 all.narrow(0, e, 1).squeeze(0).contiguous());
      }
    }
    put("model.norm.weight", "output_norm.weight");
    put("lm_head.weight", "output.weight");
    TempDir dir;
    st.write(dir.file("model.safetensors"));
    dir.write(
        "config.json",
        detail::str_cat(R"({"model_type": ")", qwen ? "qwen3_moe" : "mixtral", R"(", "vocab_size": )", m.vocab,
                        R"(, "hidden_size": )", m.dim, R"(, "intermediate_size": )", qwen ? 3 * m.hidden : m.hidden,
                        R"(, "moe_intermediate_size": )", m.hidden, R"(, "num_hidden_layers": )", m.layers,
                        R"(, "num_attention_heads": )", m.heads, R"(, "num_key_value_heads": )", m.kv_heads,
                        qwen ? R"(, "num_experts": )" : R"(, "num_local_experts": )", m.experts,
                        R"(, "num_experts_per_tok": )", m.experts_used, R"(, "norm_topk_prob": true)",
                        R"(, "max_position_embeddings": )", m.context,
                        R"(, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": false})"));
    const LlamaModel a = LlamaModel::from_gguf(gguf, device());
    const LlamaModel b = LlamaModel::from_checkpoint(dir.path(), device());
    EXPECT_EQ(b.config().architecture, qwen ? "qwen3moe" : "llama");
    EXPECT_EQ(b.parameters(), a.parameters());
    EXPECT_LT(max_abs_diff(logits(a), logits(b)), 1e-4f);
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, MoeTest, ::testing::ValuesIn(devices()), device_name);

// Split over 2 CPU ranks (each expert's gate and up by rows, down by columns; the router whole on
// each), the model gives the whole model's logits and greedy tokens.
TEST(MoeTensorParallel, ASplitMixtureMatchesTheWholeModel) {
  for (Tiny m : {mixtral(), qwen3_moe()}) {
    m.dim = 128, m.heads = 8, m.kv_heads = 4, m.hidden = 64;
    const std::vector<uint8_t> bytes = tiny_model(m).bytes();
    const io::GgufFile file = io::GgufFile::parse(bytes, "tiny.gguf");
    const LlamaModel whole = LlamaModel::from_gguf(file, Device::cpu());
    const auto comms = dist::Communicator::local({Device::cpu(), Device::cpu()});
    std::vector<LlamaModel> parts;
    for (int r = 0; r < 2; ++r)
      parts.push_back(LlamaModel::from_gguf(file, Device::cpu(), DType::F32, comms[static_cast<size_t>(r)]));
    const Tensor want = logits(whole);
    std::vector<Tensor> got(2);
    dist::on_threads(2, [&](int r) { got[static_cast<size_t>(r)] = logits(parts[static_cast<size_t>(r)]); });
    for (const Tensor& g : got) EXPECT_LT(max_abs_diff(g, want), 2e-4f) << m.arch;
    models::GenerateOptions o;
    o.max_tokens = 8;
    const std::vector<std::vector<int32_t>> prompts = {{1, 17, 42, 8}};
    const models::GenerateResult alone = models::generate(whole, prompts, o);
    std::vector<models::GenerateResult> split(2);
    dist::on_threads(
        2, [&](int r) { split[static_cast<size_t>(r)] = models::generate(parts[static_cast<size_t>(r)], prompts, o); });
    for (const models::GenerateResult& s : split) EXPECT_EQ(s.tokens, alone.tokens) << m.arch;
  }
}

// Files that describe no mixture wick runs: FormatErrors naming the field or tensor, and
// NotSupportedErrors for checkpoints with dense MLPs on some layers.
TEST(MoeErrors, FilesThatDescribeNoMixtureAreRefusedByName) {
  Tiny m = mixtral();
  m.experts_used = 5;
  WICK_EXPECT_ERROR(load(tiny_model(m), Device::cpu()), io::FormatError, "experts_used", "5 experts per token of 4");
  m = mixtral();
  m.drop = "blk.1.ffn_up_exps.weight";
  WICK_EXPECT_ERROR(load(tiny_model(m), Device::cpu()), io::FormatError, "blk.1.ffn_up_exps.weight", "missing");
  io::GgufWriter w = tiny_model(qwen3_moe());
  w.set("qwen3moe.expert_count", GgufValue::u32(5));  // the file's tensors stack 6
  WICK_EXPECT_ERROR(load(w, Device::cpu()), io::FormatError, "blk.0.ffn_gate_inp.weight", "shape");
  Tiny none;
  none.arch = "qwen3moe";
  WICK_EXPECT_ERROR(load(tiny_model(none), Device::cpu()), io::FormatError, "qwen3moe.expert_count", "missing");

  TempDir dir;
  const std::string base = R"("vocab_size": 64, "hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 32,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128,
      "num_experts": 4, "num_experts_per_tok": 2)";
  dir.write("a.json", R"({"model_type": "qwen3_moe", "mlp_only_layers": [1], )" + base + "}");
  WICK_EXPECT_ERROR(models::LlamaConfig::from_json(dir.file("a.json")), NotSupportedError, "mlp_only_layers");
  dir.write("b.json", R"({"model_type": "qwen3_moe", "decoder_sparse_step": 2, )" + base + "}");
  WICK_EXPECT_ERROR(models::LlamaConfig::from_json(dir.file("b.json")), NotSupportedError, "decoder_sparse_step");
  dir.write("c.json", R"({"model_type": "qwen3_moe", )" + base + "}");
  const models::LlamaConfig c = models::LlamaConfig::from_json(dir.file("c.json"));
  EXPECT_EQ(c.hidden, 32);
  EXPECT_FALSE(c.norm_topk);  // transformers' default for Qwen3-MoE
  EXPECT_TRUE(c.qk_norm);
}

// The presets' weight counts are the released models' (Qwen3-30B-A3B 30,532,122,624; Mixtral
// 8x7B 46,702,792,704), and a random mixture reads a token's experts' share of the weights.
TEST(MoePresets, CountsAreTheReleasedModels) {
  EXPECT_EQ(models::LlamaConfig::preset("qwen3-30b-a3b").parameters(), 30532122624);
  EXPECT_EQ(models::LlamaConfig::preset("mixtral-8x7b").parameters(), 46702792704);
  models::LlamaConfig c = models::LlamaConfig::preset("qwen3-30b-a3b");
  c.vocab = 64, c.dim = 64, c.hidden = 32, c.layers = 2, c.heads = 4, c.kv_heads = 2, c.head_dim = 16, c.experts = 8;
  c.experts_used = 2;
  const LlamaModel m = LlamaModel::random(c);
  // Per layer: attention (64 x 64 x 2 + 64 x 32 x 2), the router, 2 of 8 experts (3 x 64 x 32 each).
  const int64_t layer = (64 * 64 * 2 + 64 * 32 * 2) + 8 * 64 + 2 * 3 * 64 * 32 + 2 * 64 + 2 * 16;
  EXPECT_EQ(m.weight_bytes(), 4 * (2 * layer + 64 + 64 * 64));
  EXPECT_EQ(logits(m).shape(), Shape({1, 9, 64}));
}

}  // namespace
}  // namespace wick::test
