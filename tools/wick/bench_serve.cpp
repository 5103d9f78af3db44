// `wick bench-serve`: the engine under load. N requests of P prompt tokens (the first F of them
// shared by all, as a system prompt is) and G new tokens each, C of them in flight at a time (a new
// one submitted as each finishes), greedy, through models::Engine. Reports output tokens/s over
// the whole run, time to first token and between tokens (p50, p99), and the pool's use, as a table
// and a CSV row.
#include "bench_serve.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "args.h"
#include "generate.h"
#include "wick/models/engine.h"
#include "wick/models/llama.h"
#include "wick/models/tensor_parallel.h"

namespace wick::cli {

namespace {

using Clock = std::chrono::steady_clock;

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

std::shared_ptr<const models::Model> engine_model(std::string model_path, const std::string& shape,
                                                  std::optional<quant::QType> qtype, const std::vector<Device>& devices,
                                                  std::optional<DType> dtype, std::string& name,
                                                  std::optional<models::ModelFile>* file) {
  const bool split = devices.size() > 1;
  if (!shape.empty()) {
    // One model, or its parts one after another (every rank makes the whole weights from the seed).
    const std::vector<dist::Communicator> comms =
        split ? dist::Communicator::local(devices) : std::vector<dist::Communicator>(1);
    std::vector<std::shared_ptr<const models::Model>> parts;
    for (size_t r = 0; r < devices.size(); ++r)
      parts.push_back(std::make_shared<models::LlamaModel>(
          models::LlamaModel::random(models::LlamaConfig::preset(shape), devices[r],
                                     dtype.value_or(models::default_dtype(devices[r])), qtype, 0, comms[r])));
    name = shape + (qtype ? std::string(" ") + std::string(quant::qtype_name(*qtype)) : "");
    return split ? std::make_shared<models::TensorParallelModel>(parts) : parts[0];
  }
  if (model_path.empty()) {
    model_path = tiny_model_path();
    std::fprintf(stderr, "model: %s (wick's tiny model; --model FILE or --shape S runs another)\n", model_path.c_str());
  }
  models::LoadOptions lo;
  lo.device = devices[0];
  lo.dtype = dtype;
  models::ModelFile opened = models::ModelFile::open(model_path);
  std::shared_ptr<const models::Model> model =
      split ? models::TensorParallelModel::load(opened, devices, lo) : opened.load(lo);
  name = model_path;
  if (file != nullptr) file->emplace(std::move(opened));
  return model;
}

int cmd_bench_serve(int argc, char** argv) {
  std::string model_path, shape, csv;
  std::optional<quant::QType> qtype;
  Device device = Device::cpu();
  std::vector<Device> devices;  // --devices: the model split over these (a TensorParallelModel)
  std::optional<DType> dtype;
  int64_t requests = 64, concurrency = 16, prompt = 128, gen = 64;
  double share = 0;
  uint64_t seed = 0;
  models::EngineOptions eo;
  for (Options o("bench-serve", argc, argv); o.next();) {
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
    } else if (o.is("--requests")) {
      requests = o.int_value();
    } else if (o.is("--concurrency")) {
      concurrency = o.int_value();
    } else if (o.is("--prompt")) {
      prompt = o.int_value();
    } else if (o.is("--gen")) {
      gen = o.int_value();
    } else if (o.is("--prefix-share")) {
      share = o.float_value();
      if (!(share >= 0 && share <= 1)) o.fail("must be in [0, 1]");
    } else if (o.is("--seed")) {
      seed = parse_seed(o.value());
    } else if (o.is("--block-size")) {
      eo.block_size = o.int_value();
    } else if (o.is("--kv-memory")) {
      eo.kv_memory = o.int_value() << 20;
    } else if (o.is("--kv-fraction")) {
      eo.kv_fraction = o.float_value();
    } else if (o.is("--kv-type")) {
      if (!models::parse_kv_type(o.value(), eo.kv_type)) o.fail("must be model or q8_0");
    } else if (o.is("--step-tokens")) {
      eo.step_tokens = o.int_value();
    } else if (o.is("--max-running")) {
      eo.max_running = o.int_value();
    } else if (o.is("--no-graph")) {
      eo.graphs = false;
    } else if (o.is("--deterministic")) {
      eo.deterministic = true;
    } else if (o.is("--csv")) {
      csv = o.value();
    } else {
      o.unknown();
    }
  }
  if (!model_path.empty() && !shape.empty()) throw std::runtime_error("bench-serve: --model and --shape exclude each other");
  if (requests < 1 || concurrency < 1 || prompt < 1 || gen < 1)
    throw std::runtime_error("bench-serve: --requests, --concurrency, --prompt and --gen must be positive");
  if (!devices.empty()) device = devices[0];  // a split model's pool is sized on its first device
  const bool split = devices.size() > 1;
  std::string where = device.to_string();
  for (size_t i = 1; i < devices.size(); ++i) where.append("+").append(devices[i].to_string());  // a CSV field
  std::string name;
  const std::shared_ptr<const models::Model> model =
      engine_model(model_path, shape, qtype, split ? devices : std::vector<Device>{device}, dtype, name);
  const int64_t context = model->context();
  if (context > 0 && prompt + gen > context)
    throw std::runtime_error("bench-serve: --prompt " + std::to_string(prompt) + " and --gen " + std::to_string(gen) +
                             " pass the model's context of " + std::to_string(context) + " positions");

