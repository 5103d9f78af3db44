// Mixtures of experts (Mixtral's layout in "llama" files, Qwen3-MoE's in "qwen3moe" ones; the
// decoder's blocks/moe.cpp) on tiny random GGUF files and checkpoints: the experts a token picks
// and their weights against a dense MLP that computes the same sum, decoding token by token against
// the whole sequence, sequences of a batch apart, block-format experts, checkpoints' names against
// GGUF's, a split over ranks, and files that describe no mixture wick runs. On every device present.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "backend/registry.h"
#include "cpu/quant/qdot.h"
#include "models/tiny_model.h"
#include "test_util.h"
#include "wick/dist.h"
#include "wick/graph.h"
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

// While it lives, fresh allocations on `device` are filled with a poison pattern (the backend's
// testing aid), so that an output row a kernel leaves unwritten is not zero by chance.
class PoisonedAllocations {
 public:
  explicit PoisonedAllocations(Device device) : backend_(backend_for(device)) {
    backend_.set_alloc_check({.poison = true});
  }
  ~PoisonedAllocations() {
    backend_.synchronize();
    backend_.set_alloc_check({});
  }
  PoisonedAllocations(const PoisonedAllocations&) = delete;
  PoisonedAllocations& operator=(const PoisonedAllocations&) = delete;

 private:
  Backend& backend_;
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

// ---- the ops: nn::moe_route, nn::moe_combine, quant::qmatmul_grouped ---------------------------

// Scores with ties, a NaN and an all -inf row among normal values, rounded to `dtype`.
Tensor scores_with_ties(int64_t n, int64_t experts, DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 2.f);
  std::vector<float> v(static_cast<size_t>(n * experts));
  for (size_t i = 0; i < v.size(); ++i) v[i] = i % 5 == 0 ? std::round(normal(rng)) : normal(rng);
  if (n > 2 && experts > 2) {
    v[static_cast<size_t>(experts + 1)] = NAN;
    for (int64_t e = 0; e < experts; ++e) v[static_cast<size_t>(2 * experts + e)] = -INFINITY;
  }
  return Tensor::from_vector(v, {n, experts}).to_dtype(dtype);
}

// Each token's experts by the definition (the highest scores, the lower index first among equal
// ones, a NaN after every number) and their weights in double.
struct Routed {
  std::vector<int64_t> ids;
  std::vector<double> weights;
};
Routed route_by_definition(const std::vector<float>& s, int64_t n, int64_t experts, int64_t k, bool renormalize) {
  Routed r;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = s.data() + i * experts;
    std::vector<int64_t> order(static_cast<size_t>(experts));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      const bool na = std::isnan(row[a]), nb = std::isnan(row[b]);
      return na != nb ? nb : !na && row[a] > row[b];
    });
    double top = -INFINITY, sum = 0, picked = 0;
    for (int64_t e = 0; e < experts; ++e)
      if (!std::isnan(row[e])) top = std::max(top, double{row[e]});
    auto p = [&](int64_t e) { return std::isnan(row[e]) || std::isinf(top) ? 0.0 : std::exp(double{row[e]} - top); };
    for (int64_t e = 0; e < experts; ++e) sum += p(e);
    std::vector<int64_t> chosen(order.begin(), order.begin() + k);
    for (int64_t e : chosen) picked += p(e);
    std::sort(chosen.begin(), chosen.end());
    for (int64_t e : chosen) {
      r.ids.push_back(e);
      const double total = renormalize ? picked : sum;
      r.weights.push_back(total > 0 ? p(e) / total : 0.0);
    }
  }
  return r;
}

std::vector<int64_t> host_i64(const Tensor& t) { return t.to_device(Device::cpu()).to_vector<int64_t>(); }
// A float tensor's values on the host, widened exactly, for comparisons bit for bit.
std::vector<double> values(const Tensor& t) {
  return t.to_device(Device::cpu()).to_dtype(DType::F64).to_vector<double>();
}

