// `wick generate`: text from a GGUF model, streamed as it is generated, then the prompt's and the
// generation's speed.
#include <cstdio>
#include <iostream>
#include <stdexcept>
#include <string>

#include "generate.h"
#include "wick/io.h"
#include "wick/models/generate.h"

namespace wick::cli {

int cmd_generate(int argc, char** argv) {
  std::string model_path, prompt;
  Device device = Device::cpu();
  DType dtype = DType::F32;
  models::GenerateOptions o;
  o.sampling.temperature = 0.8;
  o.sampling.top_k = 40;
  o.sampling.top_p = 0.95;
  o.sampling.min_p = 0.05;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error("generate: " + a + " needs a value");
      return argv[++i];
    };
    if (a == "--model") {
      model_path = value();
    } else if (a == "--prompt") {
      prompt = value();
    } else if (a == "--max-tokens") {
      o.max_tokens = std::stoll(value());
    } else if (a == "--temp") {
      o.sampling.temperature = std::stod(value());
    } else if (a == "--top-k") {
      o.sampling.top_k = std::stoll(value());
    } else if (a == "--top-p") {
      o.sampling.top_p = std::stod(value());
    } else if (a == "--min-p") {
      o.sampling.min_p = std::stod(value());
    } else if (a == "--repeat-penalty") {
      o.sampling.repetition_penalty = std::stod(value());
    } else if (a == "--seed") {
      o.sampling.seed = std::stoull(value());
    } else if (a == "--device") {
      const std::string d = value();
      if (!Device::parse(d, &device)) throw std::runtime_error("generate: unknown device '" + d + "'");
    } else if (a == "--dtype") {
      const std::string d = value();
      if (!parse_dtype(d, &dtype)) throw std::runtime_error("generate: unknown dtype '" + d + "'");
    } else {
      throw std::runtime_error("generate: unknown option '" + a + "'");
    }
  }
  if (model_path.empty()) throw std::runtime_error("generate: --model is needed");
  const io::GgufFile gguf = io::GgufFile::open(model_path);
  const models::Tokenizer tok = models::Tokenizer::from_gguf(gguf);
  const models::LlamaModel model = models::LlamaModel::from_gguf(gguf, device, dtype);
  // The prompt is the caller's own: the text of control tokens in it (a chat template's) counts.
  const std::vector<std::vector<int32_t>> prompts = {tok.encode(prompt, true, true)};
  if (prompts[0].empty()) throw std::runtime_error("generate: the prompt has no tokens and the model no BOS");
  models::TextStream stream(tok);
  std::cout << prompt << std::flush;
  const models::GenerateResult r = models::generate(
      model, prompts, o,
      [&](int64_t, int32_t id) {
        std::cout << stream.push(id) << std::flush;
        return true;
      },
      &tok);
  std::cout << stream.finish() << std::endl;
  const auto rate = [](double n, double s) { return s > 0 ? n / s : 0.0; };
  std::fprintf(stderr, "prompt: %lld tokens in %.3f s (%.1f tokens/s); generation: %lld tokens in %.3f s (%.1f tokens/s) on %s, %s\n",
               static_cast<long long>(r.prompt_tokens), r.prompt_seconds, rate(static_cast<double>(r.prompt_tokens), r.prompt_seconds),
               static_cast<long long>(r.generated_tokens()), r.generate_seconds,
               rate(static_cast<double>(r.generated_tokens()), r.generate_seconds), device.to_string().c_str(),
               std::string(dtype_name(dtype)).c_str());
  return 0;
}

}  // namespace wick::cli
