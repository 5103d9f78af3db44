// The model loader, the forward pass, decode steps and generation against hostile files,
// configurations and token ids (include/wick/models/*): each refused with an error that names the
// file, the key or the argument, never a model that loads and computes NaN or meaningless logits.
// Run on every device present.
#include <cmath>
#include <limits>

#include "models/tiny_model.h"
#include "test_util.h"
#include "wick/io.h"
#include "wick/models/generate.h"
#include "wick/models/llama.h"
#include "wick/models/tokenizer.h"

namespace wick::test {
namespace {

using io::FormatError;
using io::GgufValue;
using io::GgufWriter;
using models::LlamaConfig;
using models::LlamaModel;

LlamaModel from(const GgufWriter& w, Device device = Device::cpu()) {
  return LlamaModel::from_gguf(io::GgufFile::parse(w.bytes(), "tiny.gguf"), device);
}

class HostileModel : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
};

TEST(HostileConfig, AWidthBelowTheHeadCountHasNoHeadSize) {
  Tiny narrow;
  narrow.dim = 2;  // four heads of 2 / 4 = 0 features
  narrow.hidden = 4;
  WICK_EXPECT_ERROR(from(tiny_model(narrow)), FormatError, "tiny.gguf", "llama.embedding_length",
                    "less than the 4 heads");
  TempDir dir;
  dir.write("config.json", R"({"model_type": "llama", "vocab_size": 8, "hidden_size": 2, "intermediate_size": 4,
      "num_hidden_layers": 1, "num_attention_heads": 4, "max_position_embeddings": 64})");
  WICK_EXPECT_ERROR(LlamaConfig::from_json(dir.file("config.json")), FormatError, "config.json", "hidden_size",
                    "less than the 4 heads");
}

TEST(HostileConfig, SizesAndNumbersOfConfigurationsAreChecked) {
  LlamaConfig c = LlamaConfig::preset("llama3-1b");
  c.layers = 2;
  EXPECT_NO_THROW(c.check("cfg"));
  auto refused = [&](auto change, const char* field) {
    LlamaConfig bad = c;
    change(bad);
    WICK_EXPECT_ERROR(bad.check("cfg"), FormatError, "cfg", field);
    WICK_EXPECT_ERROR(LlamaModel::random(bad), FormatError, "random", field);
  };
  refused([](LlamaConfig& x) { x.head_dim = 0; }, "head_dim");
  refused([](LlamaConfig& x) { x.layers = int64_t{1} << 40; }, "layers");
  refused([](LlamaConfig& x) { x.layers = 0; }, "layers");
  refused([](LlamaConfig& x) { x.rope_theta = 0; }, "rope_theta");
  refused([](LlamaConfig& x) { x.rope_theta = std::nan(""); }, "rope_theta");
  refused([](LlamaConfig& x) { x.rms_eps = -1; }, "rms_eps");
  refused([](LlamaConfig& x) { x.rope_scaling.factor = std::numeric_limits<double>::infinity(); },
          "rope_scaling.factor");
  refused([](LlamaConfig& x) { x.kv_heads = 3; }, "kv_heads");
  refused([](LlamaConfig& x) { x.head_dim = 3; }, "odd");
  refused([](LlamaConfig& x) { x.vocab = -5; }, "vocab");
  // Sizes each within 2^40 whose weights pass 2^62: parameters() saturates instead of overflowing.
  LlamaConfig huge = c;
  huge.vocab = huge.dim = huge.hidden = int64_t{1} << 40;
  EXPECT_GT(huge.parameters(), int64_t{1} << 62);
  WICK_EXPECT_ERROR(huge.check("cfg"), FormatError, "2^62 weights");
  // A GGUF file of 2^40 layers: refused before a loop over them.
  GgufWriter w = tiny_model(Tiny{});
  w.set("llama.block_count", GgufValue::u64(uint64_t{1} << 40));
  WICK_EXPECT_ERROR(from(w), FormatError, "tiny.gguf", "layers");
}

TEST(HostileConfig, WrongTypedMetadataNamesTheFile) {
  GgufWriter w = tiny_model(Tiny{});
  w.set("llama.embedding_length", GgufValue::string("64"));
  WICK_EXPECT_ERROR(from(w), FormatError, "tiny.gguf", "llama.embedding_length", "string");
  w = tiny_model(Tiny{});
  w.set("llama.rope.freq_base", GgufValue::u32(10000));
  WICK_EXPECT_ERROR(from(w), FormatError, "tiny.gguf", "llama.rope.freq_base");
  w = tiny_model(Tiny{});
  w.set("general.architecture", GgufValue::u32(1));
  WICK_EXPECT_ERROR(from(w), FormatError, "tiny.gguf", "general.architecture");
}

TEST(HostileConfig, AVocabularyOtherThanTheTokenizersIsRefused) {
  GgufWriter w = tiny_model(Tiny{});  // 64 logits
  io::GgufArray tokens{io::GgufType::String, {}};
  for (int i = 0; i < 16; ++i) tokens.items.push_back(GgufValue::string(detail::str_cat("t", i)));
  w.set("tokenizer.ggml.tokens", GgufValue::array(tokens));
  WICK_EXPECT_ERROR(from(w), FormatError, "tiny.gguf", "llama.vocab_size", "64 logits for the 16 tokens");
}