// The experts chosen by the definition, the weights within 1e-6, and the pairs laid out expert by
// expert, tokens in order within each (tokens, slots, groups exactly as a counting sort gives them),
// for f32, bf16 and f16 scores, renormalized or not, from 1 token to 300 (tokens over several chunks
// of the GPU's layout), 4 to 300 experts (held in registers up to 256, read from memory past that),
// and k up to 32.
TEST_P(MoeTest, RouteChoosesAndLaysOutThePairsByDefinition) {
  struct Case {
    int64_t n, experts, k;
  };
  for (const Case c : {Case{1, 8, 2}, Case{5, 6, 3}, Case{37, 128, 8}, Case{300, 16, 4}, Case{3, 4, 4},
                       Case{70, 256, 8}, Case{33, 300, 6}, Case{2, 40, 32}})
    for (const bool renormalize : {true, false})
      for (const DType dtype : {DType::F32, DType::BF16, DType::F16}) {
        SCOPED_TRACE(::testing::Message() << c.n << " tokens, " << c.experts << " experts, k " << c.k << ", " << dtype
                                          << (renormalize ? ", renormalized" : ""));
        const Tensor scores = scores_with_ties(c.n, c.experts, dtype, static_cast<uint32_t>(c.n + c.experts));
        const std::vector<float> s = scores.to_dtype(DType::F32).to_vector<float>();
        const Routed want = route_by_definition(s, c.n, c.experts, c.k, renormalize);
        const nn::MoeRouting r = nn::moe_route(scores.to_device(device()), c.k, renormalize);
        ASSERT_EQ(r.ids.shape(), Shape({c.n, c.k}));
        EXPECT_EQ(host_i64(r.ids), want.ids);
        const std::vector<float> w = r.weights.to_device(Device::cpu()).to_vector<float>();
        for (size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(w[i], want.weights[i], 1e-6) << "pair " << i;
        // The layout: a stable counting sort of the pairs by expert.
        const int64_t pairs = c.n * c.k;
        std::vector<int64_t> tokens, slots(static_cast<size_t>(pairs)), groups;
        for (int64_t e = 0; e < c.experts; ++e) {
          const auto first = static_cast<int64_t>(tokens.size());
          for (int64_t q = 0; q < pairs; ++q)
            if (want.ids[static_cast<size_t>(q)] == e) {
              slots[static_cast<size_t>(q)] = static_cast<int64_t>(tokens.size());
              tokens.push_back(q / c.k);
            }
          if (static_cast<int64_t>(tokens.size()) > first)
            groups.insert(groups.end(), {e, first, static_cast<int64_t>(tokens.size())});
        }
        while (static_cast<int64_t>(groups.size()) < 3 * std::min(c.experts, pairs))
          groups.insert(groups.end(), {0, pairs, pairs});
        EXPECT_EQ(host_i64(r.tokens), tokens);
        EXPECT_EQ(host_i64(r.slots), slots);
        EXPECT_EQ(host_i64(r.groups), groups);
      }
  const Tensor s = Tensor::rand_normal({2, 4}, 0.0, 1.0, DType::F32, device());
  WICK_EXPECT_ERROR(nn::moe_route(s, 5, true), ShapeError, "moe_route", "k = 5", "4 experts");
  WICK_EXPECT_ERROR(nn::moe_route(s, 0, true), ShapeError, "moe_route", "k = 0");
  WICK_EXPECT_ERROR(nn::moe_route(s.reshape({8}), 1, true), ShapeError, "moe_route", "(tokens, experts)");
  EXPECT_EQ(nn::moe_route(s.narrow(0, 0, 0), 2, true).groups.shape(), Shape({0, 3}));
}

// Each token's rows weighted and added in the order of its experts: the same bits as the
// composition (a CPU's) in every dtype, and the sum by definition within rounding.
TEST_P(MoeTest, CombineAddsEachTokensWeightedRowsInOrder) {
  const int64_t n = 7, k = 3, d = 40;
  const nn::MoeRouting r = nn::moe_route(scores_with_ties(n, 6, DType::F32, 3).to_device(device()), k, true);
  nn::MoeRouting on_cpu = r;
  for (Tensor* t : {&on_cpu.ids, &on_cpu.weights, &on_cpu.tokens, &on_cpu.slots, &on_cpu.groups})
    *t = t->to_device(Device::cpu());
  for (const DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype);
    const Tensor y = Tensor::rand_normal({n * k, d}, 0.0, 1.0, dtype, device());
    const Tensor got = nn::moe_combine(y, r);
    ASSERT_EQ(got.shape(), Shape({n, d}));
    EXPECT_EQ(max_abs_diff(got, nn::moe_combine(y.to_device(Device::cpu()), on_cpu)), 0.f);
    const std::vector<float> yv = y.to_dtype(DType::F32).to_device(Device::cpu()).to_vector<float>();
    const std::vector<float> w = on_cpu.weights.to_vector<float>();
    const std::vector<int64_t> slots = on_cpu.slots.to_vector<int64_t>();
    const std::vector<float> g = got.to_dtype(DType::F32).to_device(Device::cpu()).to_vector<float>();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < d; ++c) {
        double want = 0;
        for (int64_t j = 0; j < k; ++j)
          want += double{w[static_cast<size_t>(i * k + j)]} *
                  yv[static_cast<size_t>(slots[static_cast<size_t>(i * k + j)] * d + c)];
        EXPECT_NEAR(g[static_cast<size_t>(i * d + c)], want,
                    (dtype == DType::F32 ? 1e-5 : 2e-2) * (1 + std::abs(want)));
      }
  }
  const Tensor y = Tensor::rand_normal({n * k + 1, d}, 0.0, 1.0, DType::F32, device());
  WICK_EXPECT_ERROR(nn::moe_combine(y, r), ShapeError, "moe_combine", "21");
  nn::MoeRouting bad = r;
  bad.slots = Tensor::full({n * k}, Scalar(int64_t{n * k}), DType::I64, device());
  WICK_EXPECT_ERROR((void)nn::moe_combine(y.narrow(0, 0, n * k), bad).to_device(Device::cpu()), IndexError, "21");
}

