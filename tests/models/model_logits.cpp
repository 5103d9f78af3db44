// A command-line bridge to wick's model runner for the external check against transformers
// (tests/models/check_transformers.py):
//   model_logits MODEL IN.safetensors OUT.safetensors DEVICE DTYPE
// MODEL is a GGUF file or a checkpoint directory. IN holds "tokens", i64 (1, t), and the metadata
// entry "greedy" (how many tokens to pick greedily after them). OUT gets "logits", f32
// (1, t, vocab), of the whole prompt in one forward pass, and "greedy", i64 (n), the tokens that
// greedy generation picks after the prompt (end tokens do not stop it).
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "wick/io.h"
#include "wick/models/generate.h"
#include "wick/models/model.h"

int main(int argc, char** argv) {
  using namespace wick;
  if (argc != 6) {
    std::fprintf(stderr, "usage: model_logits MODEL IN.safetensors OUT.safetensors DEVICE DTYPE\n");
    return 2;
  }
  try {
    Device device;
    if (!Device::parse(argv[4], &device)) throw std::runtime_error(std::string("bad device ") + argv[4]);
    DType dtype;
    if (!parse_dtype(argv[5], &dtype)) throw std::runtime_error(std::string("bad dtype ") + argv[5]);
    models::LoadOptions load;
    load.device = device;
    load.dtype = dtype;
    const std::shared_ptr<const models::Model> loaded = models::ModelFile::open(argv[1]).load(load);
    const models::Model& model = *loaded;
    const io::SafetensorsFile in = io::SafetensorsFile::open(argv[2]);
    const Tensor tokens = in.tensor(*in.find_tensor("tokens")).to_dtype(DType::I64);
    const std::string* greedy = in.find("greedy");
    const int64_t t = tokens.shape()[1];

    auto cache = model.make_cache(1, t);
    const Tensor logits = model.forward(tokens, cache).to_device(Device::cpu());

    models::GenerateOptions options;
    options.max_tokens = greedy != nullptr ? std::stoll(*greedy) : 0;
    options.sampling.temperature = 0;
    options.stop_at_end = false;
    const std::vector<int64_t> ids = tokens.to_vector<int64_t>();
    const std::vector<std::vector<int32_t>> prompt = {std::vector<int32_t>(ids.begin(), ids.end())};
    std::vector<int64_t> picked;
    if (options.max_tokens > 0) {
      const models::GenerateResult result = models::generate(model, prompt, options);
      picked.assign(result.tokens[0].begin(), result.tokens[0].end());
    }

    io::SafetensorsWriter out;
    out.add("logits", logits);
    out.add("greedy", Tensor::from_vector(picked, {static_cast<int64_t>(picked.size())}));
    out.write(argv[3]);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "model_logits: %s\n", e.what());
    return 1;
  }
}