  // The prompts: a shared beginning, then each request's own tokens.
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(model->vocab() - 1));
  const auto shared = static_cast<int64_t>(share * static_cast<double>(prompt));
  std::vector<int32_t> common(static_cast<size_t>(shared));
  for (int32_t& t : common) t = id(rng);
  std::vector<models::Request> load(static_cast<size_t>(requests));
  for (models::Request& r : load) {
    r.prompt = common;
    while (static_cast<int64_t>(r.prompt.size()) < prompt) r.prompt.push_back(id(rng));
    r.max_tokens = gen;
    r.stop_at_end = false;
  }

  models::Engine engine(model, eo);
  std::mutex mu;
  std::condition_variable finished;
  int64_t done = 0, in_flight = 0, next = 0, made = 0, peak_blocks = 0;
  std::vector<double> first_token, between;
  std::vector<Clock::time_point> submitted(static_cast<size_t>(requests)), last(static_cast<size_t>(requests));
  std::vector<int64_t> tokens_of(static_cast<size_t>(requests), 0);
  std::string failure;
  auto submit_next = [&] {  // under mu
    const size_t i = static_cast<size_t>(next++);
    ++in_flight;
    submitted[i] = Clock::now();
    engine.submit(load[i], [&, i](const models::Piece& p) {
      const auto now = Clock::now();
      std::lock_guard lock(mu);
      if (p.token >= 0) {
        ++made;
        if (tokens_of[i]++ == 0)
          first_token.push_back(std::chrono::duration<double>(now - submitted[i]).count());
        else
          between.push_back(std::chrono::duration<double>(now - last[i]).count());
        last[i] = now;
      }
      if (p.finish != models::Finish::None) {
        if (p.finish == models::Finish::Error && failure.empty()) failure = p.error;
        ++done;
        --in_flight;
        finished.notify_all();
      }
    });
  };
  const auto start = Clock::now();
  {
    std::unique_lock lock(mu);
    while (done < requests) {
      while (in_flight < concurrency && next < requests) submit_next();
      finished.wait_for(lock, std::chrono::milliseconds(5));
      peak_blocks = std::max(peak_blocks, engine.stats().blocks_used);
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!failure.empty()) throw std::runtime_error("bench-serve: a request failed: " + failure);
  const models::EngineStats st = engine.stats();
  const double out_rate = static_cast<double>(made) / seconds;
  const double all_rate = static_cast<double>(made + requests * prompt) / seconds;
  const double ttft50 = percentile(first_token, 0.5) * 1e3, ttft99 = percentile(first_token, 0.99) * 1e3;
  const double tbt50 = percentile(between, 0.5) * 1e3, tbt99 = percentile(between, 0.99) * 1e3;
  const std::string dt(dtype_name(model->dtype()));
  if (eo.kv_type != models::KvType::Model) name += std::string(" (kv ") + models::kv_type_name(eo.kv_type) + ")";
  if (eo.deterministic) name += " (deterministic)";
  std::printf("| model | device | dtype | requests | concurrency | prompt | gen | shared | output t/s | prompt+output t/s "
              "| TTFT p50 ms | TTFT p99 ms | TBT p50 ms | TBT p99 ms | peak blocks |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::printf(
      "| %s | %s | %s | %lld | %lld | %lld | %lld | %.2f | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %lld of %lld |\n",
      name.c_str(), where.c_str(), dt.c_str(), static_cast<long long>(requests), static_cast<long long>(concurrency),
      static_cast<long long>(prompt), static_cast<long long>(gen), share, out_rate, all_rate, ttft50, ttft99, tbt50,
      tbt99, static_cast<long long>(peak_blocks), static_cast<long long>(st.blocks));
  std::printf("\n%.2f s; %lld steps, %lld tokens computed, %lld prompt tokens found in the prefix cache, %lld preemptions; "
              "blocks of %lld positions\n",
              seconds, static_cast<long long>(st.steps), static_cast<long long>(st.computed_tokens),
              static_cast<long long>(st.prefix_hit_tokens), static_cast<long long>(st.preemptions),
              static_cast<long long>(eo.block_size));
  if (!csv.empty()) {
    std::ofstream f(csv, std::ios::app);
    if (!f) throw std::runtime_error("bench-serve: cannot write " + csv);
    f << name << "," << where << "," << dt << "," << requests << "," << concurrency << "," << prompt << "," << gen
      << "," << share << "," << out_rate << "," << all_rate << "," << ttft50 << "," << ttft99 << "," << tbt50 << ","
      << tbt99 << "," << peak_blocks << "," << st.blocks << "," << st.prefix_hit_tokens << "," << st.preemptions
      << "\n";
  }
  return 0;
}

}  // namespace wick::cli