// Every expert's rows times its own weight, for the formats of the kernels (Q4_K's own among them),
// x in f32 and bf16: each row as qmatmul gives it alone (within float rounding), from one token to
// seventy (past the GPU's one-launch bound: each group's product on its own), a group past the
// bound it was given still computed whole; rows no group names are zeros; a group out of range is
// an IndexError. Rows of 256 values are rounded to 8 bits by each GPU block; of 4352 (136 units,
// as a Mixtral down product's 14336), at one or a few tokens, once for all blocks beforehand.
TEST_P(MoeTest, GroupedProductsAreEachRowsExpertsProduct) {
  const int64_t experts = 6, rows = 64;
  for (const int64_t cols : {int64_t{256}, int64_t{4352}})
    for (const quant::QType q : {quant::QType::Q8_0, quant::QType::Q4_0, quant::QType::Q4_K, quant::QType::Q6_K}) {
      const quant::QTensor w =
          quant::quantize(Tensor::rand_normal({experts * rows, cols}, 0.0, 1.0, DType::F32), q).to_device(device());
      std::vector<quant::QTensor> each;
      for (int64_t e = 0; e < experts; ++e) each.emplace_back(q, rows, cols, w.bytes().narrow(0, e * rows, rows));
      struct Case {
        int64_t n, k, max_rows;
      };
      for (const Case c : {Case{1, 2, 1}, Case{5, 3, 5}, Case{40, 2, 40}, Case{70, 3, 70}, Case{30, 2, 4}})
        for (const DType dtype : {DType::F32, DType::BF16}) {
          if (cols > 256 && c.n > 5) continue;  // the long rows at one and a few tokens
          SCOPED_TRACE(::testing::Message() << q << ", " << cols << " columns, " << c.n << " tokens, k " << c.k
                                            << ", max_rows " << c.max_rows << ", " << dtype);
          const nn::MoeRouting r =
              nn::moe_route(scores_with_ties(c.n, experts, DType::F32, 9).to_device(device()), c.k, true);
          const Tensor x = Tensor::rand_normal({c.n, cols}, 0.0, 1.0, dtype, device()).index_select(r.tokens, 0);
          const Tensor got = quant::qmatmul_grouped(x, w, experts, r.groups, c.max_rows);
          ASSERT_EQ(got.shape(), Shape({c.n * c.k, rows}));
          std::vector<Tensor> want;
          const std::vector<int64_t> g = host_i64(r.groups);
          for (size_t i = 0; i < g.size(); i += 3)
            for (int64_t row = g[i + 1]; row < g[i + 2]; ++row)
              want.push_back(quant::qmatmul(x.narrow(0, row, 1), each[static_cast<size_t>(g[i])]));
          const Tensor all = cat(want, 0);
          // Each row alone rounds x to 8 bits as the grouped kernel does; many rows of one expert go
          // through the dequantized weight and the GEMM, which does not, or (the CPU's AVX2 kernels,
          // K-quants) round x per super-block of 256 values, as qmatmul of those rows does. A GPU's
          // Q4_K groups of 4 rows or more a launch round it per super-block too (the 8-bit matrix
          // units' kernel), and a row alone per 32 values.
          int64_t largest = 0;
          for (size_t i = 0; i < g.size(); i += 3) largest = std::max(largest, g[i + 2] - g[i + 1]);
          const bool superblock = device().is_cpu()
                                      ? cpu::qdot::active_isa() == cpu::qdot::Isa::Avx2 &&
                                            (q == quant::QType::Q4_K || q == quant::QType::Q6_K) && largest > 8
                                      : q == quant::QType::Q4_K && c.max_rows >= 4;
          const float tolerance = (c.max_rows > 64 || superblock ? 3e-2f
                                   : dtype == DType::F32         ? 1e-4f
                                                                 : 1e-2f) *
                                  (1 + all.to_dtype(DType::F32).abs().max().item<float>());
          EXPECT_LT(max_abs_diff(got, all), tolerance);
        }
      const Tensor x = Tensor::rand_normal({6, cols}, 0.0, 1.0, DType::F32, device());
      const Tensor some = Tensor::from_vector(std::vector<int64_t>{2, 0, 3, 0, 6, 6}, {2, 3}, device());
      const Tensor got = [&] {
        const PoisonedAllocations poisoned(device());
        return quant::qmatmul_grouped(x, w, experts, some, 3).to_device(Device::cpu());
      }();
      EXPECT_LT(max_abs_diff(got.narrow(0, 0, 3), quant::qmatmul(x.narrow(0, 0, 3), each[2])),
                1e-3f * static_cast<float>(cols));
      EXPECT_EQ(got.narrow(0, 3, 3).abs().max().item<float>(), 0.f);
      const Tensor bad = Tensor::from_vector(std::vector<int64_t>{9, 0, 2}, {1, 3}, device());
      WICK_EXPECT_ERROR((void)quant::qmatmul_grouped(x, w, experts, bad, 3).to_device(Device::cpu()), IndexError,
                        "qmatmul_grouped", "expert", "9");
      const Tensor past = Tensor::from_vector(std::vector<int64_t>{1, 4, 7}, {1, 3}, device());
      WICK_EXPECT_ERROR((void)quant::qmatmul_grouped(x, w, experts, past, 3).to_device(Device::cpu()), IndexError,
                        "qmatmul_grouped", "7");
    }
  const quant::QTensor w = quant::quantize(Tensor::rand_normal({70, 32}, 0.0, 1.0, DType::F32), quant::QType::Q8_0);
  const Tensor x = Tensor::rand_normal({2, 32}, 0.0, 1.0, DType::F32);
  WICK_EXPECT_ERROR(quant::qmatmul_grouped(x, w, 4, Tensor::zeros({1, 3}, DType::I64), 1), ShapeError,
                    "qmatmul_grouped", "4 experts");
  WICK_EXPECT_ERROR(quant::qmatmul_grouped(x, w, 7, Tensor::zeros({1, 2}, DType::I64), 1), ShapeError,
                    "qmatmul_grouped", "(g, 3)");
}

