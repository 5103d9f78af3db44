// `wick perplexity`: a model's perplexity on a text, chunk by chunk as llama.cpp's
// llama-perplexity computes it, so that the two can be compared: the text tokenized with BOS, cut
// into chunks of --ctx tokens, each chunk's first token replaced by BOS, and the negative log
// likelihood of each chunk's second half (every token from ctx / 2 + 1 on, predicted from all
// before it in the chunk) averaged over the chunks.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "args.h"
#include "perplexity.h"
#include "wick/io.h"
#include "wick/models/model.h"

namespace wick::cli {

int cmd_perplexity(int argc, char** argv) {
  std::string model_path, file;
  int64_t ctx = 512, chunks = -1;
  Device device = Device::cpu();
  std::optional<DType> dtype;  // the model's default for the device
  models::WeightMemory memory = models::WeightMemory::Copy;
  for (Options o("perplexity", argc, argv); o.next();) {
    if (o.is("--model"))
      model_path = o.value();
    else if (o.is("--file"))
      file = o.value();
    else if (o.is("--ctx"))
      ctx = o.int_value();
    else if (o.is("--chunks"))
      chunks = o.int_value();
    else if (o.is("--device"))
      device = o.device_value();
    else if (o.is("--dtype"))
      dtype = o.dtype_value();
    else if (o.is("--mmap"))
      memory = models::WeightMemory::Map;
    else
      o.unknown();
  }
  if (model_path.empty() || file.empty()) throw std::runtime_error("perplexity: --model and --file are needed");
  if (ctx < 4) throw std::runtime_error("perplexity: --ctx must be at least 4");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("perplexity: cannot read " + file);
  std::ostringstream text;
  text << in.rdbuf();

  const models::ModelFile files = models::ModelFile::open(model_path);
  const models::Tokenizer& tok = files.tokenizer();
  const std::shared_ptr<const models::Model> loaded = files.load({device, dtype, {}, memory});
  const models::Model& model = *loaded;
  std::vector<int32_t> tokens = tok.encode(text.str());
  const auto available = static_cast<int64_t>(tokens.size()) / ctx;
  const int64_t n = chunks < 0 ? available : std::min(chunks, available);
  if (n == 0) throw std::runtime_error("perplexity: the text has " + std::to_string(tokens.size()) + " tokens, fewer than --ctx");
  const int64_t first = ctx / 2, vocab = model.vocab();
  double nll = 0;
  int64_t count = 0;
  for (int64_t c = 0; c < n; ++c) {
    std::vector<int64_t> chunk(tokens.begin() + c * ctx, tokens.begin() + (c + 1) * ctx);
    if (tok.bos() >= 0) chunk[0] = tok.bos();
    auto cache = model.make_cache(1, ctx);
    const std::vector<float> logits = model.forward(Tensor::from_vector(chunk, {1, ctx}), cache).to_vector<float>();
    for (int64_t i = first; i < ctx - 1; ++i) {
      const float* row = logits.data() + i * vocab;
      float top = row[0];
      for (int64_t v = 1; v < vocab; ++v) top = std::max(top, row[v]);
      double sum = 0;
      for (int64_t v = 0; v < vocab; ++v) sum += std::exp(row[v] - top);
      nll += -(row[chunk[static_cast<size_t>(i + 1)]] - top - std::log(sum));
      ++count;
    }
    std::printf("[%lld] %.4f\n", static_cast<long long>(c + 1), std::exp(nll / static_cast<double>(count)));
  }
  std::printf("Final estimate: PPL = %.4f (%lld chunks of %lld tokens, %s, %s)\n", std::exp(nll / static_cast<double>(count)),
              static_cast<long long>(n), static_cast<long long>(ctx), device.to_string().c_str(),
              std::string(dtype_name(model.dtype())).c_str());
  return 0;
}

}  // namespace wick::cli
