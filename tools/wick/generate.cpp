// `wick generate`: text from a GGUF file or checkpoint (wick's tiny model by default), streamed as it is generated, then the prompt's and the
// generation's speed.
#include "generate.h"

#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <stdexcept>
#include <string>

#include "args.h"
#include "wick/dist.h"
#include "wick/io.h"
#include "wick/models/chat_template.h"
#include "wick/models/generate.h"

namespace wick::cli {

std::string tiny_model_path() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path installed = exe.parent_path().parent_path() / "share" / "wick" / "tiny.gguf";
    if (std::filesystem::exists(installed, ec)) return installed.string();
  }
  return WICK_TINY_MODEL;
}

int cmd_generate(int argc, char** argv) {
  std::string model_path, prompt;
  Device device = available_devices().back();  // a GPU where one is present
  std::vector<Device> devices;                 // --devices: the model split over these
  std::optional<DType> dtype;  // the model's default for the device
  models::WeightMemory memory = models::WeightMemory::Copy;
  bool chat = false;  // --chat: the prompt is one user turn through the model's chat template
  models::GenerateOptions opts;
  opts.sampling.temperature = 0.8;
  opts.sampling.top_k = 40;
  opts.sampling.top_p = 0.95;
  opts.sampling.min_p = 0.05;
  for (Options o("generate", argc, argv); o.next();) {
    if (o.is("--model"))
      model_path = o.value();
    else if (o.is("--prompt"))
      prompt = o.value();
    else if (o.is("--chat"))
      chat = true;
    else if (o.is("--max-tokens"))
      opts.max_tokens = o.int_value();
    else if (o.is("--temp"))
      opts.sampling.temperature = o.float_value();
    else if (o.is("--top-k"))
      opts.sampling.top_k = o.int_value();
    else if (o.is("--top-p"))
      opts.sampling.top_p = o.float_value();
    else if (o.is("--min-p"))
      opts.sampling.min_p = o.float_value();
    else if (o.is("--repeat-penalty"))
      opts.sampling.repetition_penalty = o.float_value();
    else if (o.is("--seed"))
      opts.sampling.seed = parse_seed(o.value());
    else if (o.is("--device"))
      device = o.device_value();
    else if (o.is("--devices"))
      devices = o.device_list_value();
    else if (o.is("--dtype"))
      dtype = o.dtype_value();
    else if (o.is("--mmap"))
      memory = models::WeightMemory::Map;
    else
      o.unknown();
  }
  // Bad options end the command before the model loads (which can take a while) and before the
  // prompt is printed: the sampler's checks (its constructor's; the seed it sets is set again by
  // generate()), and the token count's.
  if (opts.max_tokens < 0)
    throw std::runtime_error("generate: --max-tokens " + std::to_string(opts.max_tokens) + " is negative");
  (void)models::Sampler(opts.sampling);
  if (model_path.empty()) {
    model_path = tiny_model_path();
    std::fprintf(stderr, "model: %s (wick's tiny model: bigrams of the GPL-3; --model FILE runs another)\n", model_path.c_str());
  }
  // The files opened and parsed once; one model, or one part of it per device (tensor parallel),
  // each rank on a thread of its own.
  const models::ModelFile file = models::ModelFile::open(model_path);
  const models::Tokenizer& tok = file.tokenizer();
  if (devices.empty()) devices = {device};
  std::vector<dist::Communicator> comms(devices.size());
  if (devices.size() > 1) comms = dist::Communicator::local(devices);
  std::vector<std::shared_ptr<const models::Model>> parts;
  for (size_t r = 0; r < devices.size(); ++r) parts.push_back(file.load({devices[r], dtype, comms[r], memory}));
  // The prompt is the caller's own: the text of control tokens in it (a chat template's) counts.
  // With --chat, the template's text (which holds its own BOS where the model wants one), as
  // transformers' apply_chat_template tokenizes it; only the answer is printed.
  std::string text = prompt;
  if (chat) {
    const std::optional<models::ChatTemplate> tmpl = models::ChatTemplate::of(file);
    if (!tmpl) throw std::runtime_error("generate: --chat: " + model_path + " has no chat template");
    const models::ChatMessage turn{"user", prompt};
    text = tmpl->render({&turn, 1}, true);
  }
  const std::vector<std::vector<int32_t>> prompts = {tok.encode(text, !chat, true)};
  if (prompts[0].empty()) throw std::runtime_error("generate: the prompt has no tokens and the model no BOS");
  models::TextStream stream(tok);
  // The prompt through the stream first, unprinted: the first new token is not the text's first,
  // and keeps its leading space.
  for (int32_t id : prompts[0]) stream.push(id);
  if (!chat) std::cout << prompt << std::flush;
  std::vector<models::GenerateResult> results(parts.size());
  dist::on_threads(static_cast<int>(parts.size()), [&](int rank) {
    std::function<bool(int64_t, int32_t)> print;
    if (rank == 0)
      print = [&](int64_t, int32_t id) {
        std::cout << stream.push(id) << std::flush;
        return true;
      };
    results[static_cast<size_t>(rank)] = models::generate(*parts[static_cast<size_t>(rank)], prompts, opts, print, &tok);
  });
  const models::GenerateResult& r = results[0];
  std::string where = devices[0].to_string();
  for (size_t i = 1; i < devices.size(); ++i) where.append(",").append(devices[i].to_string());
  std::cout << stream.finish() << std::endl;
  const auto rate = [](double n, double s) { return s > 0 ? n / s : 0.0; };
  std::fprintf(stderr, "prompt: %lld tokens in %.3f s (%.1f tokens/s); generation: %lld tokens in %.3f s (%.1f tokens/s) on %s, %s\n",
               static_cast<long long>(r.prompt_tokens), r.prompt_seconds, rate(static_cast<double>(r.prompt_tokens), r.prompt_seconds),
               static_cast<long long>(r.generated_tokens()), r.generate_seconds,
               rate(static_cast<double>(r.generated_tokens()), r.generate_seconds), where.c_str(),
               std::string(dtype_name(parts[0]->dtype())).c_str());
  const int64_t context = parts[0]->context();
  if (r.generated_tokens() < opts.max_tokens && r.prompt_tokens + r.generated_tokens() >= context)
    std::fprintf(stderr, "generation stopped at the model's context of %lld positions\n",
                 static_cast<long long>(context));
  return 0;
}

}  // namespace wick::cli