TEST_P(HostileModel, WeightsOfIntegersAreRefused) {
  for (const std::string name : {"blk.0.attn_q.weight", "blk.1.ffn_norm.weight", "token_embd.weight"}) {
    Tiny ints;
    ints.ints = name;
    WICK_EXPECT_ERROR(from(tiny_model(ints), device()), FormatError, "tiny.gguf", name, "i32");
  }
}

TEST_P(HostileModel, RopeFactorsMustBeFiniteAndPositive) {
  for (const float bad : {0.f, -1.f, std::nanf(""), std::numeric_limits<float>::infinity()}) {
    GgufWriter w = tiny_model(Tiny{});
    std::vector<float> factors(8, 1.f);  // head_dim 16: 8 pairs
    factors[5] = bad;
    w.add("rope_freqs.weight", Tensor::from_vector(factors, {8}));
    WICK_EXPECT_ERROR(from(w, device()), FormatError, "tiny.gguf", "rope_freqs.weight", "pair 5");
  }
}

// Ids outside the vocabulary, the gathers' skip sentinels (i64's and u32's maxima) among them.
TEST_P(HostileModel, TokensOutsideTheVocabularyAreIndexErrors) {
  const LlamaModel model = from(tiny_model(Tiny{}), device());
  const int64_t i64_max = std::numeric_limits<int64_t>::max();
  for (const int64_t id : {int64_t{64}, int64_t{-1}, i64_max}) {
    auto cache = model.make_cache(1, 8);
    WICK_EXPECT_ERROR(model.forward(Tensor::from_vector(std::vector<int64_t>{3, id}, {1, 2}), cache), IndexError,
                      "forward", detail::str_cat("token ", id), "vocabulary of 64");
    // On the model's device: the gather refuses it when the device is next waited for.
    auto device_cache = model.make_cache(1, 8);
    const Tensor on_device = Tensor::from_vector(std::vector<int64_t>{3, id}, {1, 2}, device());
    WICK_EXPECT_ERROR((void)model.forward(on_device, device_cache).to_vector<float>(), IndexError);
  }
  auto cache = model.make_cache(1, 8);
  const uint32_t u32_max = std::numeric_limits<uint32_t>::max();
  WICK_EXPECT_ERROR(model.forward(Tensor::from_vector(std::vector<uint32_t>{u32_max}, {1, 1}), cache), IndexError,
                    "token 4294967295");
  {
    auto device_cache = model.make_cache(1, 8);
    const Tensor on_device = Tensor::from_vector(std::vector<uint32_t>{u32_max}, {1, 1}, device());
    WICK_EXPECT_ERROR((void)model.forward(on_device, device_cache).to_vector<float>(), IndexError);
  }
  auto step_cache = model.make_cache(1, 8);
  models::DecodeGraph graph(model, step_cache);
  WICK_EXPECT_ERROR(graph.step(Tensor::from_vector(std::vector<int64_t>{i64_max}, {1, 1})), IndexError,
                    "DecodeGraph::step", "vocabulary of 64");
  models::GenerateOptions options;
  options.max_tokens = 2;
  const std::vector<std::vector<int32_t>> prompts = {{1, 2}, {3, 64}};
  WICK_EXPECT_ERROR(models::generate(model, prompts, options), IndexError, "generate", "token 64",
                    "prompt 1, position 1");
}

// A tokenizer of fewer tokens than the model has logits (a checkpoint's padded rows): only its
// tokens are drawn. One of more tokens than logits is refused.
TEST_P(HostileModel, GenerationDrawsOnlyTheTokenizersTokens) {
  const LlamaModel model = from(tiny_model(Tiny{}), device());
  auto vocab = [](int n) {
    GgufWriter w;
    w.set("tokenizer.ggml.model", GgufValue::string("llama"));
    io::GgufArray tokens{io::GgufType::String, {}};
    for (int i = 0; i < n; ++i) tokens.items.push_back(GgufValue::string(detail::str_cat("t", i)));
    w.set("tokenizer.ggml.tokens", GgufValue::array(tokens));
    return models::Tokenizer::from_gguf(io::GgufFile::parse(w.bytes(), "vocab.gguf"));
  };
  const models::Tokenizer small = vocab(5), large = vocab(65);
  models::GenerateOptions options;
  options.max_tokens = 24;
  options.stop_at_end = false;
  options.sampling.temperature = 1.5;
  const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3}};
  const models::GenerateResult r = models::generate(model, prompts, options, {}, &small);
  ASSERT_FALSE(r.tokens[0].empty());
  for (const int32_t id : r.tokens[0]) EXPECT_LT(id, 5);
  WICK_EXPECT_ERROR(models::generate(model, prompts, options, {}, &large), ShapeError, "65 tokens", "64 logits");
}

INSTANTIATE_TEST_SUITE_P(Devices, HostileModel, ::testing::ValuesIn(devices()), device_name);

}  // namespace
}  // namespace wick::test
