// Models behind one interface (include/wick/models/model.h): ModelFile opens a GGUF file or a
// checkpoint directory once and picks the family from the architecture it names; the loaded Model
// carries the file's tokenizer, runs in the device's default dtype unless told, and decodes through
// its decode_steps() as through forward(). Run on every device present.
#include "models/tiny_model.h"
#include "test_util.h"
#include "wick/models/generate.h"
#include "wick/models/model.h"

namespace wick::test {
namespace {

using models::ModelFile;

class ModelFileTest : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
};

std::string tiny_path() { return std::string(WICK_SOURCE_DIR) + "/models/tiny.gguf"; }

TEST_P(ModelFileTest, AGgufFileOpensOnceWithItsTokenizer) {
  const ModelFile file = ModelFile::open(tiny_path());
  EXPECT_EQ(file.architecture(), "llama");
  ASSERT_TRUE(file.has_tokenizer());
  const models::Tokenizer& tok = file.tokenizer();
  EXPECT_EQ(&tok, &file.tokenizer());  // parsed once
  models::LoadOptions o;
  o.device = device();
  const std::shared_ptr<const models::Model> model = file.load(o);
  EXPECT_EQ(model->dtype(), file.default_dtype(device()));
  EXPECT_EQ(model->architecture(), "llama");
  ASSERT_NE(model->tokenizer(), nullptr);
  EXPECT_EQ(model->tokenizer()->size(), tok.size());
  EXPECT_EQ(model->vocab(), tok.size());
  // Generation takes the model's tokenizer when given none: its end tokens stop a sequence.
  models::GenerateOptions g;
  g.max_tokens = 8;
  const std::vector<std::vector<int32_t>> prompts = {tok.encode("The")};
  const models::GenerateResult r = models::generate(*model, prompts, g);
  EXPECT_FALSE(r.tokens[0].empty());
  for (const int32_t id : r.tokens[0]) EXPECT_LT(id, tok.size());
  // Two ranks' worth of loads share the one parse.
  EXPECT_EQ(file.load(o)->vocab(), model->vocab());
}

TEST_P(ModelFileTest, DecodeStepsGiveForwardsLogits) {
  models::LoadOptions o;
  o.device = device();
  o.dtype = DType::F32;
  const std::shared_ptr<const models::Model> model = ModelFile::open(tiny_path()).load(o);
  const std::vector<int64_t> prompt = {1, 20, 33, 7};
  auto a = model->make_cache(1, 16), b = model->make_cache(1, 16);
  (void)model->forward(Tensor::from_vector(prompt, {1, 4}), a);
  (void)model->forward(Tensor::from_vector(prompt, {1, 4}), b);
  const std::unique_ptr<models::DecodeSteps> steps = model->decode_steps(b);
  for (const int64_t id : {5, 9, 11}) {
    const Tensor next = Tensor::from_vector(std::vector<int64_t>{id}, {1, 1});
    const std::vector<float> want = model->forward(next, a, {}, true).to_vector<float>();
    const std::vector<float> got = steps->step(next).to_vector<float>();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4f * (1.f + std::abs(want[i]))) << i;
  }
}

TEST(ModelFile, FilesWithoutATokenizerOrOfAnotherArchitecture) {
  TempDir dir;
  tiny_model(Tiny{}).write(dir.file("bare.gguf"));
  const ModelFile bare = ModelFile::open(dir.file("bare.gguf"));
  EXPECT_FALSE(bare.has_tokenizer());
  EXPECT_EQ(bare.load()->tokenizer(), nullptr);
  WICK_EXPECT_ERROR((void)bare.tokenizer(), io::FormatError, "bare.gguf", "tokenizer.ggml.model");
  Tiny other;
  other.arch = "gpt2";
  tiny_model(other).write(dir.file("gpt2.gguf"));
  WICK_EXPECT_ERROR(ModelFile::open(dir.file("gpt2.gguf")), NotSupportedError, "gpt2.gguf", "general.architecture",
                    "\"gpt2\"", "llama, mistral, qwen2, qwen3, qwen3moe, qwen3_moe, mixtral, phi3");
  dir.write("config.json", R"({"model_type": "bert"})");
  WICK_EXPECT_ERROR(ModelFile::open(dir.path()), NotSupportedError, "config.json", "model_type", "\"bert\"");
  TempDir empty;
  WICK_EXPECT_ERROR(ModelFile::open(empty.path()), io::FormatError, "config.json");
  WICK_EXPECT_ERROR(ModelFile::open(dir.file("absent.gguf")), Error, "absent.gguf");
  EXPECT_EQ(models::architectures(),
            (std::vector<std::string>{"llama", "mistral", "qwen2", "qwen3", "qwen3moe", "qwen3_moe", "mixtral", "phi3",
                                      "gemma2", "gemma3", "gemma3_text"}));
  EXPECT_EQ(models::default_dtype(Device::cpu()), DType::F32);
  EXPECT_EQ(models::default_dtype(Device::cuda(0)), DType::BF16);
}

