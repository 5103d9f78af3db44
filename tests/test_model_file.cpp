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
  EXPECT_EQ(model->dtype(), models::default_dtype(device()));
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
                    "\"gpt2\"", "llama, mistral, qwen2");
  dir.write("config.json", R"({"model_type": "bert"})");
  WICK_EXPECT_ERROR(ModelFile::open(dir.path()), NotSupportedError, "config.json", "model_type", "\"bert\"");
  TempDir empty;
  WICK_EXPECT_ERROR(ModelFile::open(empty.path()), io::FormatError, "config.json");
  WICK_EXPECT_ERROR(ModelFile::open(dir.file("absent.gguf")), Error, "absent.gguf");
  EXPECT_EQ(models::architectures(), (std::vector<std::string>{"llama", "mistral", "qwen2"}));
  EXPECT_EQ(models::default_dtype(Device::cpu()), DType::F32);
  EXPECT_EQ(models::default_dtype(Device::cuda(0)), DType::BF16);
}

INSTANTIATE_TEST_SUITE_P(Devices, ModelFileTest, ::testing::ValuesIn(devices()), device_name);

}  // namespace
}  // namespace wick::test