// nn::matmul_grouped, the products of dense experts: each group's rows are that expert's matmul
// (within f32's or the half's rounding), rows no group names are zeros, groups of 1 to 70 rows (up
// to 8 rows a pass and several passes a group on a GPU; past 64, or with rows of k not whole 16-byte
// words, each group's matmul), f32, f16 and bf16; a recorded call with a group past 64 rows against
// the same call outside a recording; and bad groups and operands refused by name.
TEST_P(MoeTest, DenseGroupedProductsAreEachRowsExpertsProduct) {
  const int64_t experts = 6, rows = 64;
  struct Case {
    int64_t n, k, max_rows, cols;
  };
  for (const Case c : {Case{1, 2, 1, 256}, Case{5, 3, 5, 256}, Case{40, 2, 40, 512}, Case{70, 3, 70, 256},
                       Case{30, 2, 4, 256}, Case{6, 2, 6, 36}})
    for (const DType dtype : {DType::F32, DType::F16, DType::BF16}) {
      SCOPED_TRACE(::testing::Message() << c.n << " tokens, k " << c.k << ", max_rows " << c.max_rows << ", " << c.cols
                                        << " columns, " << dtype);
      const Tensor w = Tensor::rand_normal({experts * rows, c.cols}, 0.0, 1.0, dtype, device());
      const nn::MoeRouting r =
          nn::moe_route(scores_with_ties(c.n, experts, DType::F32, 5).to_device(device()), c.k, true);
      const Tensor x = Tensor::rand_normal({c.n, c.cols}, 0.0, 1.0, dtype, device()).index_select(r.tokens, 0);
      const Tensor got = nn::matmul_grouped(x, w, experts, r.groups, c.max_rows);
      ASSERT_EQ(got.shape(), Shape({c.n * c.k, rows}));
      ASSERT_EQ(got.dtype(), dtype);
      const Tensor xf = x.to_dtype(DType::F32).to_device(Device::cpu()),
                   wf = w.to_dtype(DType::F32).to_device(Device::cpu());
      std::vector<Tensor> want;
      const std::vector<int64_t> g = host_i64(r.groups);
      for (size_t i = 0; i < g.size(); i += 3)
        for (int64_t row = g[i + 1]; row < g[i + 2]; ++row)
          want.push_back(xf.narrow(0, row, 1).matmul(wf.narrow(0, g[i] * rows, rows).t()));
      const Tensor all = cat(want, 0);
      const float tolerance = (dtype == DType::F32 ? 1e-4f : 1e-2f) * (1 + all.abs().max().item<float>());
      EXPECT_LT(max_abs_diff(got.to_dtype(DType::F32), all), tolerance);
    }
  const Tensor w = Tensor::rand_normal({experts * rows, 256}, 0.0, 1.0, DType::BF16, device());
  const Tensor x = Tensor::rand_normal({6, 256}, 0.0, 1.0, DType::BF16, device());
  const Tensor some = Tensor::from_vector(std::vector<int64_t>{2, 0, 3, 0, 6, 6}, {2, 3}, device());
  const Tensor got = [&] {
    const PoisonedAllocations poisoned(device());
    return nn::matmul_grouped(x, w, experts, some, 3).to_dtype(DType::F32).to_device(Device::cpu());
  }();
  const Tensor first =
      x.narrow(0, 0, 3).to_dtype(DType::F32).matmul(w.narrow(0, 2 * rows, rows).to_dtype(DType::F32).t());
  EXPECT_LT(max_abs_diff(got.narrow(0, 0, 3), first.to_device(Device::cpu())), 1e-2f * 16);
  EXPECT_EQ(got.narrow(0, 3, 3).abs().max().item<float>(), 0.f);
  // A group of 70 rows in a recorded call, where nothing may wait for the host.
  const Tensor many = Tensor::rand_normal({100, 256}, 0.0, 1.0, DType::BF16, device());
  const Tensor groups = Tensor::from_vector(std::vector<int64_t>{4, 0, 70, 1, 70, 100}, {2, 3}, device());
  Tensor recorded = Tensor::zeros({100, rows}, DType::BF16, device());
  const Graph graph =
      Graph::record(device(), [&] { recorded.copy_from(nn::matmul_grouped(many, w, experts, groups, 100)); });
  graph.replay();
  const Tensor eager = nn::matmul_grouped(many, w, experts, groups, 100);
  EXPECT_LT(max_abs_diff(recorded, eager), 1e-2f * (1 + eager.to_dtype(DType::F32).abs().max().item<float>()));
  // Bad groups (at the next wait on a GPU) and operands.
  const Tensor bad = Tensor::from_vector(std::vector<int64_t>{9, 0, 2}, {1, 3}, device());
  WICK_EXPECT_ERROR((void)nn::matmul_grouped(x, w, experts, bad, 3).to_device(Device::cpu()), IndexError,
                    "matmul_grouped", "expert", "9");
  const Tensor past = Tensor::from_vector(std::vector<int64_t>{1, 4, 7}, {1, 3}, device());
  WICK_EXPECT_ERROR((void)nn::matmul_grouped(x, w, experts, past, 3).to_device(Device::cpu()), IndexError,
                    "matmul_grouped", "7");
  WICK_EXPECT_ERROR(nn::matmul_grouped(x, w, 5, some, 3), ShapeError, "matmul_grouped", "5 experts");
  WICK_EXPECT_ERROR(nn::matmul_grouped(x, w, experts, Tensor::zeros({1, 2}, DType::I64, device()), 3), ShapeError,
                    "matmul_grouped", "(g, 3)");
  WICK_EXPECT_ERROR(nn::matmul_grouped(x.to_dtype(DType::F32), w, experts, some, 3), DTypeError, "matmul_grouped",
                    "dtype of x");
  WICK_EXPECT_ERROR(nn::matmul_grouped(x.narrow(1, 0, 128), w, experts, some, 3), ShapeError, "matmul_grouped",
                    "columns");
  WICK_EXPECT_ERROR(nn::matmul_grouped(x.to_dtype(DType::I32), w, experts, some, 3), DTypeError, "matmul_grouped");
}

