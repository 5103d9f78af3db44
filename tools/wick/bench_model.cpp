// `wick bench-model`: a model's prompt and generation speed, as llama-bench reports them: pp N
// (N prompt tokens through the model at once, from an empty cache, the last position's logits to
// the host) and tg N (N tokens decoded one at a time, each step's logits argmax-ed on the host; on
// GPUs through models::DecodeGraph, one per rank, unless --no-graph). The sequences of a batch start
// from different tokens, so that a mixture's tokens choose different experts as a real batch's do.
#include "bench_model.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "args.h"
#include "generate.h"
#include "wick/dist.h"
#include "wick/io.h"
#include "wick/models/llama.h"

namespace wick::cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The median time of `reps` runs of f after one warm-up run.
template <typename F>
double median_seconds(int reps, F&& f) {
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) t.push_back(f());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int cmd_bench_model(int argc, char** argv) {
  std::string model_path, shape, csv;
  std::optional<quant::QType> qtype;
  Device device = Device::cpu();
  std::vector<Device> devices;  // --devices: the model split over these
  std::optional<DType> dtype;  // the model's default for the device
  models::WeightMemory memory = models::WeightMemory::Copy;
  int64_t prompt = 512, gen = 128, batch = 1;
  int reps = 3;
  bool graph = true;  // decode steps through DecodeGraph on a GPU
  for (Options o("bench-model", argc, argv); o.next();) {
    if (o.is("--model")) {
      model_path = o.value();
    } else if (o.is("--shape")) {
      shape = o.value();
    } else if (o.is("--qtype")) {
      qtype = o.qtype_value();
    } else if (o.is("--device")) {
      device = o.device_value();
    } else if (o.is("--devices")) {
      devices = o.device_list_value();
    } else if (o.is("--dtype")) {
      dtype = o.dtype_value();
    } else if (o.is("--prompt")) {
      prompt = o.int_value();
    } else if (o.is("--gen")) {
      gen = o.int_value();
    } else if (o.is("--batch")) {
      batch = o.int_value();
    } else if (o.is("--reps")) {
      reps = static_cast<int>(o.int_value());
    } else if (o.is("--csv")) {
      csv = o.value();
    } else if (o.is("--no-graph")) {
      graph = false;
    } else if (o.is("--mmap")) {
      memory = models::WeightMemory::Map;
    } else {
      o.unknown();
    }
  }
  if (!model_path.empty() && !shape.empty())
    throw std::runtime_error("bench-model: --model and --shape exclude each other");
  if (model_path.empty() && shape.empty()) model_path = tiny_model_path();
  if (prompt < 0 || gen < 0 || prompt + gen == 0 || batch < 1 || reps < 1)
    throw std::runtime_error(
        "bench-model: --prompt and --gen must be 0 (that test left out) or more, not both 0; --batch and --reps "
        "positive");
  // One model, or one part of it per device (tensor parallel; random parts made one after another,
  // since ranks on the CPU share its generator).
  if (devices.empty()) devices = {device};
  std::vector<dist::Communicator> comms(devices.size());
  if (devices.size() > 1) comms = dist::Communicator::local(devices);
  std::vector<std::shared_ptr<const models::Model>> parts;
  std::optional<models::ModelFile> file;
  if (shape.empty()) file = models::ModelFile::open(model_path);
  for (size_t r = 0; r < devices.size(); ++r) {
    if (file) {
      parts.push_back(file->load({devices[r], dtype, comms[r], memory}));
    } else {
      const DType dt = dtype.value_or(models::default_dtype(devices[r]));
      parts.push_back(std::make_shared<models::LlamaModel>(
          models::LlamaModel::random(models::LlamaConfig::preset(shape), devices[r], dt, qtype, 0, comms[r])));
    }
  }
  const models::Model& model = *parts[0];
  const std::string dtype_text(dtype_name(model.dtype()));
  std::string name = shape.empty() ? model_path : shape;
  if (!shape.empty() && qtype) name.append(" ").append(quant::qtype_name(*qtype));
  std::string where = devices[0].to_string();
  for (size_t i = 1; i < devices.size(); ++i) where.append("+").append(devices[i].to_string());  // a CSV field
  const double gib = static_cast<double>(model.weight_bytes()) / (1 << 30);
  std::vector<int64_t> tokens(static_cast<size_t>(batch * std::max<int64_t>(prompt, 1)));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>((i * 7919 + 13) % static_cast<size_t>(model.vocab()));

  // Memory on rank 0's device: what wick holds there once the model is loaded (its weights), what
  // a cache of each test's length adds, and below, the peak during each test.
  const Device first = devices[0];
  synchronize(first);
  const int64_t model_bytes = memory_use(first).in_use;
  auto cache_bytes = [&](int64_t length) {
    const int64_t before = memory_use(first).in_use;
    const auto cache = model.make_cache(batch, length);
    return memory_use(first).in_use - before;
  };
  const int64_t pp_cache = prompt > 0 ? cache_bytes(prompt) : 0, tg_cache = gen > 0 ? cache_bytes(gen) : 0;

  const bool use_graph = graph && first.is_gpu();
  std::string recording_error;  // DecodeGraph's, where recording failed
  bool recorded = false;        // decode steps replayed from a recorded graph
  // Every rank runs the same steps; rank 0's clock, and its device's peak memory (weights, cache
  // and activations that wick allocated) over each test, are reported.
  std::vector<double> pps(parts.size()), tgs(parts.size());
  int64_t pp_peak = 0, tg_peak = 0;
  dist::on_threads(static_cast<int>(parts.size()), [&](int rank) {
    const models::Model& m = *parts[static_cast<size_t>(rank)];
    const Device d = devices[static_cast<size_t>(rank)];
    if (rank == 0) reset_peak_memory(d);
    if (prompt > 0)
      pps[static_cast<size_t>(rank)] = median_seconds(reps, [&] {
        auto cache = m.make_cache(batch, prompt);
        const auto t = Clock::now();
        (void)m.forward(Tensor::from_vector(tokens, {batch, prompt}), cache, {}, true).to_vector<float>();
        return seconds_since(t);
      });
    if (rank == 0) {
      pp_peak = memory_use(d).peak;
      reset_peak_memory(d);
    }
    if (gen > 0)
      tgs[static_cast<size_t>(rank)] = median_seconds(reps, [&] {
        auto cache = m.make_cache(batch, gen);
        const std::unique_ptr<models::DecodeSteps> steps = use_graph ? m.decode_steps(cache) : nullptr;
        std::vector<int64_t> next(tokens.begin(), tokens.begin() + batch);
        const auto t = Clock::now();
        for (int64_t s = 0; s < gen; ++s) {
          const Tensor tokens = Tensor::from_vector(next, {batch, 1});
          const Tensor logits = steps ? steps->step(tokens) : m.forward(tokens, cache, {}, true);
          next = logits.argmax(-1).to_dtype(DType::I64).reshape({batch}).to_vector<int64_t>();
        }
        const double took = seconds_since(t);
        if (steps && rank == 0) recording_error = steps->recording_error(), recorded = steps->recorded();
        return took;
      });
    if (rank == 0) tg_peak = memory_use(d).peak;
  });
  const double pp = pps[0], tg = tgs[0];
  const double pp_rate = prompt > 0 ? static_cast<double>(batch * prompt) / pp : 0;
  const double tg_rate = gen > 0 ? static_cast<double>(batch * gen) / tg : 0;
  const double weights_per_second =
      gen > 0 ? static_cast<double>(model.weight_bytes()) * static_cast<double>(gen) / tg / 1e9 : 0;
  const auto in_gib = [](int64_t bytes) { return static_cast<double>(bytes) / (1 << 30); };
  std::printf("| model | size | params | device | dtype | batch | test | t/s | weights read | peak memory |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  if (prompt > 0)
    std::printf("| %s | %.2f GiB | %.2f B | %s | %s | %lld | pp%lld | %.1f | | %.2f GiB |\n", name.c_str(), gib,
                static_cast<double>(model.parameters()) / 1e9, where.c_str(), dtype_text.c_str(),
                static_cast<long long>(batch), static_cast<long long>(prompt), pp_rate, in_gib(pp_peak));
  if (gen > 0)
    std::printf("| %s | %.2f GiB | %.2f B | %s | %s | %lld | tg%lld | %.1f | %.0f GB/s | %.2f GiB |\n", name.c_str(),
                gib, static_cast<double>(model.parameters()) / 1e9, where.c_str(), dtype_text.c_str(),
                static_cast<long long>(batch), static_cast<long long>(gen), tg_rate, weights_per_second,
                in_gib(tg_peak));
  std::printf("\nmemory on %s: the model holds %.2f GiB", first.to_string().c_str(), in_gib(model_bytes));
  for (const auto& [test, length, cache, peak] :
       {std::tuple{"pp", prompt, pp_cache, pp_peak}, {"tg", gen, tg_cache, tg_peak}}) {
    if (length == 0) continue;
    std::printf("; a cache of %lld tokens %.3f GiB, peak over %s%lld %.2f GiB (%.2f of model + cache)",
                static_cast<long long>(length), in_gib(cache), test, static_cast<long long>(length), in_gib(peak),
                static_cast<double>(peak) / static_cast<double>(model_bytes + cache));
  }
  std::printf("\n");
  if (gen > 0 && !use_graph)
    std::printf("decode steps: forward() (each step's ops launched one by one)\n");
  else if (gen > 0 && recorded)
    std::printf("decode steps: DecodeGraph (each step replayed from a recorded graph)\n");
  else if (gen > 0 && recording_error.empty())
    std::printf(
        "decode steps: op by op (the model records none: its experts, not stacked block formats on a GPU, are read "
        "by groups on the host)\n");
  else if (gen > 0)
    std::printf("decode steps: DecodeGraph, run op by op (recording failed: %s)\n", recording_error.c_str());
  if (!csv.empty()) {
    std::ofstream f(csv, std::ios::app);
    if (!f) throw std::runtime_error("bench-model: cannot write " + csv);
    if (prompt > 0)
      f << name << "," << model.weight_bytes() << "," << where << "," << dtype_text << "," << batch << ",pp" << prompt
        << "," << pp_rate << "," << pp_peak << "\n";
    if (gen > 0)
      f << name << "," << model.weight_bytes() << "," << where << "," << dtype_text << "," << batch << ",tg" << gen
        << "," << tg_rate << "," << tg_peak << "\n";
  }
  return 0;
}

}  // namespace wick::cli