// A file's model runs, unless told, in the dtype its products read fastest: on the CPU the one its
// dense weights are stored in where that is f16 or bf16 (never widened at load), f32 for f32 and
// block-format files; bf16 on a GPU whatever the file.
TEST(ModelFile, TheDefaultDtypeFollowsTheFile) {
  TempDir dir;
  struct Case {
    std::string name;
    DType dense;
    std::optional<quant::QType> qtype;
    std::optional<DType> stored;
    DType cpu;
  };
  const Case cases[] = {{"f32", DType::F32, std::nullopt, DType::F32, DType::F32},
                        {"f16", DType::F16, std::nullopt, DType::F16, DType::F16},
                        {"bf16", DType::BF16, std::nullopt, DType::BF16, DType::BF16},
                        {"q8_0", DType::F32, quant::QType::Q8_0, std::nullopt, DType::F32}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Tiny t;
    t.dense = c.dense;
    t.qtype = c.qtype;
    tiny_model(t).write(dir.file(c.name + ".gguf"));
    const ModelFile file = ModelFile::open(dir.file(c.name + ".gguf"));
    EXPECT_EQ(file.stored_dtype(), c.stored);
    EXPECT_EQ(file.default_dtype(Device::cpu()), c.cpu);
    EXPECT_EQ(file.default_dtype(Device::cuda(0)), DType::BF16);
    const std::shared_ptr<const models::Model> model = file.load();
    EXPECT_EQ(model->dtype(), c.cpu);
    if (c.cpu == DType::F16 || c.cpu == DType::BF16) {
      // Read as stored: half the bytes the same file holds widened to f32 on request.
      models::LoadOptions wide;
      wide.dtype = DType::F32;
      const std::shared_ptr<const models::Model> widened = file.load(wide);
      EXPECT_EQ(widened->dtype(), DType::F32);
      EXPECT_LT(model->weight_bytes() * 3 / 2, widened->weight_bytes());
      const Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 20, 33, 7}, {1, 4});
      auto a = model->make_cache(1, 8), b = widened->make_cache(1, 8);
      const std::vector<float> got = model->forward(ids, a).to_dtype(DType::F32).to_vector<float>();
      const std::vector<float> want = widened->forward(ids, b).to_vector<float>();
      ASSERT_EQ(got.size(), want.size());
      const float tol = c.cpu == DType::F16 ? 2e-2f : 1e-1f;
      for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol * (1.f + std::abs(want[i]))) << i;
    }
  }
  // A checkpoint's config.json names its dtype.
  for (const auto& [name, stored] : {std::pair<std::string, std::optional<DType>>{"bfloat16", DType::BF16},
                                     {"float16", DType::F16},
                                     {"float32", DType::F32},
                                     {"int8", std::nullopt}}) {
    TempDir ckpt;
    ckpt.write("config.json", R"({"model_type": "llama", "torch_dtype": ")" + name + R"("})");
    const ModelFile file = ModelFile::open(ckpt.path());
    EXPECT_EQ(file.stored_dtype(), stored) << name;
    EXPECT_EQ(file.default_dtype(Device::cpu()), stored && *stored != DType::F32 ? *stored : DType::F32) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, ModelFileTest, ::testing::ValuesIn(devices()), device_name);

}  // namespace
}  // namespace wick::test