// Q4_K groups of every size the GPU's 8-bit matrix-unit kernel holds (up to 8, 16, 32 and 64 rows
// of x a chunk), weights of a partial tile (96 rows) and of several, k long enough to be split into
// ranges (the larger stack), an odd count of rows of 3 blocks (taken two a group of lanes), empty
// groups, rows no group names, a group of more rows than max_rows, and a recorded call whose groups
// pass 64 rows (more than one chunk): each group's rows are that group's qmatmul (x rounded to 8 bits
// alike from 4 rows to 32, per super-block: within the order of the float sums) and the exact
// dequantized product (within the rounding of x). On the CPU the same calls check its grouped
// kernel.
TEST_P(MoeTest, GroupedQ4KProductsOfEveryGroupSize) {
  struct Case {
    int64_t experts, rows, cols, p;
    std::vector<int64_t> groups;  // [expert, first, end) rows
    int64_t max_rows;
  };
  const std::vector<Case> cases = {
      {4, 96, 1024, 24, {3, 0, 5, 1, 5, 5, 0, 5, 6, 2, 6, 22}, 16},
      {4, 96, 1024, 40, {2, 0, 30, 0, 30, 31, 3, 31, 38}, 32},
      {3, 512, 2048, 66, {1, 0, 17, 0, 17, 17, 2, 17, 64}, 64},
      // Rows of 3 blocks (Qwen3-30B-A3B's down product), two weight rows a group of lanes on a GPU,
      // an odd count of them: each expert's last pair half its own.
      {3, 77, 768, 20, {2, 0, 1, 0, 1, 9, 1, 9, 20}, 16},
      // max_rows short of a group's rows: the group is still computed whole.
      {4, 96, 512, 30, {1, 0, 20, 3, 20, 27}, 5},
  };
  for (const Case& c : cases)
    for (const DType dtype : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(::testing::Message() << c.rows << " x " << c.cols << ", " << c.p << " rows of x, max_rows "
                                        << c.max_rows << ", " << dtype);
      const Tensor dense = Tensor::rand_normal({c.experts * c.rows, c.cols}, 0.0, 1.0, DType::F32);
      const quant::QTensor w = quant::quantize(dense, quant::QType::Q4_K).to_device(device());
      const Tensor wf = quant::dequantize(w).to_device(Device::cpu());
      const Tensor x = Tensor::rand_normal({c.p, c.cols}, 0.0, 1.0, dtype, device());
      const auto g = static_cast<int64_t>(c.groups.size() / 3);
      const Tensor groups = Tensor::from_vector(c.groups, {g, 3}, device());
      const Tensor got = [&] {
        const PoisonedAllocations poisoned(device());
        return quant::qmatmul_grouped(x, w, c.experts, groups, c.max_rows).to_dtype(DType::F32);
      }();
      const Tensor xf = x.to_dtype(DType::F32).to_device(Device::cpu());
      Tensor covered = Tensor::zeros({c.p, c.rows}, DType::F32);
      for (int64_t i = 0; i < g; ++i) {
        const int64_t e = c.groups[3 * i], first = c.groups[3 * i + 1], m = c.groups[3 * i + 2] - first;
        if (m == 0) continue;
        const quant::QTensor we(quant::QType::Q4_K, c.rows, c.cols, w.bytes().narrow(0, e * c.rows, c.rows));
        const Tensor mine = got.narrow(0, first, m).to_device(Device::cpu());
        const Tensor alone = quant::qmatmul(x.narrow(0, first, m), we).to_dtype(DType::F32).to_device(Device::cpu());
        const Tensor exact = xf.narrow(0, first, m).matmul(wf.narrow(0, e * c.rows, c.rows).t());
        const float scale = 1 + exact.abs().max().item<float>();
        // Past 32 rows a GPU's qmatmul takes the dequantized weight and the GEMM, which leaves x
        // unrounded; below 4 the integer dots, which round it per 32 values.
        const bool rounded_alike = device() == Device::cpu() || (m >= 4 && m <= 32);
        const float apart = !rounded_alike ? 3e-2f : dtype == DType::F32 ? 1e-4f : 1e-2f;
        EXPECT_LT(max_abs_diff(mine, alone), apart * scale) << "group " << i;
        EXPECT_LT(max_abs_diff(mine, exact), 3e-2f * scale) << "group " << i;
        covered.narrow(0, first, m).copy_from(Tensor::ones({m, c.rows}, DType::F32));
      }
      // Rows no group names are zeros.
      EXPECT_EQ((got.to_device(Device::cpu()) * (covered * -1.0 + 1.0)).abs().max().item<float>(), 0.f);
    }
  // Groups of 70 rows in a recorded call (nothing may wait for the host there, so every max_rows is
  // taken on the device): against the same call outside a recording, which reads the groups on the
  // host and multiplies each group's rows as qmatmul does.
  const quant::QTensor w =
      quant::quantize(Tensor::rand_normal({2 * 64, 512}, 0.0, 1.0, DType::F32), quant::QType::Q4_K).to_device(device());
  const Tensor x = Tensor::rand_normal({100, 512}, 0.0, 1.0, DType::BF16, device());
  const Tensor groups = Tensor::from_vector(std::vector<int64_t>{1, 0, 70, 0, 70, 100}, {2, 3}, device());
  Tensor recorded = Tensor::zeros({100, 64}, DType::BF16, device());
  const Graph graph =
      Graph::record(device(), [&] { recorded.copy_from(quant::qmatmul_grouped(x, w, 2, groups, 100)); });
  graph.replay();
  const Tensor eager = quant::qmatmul_grouped(x, w, 2, groups, 100);
  EXPECT_LT(max_abs_diff(recorded, eager), 3e-2f * (1 + eager.to_dtype(DType::F32).abs().max().item<float>()));
}

// One token's row expanded over its k pairs (rows 0 apart, as the model passes a decode step of one
// token) gives the bits of the gathered rows, read in place: rows of x rounded in each block (256
// columns) and rounded once for all blocks (4352), every kernel's format, and a group of two rows
// under max_rows 1, in a recorded call too.
TEST_P(MoeTest, OneTokensRowStandsForAllItsPairs) {
  const int64_t experts = 5, rows = 32, k = 3;
  for (const int64_t cols : {int64_t{256}, int64_t{4352}})
    for (const quant::QType q : {quant::QType::Q8_0, quant::QType::Q4_0, quant::QType::Q4_K, quant::QType::Q6_K})
      for (const DType dtype : {DType::F32, DType::BF16}) {
        SCOPED_TRACE(::testing::Message() << q << ", " << cols << " columns, " << dtype);
        const quant::QTensor w =
            quant::quantize(Tensor::rand_normal({experts * rows, cols}, 0.0, 1.0, DType::F32), q).to_device(device());
        const Tensor x = Tensor::rand_normal({1, cols}, 0.0, 1.0, dtype, device());
        const nn::MoeRouting r =
            nn::moe_route(scores_with_ties(1, experts, DType::F32, 3).to_device(device()), k, true);
        const Tensor gathered = x.index_select(r.tokens, 0), expanded = x.broadcast_as({k, cols});
        const Tensor want = quant::qmatmul_grouped(gathered, w, experts, r.groups, 1);
        const Tensor got = [&] {
          const PoisonedAllocations poisoned(device());
          return quant::qmatmul_grouped(expanded, w, experts, r.groups, 1);
        }();
        EXPECT_EQ(values(got), values(want));
        Tensor recorded = Tensor::zeros({k, rows}, dtype, device());
        const Graph graph = Graph::record(
            device(), [&] { recorded.copy_from(quant::qmatmul_grouped(expanded, w, experts, r.groups, 1)); });
        graph.replay();
        EXPECT_EQ(values(recorded), values(want));
        // A group of two rows, one of one, past max_rows 1: each row still the one row's product.
        const Tensor groups = Tensor::from_vector(std::vector<int64_t>{4, 0, 2, 1, 2, 3}, {2, 3}, device());
        EXPECT_EQ(values(quant::qmatmul_grouped(expanded, w, experts, groups, 1)),
                  values(quant::qmatmul_grouped(x.broadcast_as({k, cols}).contiguous(), w, experts, groups, 1)));
      }
}

INSTANTIATE_TEST_SUITE_P(Devices, MoeTest, ::testing::ValuesIn(devices()), device_name);

// On the CPU the grouped product is each group's qmatmul bit for bit (one parallel region for all
// groups, each group's rows of x rounded on their own): plain and arranged weights (a stack of
// experts of whole groups of the arrangement, Q4_0's on machines that arrange it), groups of 1 to
// 20 rows (the few-row kernels and the panels), f32 and bf16, rows no group names zeros; and so in
// batch-invariant mode.
// Batch-invariant mode on this thread for one scope, an ASSERT's early return included.
struct InvariantScope {
  explicit InvariantScope(bool on) : was(set_batch_invariant(on)) {}
  ~InvariantScope() { set_batch_invariant(was); }
  InvariantScope(const InvariantScope&) = delete;
  InvariantScope& operator=(const InvariantScope&) = delete;
  bool was;
};

TEST(MoeCpu, GroupedProductsAreEachGroupsQmatmulBitForBit) {
  const int64_t experts = 6, rows = 2 * quant::QTensor::kArrangedRows, cols = 256;
  const std::vector<int64_t> groups = {2, 0, 1, 0, 1, 9, 5, 9, 29, 3, 31, 32, 0, 32, 32};  // rows 29, 30: none
  // The machine's best kernels, and AVX2's (which arrange Q4_K and Q6_K too) where it has them.
  namespace qdot = cpu::qdot;
  std::vector<qdot::Isa> isas = {qdot::best_isa()};
  if (qdot::best_isa() > qdot::Isa::Avx2) isas.push_back(qdot::Isa::Avx2);
  for (const qdot::Isa isa : isas)
    for (const bool invariant : {false, true})
      for (const quant::QType q : {quant::QType::Q4_0, quant::QType::Q8_0, quant::QType::Q4_K, quant::QType::Q6_K})
        for (const bool arranged : {false, true})
          for (const DType dtype : {DType::F32, DType::BF16}) {
            SCOPED_TRACE(::testing::Message() << q << (arranged ? ", arranged" : "") << ", " << dtype
                                              << (invariant ? ", batch-invariant" : "") << ", " << qdot::isa_name(isa));
            const InvariantScope mode(invariant);
            const qdot::Isa was = qdot::set_isa_limit(isa);
            const quant::QTensor plain = quant::quantize(Tensor::rand_normal({experts * rows, cols}, 0.0, 1.0), q);
            const quant::QTensor w = arranged ? plain.arrange() : plain;
            const Tensor x = Tensor::rand_normal({32, cols}, 0.0, 1.0, dtype);
            const Tensor got =
                quant::qmatmul_grouped(x, w, experts, Tensor::from_vector(groups, {5, 3}), 20).to_dtype(DType::F32);
            ASSERT_EQ(got.shape(), Shape({32, rows}));
            for (size_t i = 0; i + 3 <= groups.size(); i += 3) {
              const int64_t e = groups[i], first = groups[i + 1], m = groups[i + 2] - first;
              if (m == 0) continue;
              quant::QTensor each(q, rows, cols, plain.bytes().narrow(0, e * rows, rows));
              if (arranged) each = each.arrange();
              const Tensor want = quant::qmatmul(x.narrow(0, first, m), each).to_dtype(DType::F32);
              EXPECT_EQ(got.narrow(0, first, m).to_vector<float>(), want.to_vector<float>()) << "group " << i / 3;
            }
            EXPECT_EQ(got.narrow(0, 29, 2).abs().max().item<float>(), 0.f);
            qdot::set_isa_limit(was);
          }
}

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
