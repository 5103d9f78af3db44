// Times the ops of a Llama decode step other than the products, as a recorded step runs them: each
// op 32 times in one wick::Graph (one call per layer, each layer with its own tensors), the graph
// replayed, microseconds per call. The shape is Llama 3 8B's at batch 1 by default (32 query
// heads, 8 key heads, head dim 128, width 4096, feed-forward 14336), bf16, with the cache's first
// `context` positions filled and the keys read in spans of 256 positions as the runner reads them
// (the positions past the context hidden by the mask). The first row times a fill of one row of
// the width: the cost of any node of the graph.
//
//   bench_decode_ops [--context N] [--batch B] [--reps R]
//
// The attention kernel is chosen as in a model: set WICK_ATTENTION (library, own, rows) to compare.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "wick/wick.h"

namespace {

using namespace wick;

constexpr int kLayers = 32;

double us_per_call(Device dev, int reps, const std::function<void(int)>& op) {
  for (int i = 0; i < kLayers; ++i) op(i);  // first use: handles and workspaces
  const Graph graph = Graph::record(dev, [&] {
    for (int i = 0; i < kLayers; ++i) op(i);
  });
  for (int i = 0; i < 3; ++i) graph.replay();
  synchronize(dev);
  std::vector<double> us;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 10; ++i) graph.replay();
    synchronize(dev);
    const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
    us.push_back(took.count() / (10.0 * kLayers));
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int64_t context = 128, batch = 1;
  int reps = 9;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--context" && i + 1 < argc) {
      context = std::atoll(argv[++i]);
    } else if (a == "--batch" && i + 1 < argc) {
      batch = std::atoll(argv[++i]);
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_decode_ops [--context N] [--batch B] [--reps R]\n");
      return 2;
    }
  }
  Device dev = Device::cpu();
  for (const Device& d : available_devices())
    if (d.type() != DeviceType::Cpu) dev = d;
  if (dev.type() == DeviceType::Cpu || context < 1 || batch < 1) {
    std::printf("bench_decode_ops: needs a GPU, a context and a batch of at least 1\n");
    return dev.type() == DeviceType::Cpu ? 0 : 2;
  }
  constexpr int64_t heads = 32, kv_heads = 8, head_dim = 128, dim = 4096, hidden = 14336, span = 256;
  const DType dt = DType::BF16;
  const int64_t length = (context / span + 1) * span;  // keys a step reads (its span)
  const int64_t qkv = (heads + 2 * kv_heads) * head_dim;

  std::vector<Tensor> y, x, residual, gate_up;
  std::vector<nn::KvCache> cache;
  for (int i = 0; i < kLayers; ++i) {
    y.push_back(Tensor::rand_uniform({batch, 1, qkv}, -1, 1, dt, dev));
    x.push_back(Tensor::rand_uniform({batch, 1, dim}, -1, 1, dt, dev));
    residual.push_back(Tensor::rand_uniform({batch, 1, dim}, -1, 1, dt, dev));
    gate_up.push_back(Tensor::rand_uniform({batch, 1, 2 * hidden}, -1, 1, dt, dev));
    cache.emplace_back(batch, kv_heads, length, head_dim, dt, dev);
    const Tensor k = Tensor::rand_uniform({batch, kv_heads, context, head_dim}, -1, 1, dt, dev);
    cache.back().append(k, k.mul(0.5));
    cache.back().set_size(length);  // the span: keys() and values() are what a step reads
  }
  const Tensor norm_weight = Tensor::rand_uniform({dim}, 0.5, 1.5, dt, dev);
  const Tensor cos = Tensor::rand_uniform({1, head_dim / 2}, -1, 1, dt, dev);
  const Tensor sin = Tensor::rand_uniform({1, head_dim / 2}, -1, 1, dt, dev);
  const Tensor at = Tensor::from_vector(std::vector<int64_t>{context}, {1}, dev);
  std::vector<float> mask_host(static_cast<size_t>(batch * length), 0.f);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t p = context + 1; p < length; ++p)
      mask_host[static_cast<size_t>(b * length + p)] = -std::numeric_limits<float>::infinity();
  const Tensor mask = Tensor::from_vector(mask_host, {batch, 1, 1, length}, dev).to_dtype(dt);
  const Tensor fill_target = Tensor::zeros({batch, dim}, dt, dev);

  // The views the runner makes of one stacked q, k, v product: heads (b, h, 1, d).
  auto heads_of = [&](const Tensor& t, int64_t from, int64_t n) {
    return t.narrow(-1, from * head_dim, n * head_dim).reshape({batch, 1, n, head_dim}).transpose(1, 2);
  };
  nn::AttentionOptions options;
  options.causal = true;
  options.mask = mask;

  const char* path = std::getenv("WICK_ATTENTION");
  std::printf("device %s, batch %lld, context %lld (keys read %lld), attention path %s, us per call in a graph:\n",
              dev.to_string().c_str(), static_cast<long long>(batch), static_cast<long long>(context),
              static_cast<long long>(length), path ? path : "default");
  struct Row {
    const char* name;
    std::function<void(int)> op;
  };
  const std::vector<Row> rows = {
      {"fill (one row)", [&](int) { fill_target.narrow(0, 0, 1).fill(1.0); }},
      {"rope (q and k)", [&](int i) { (void)nn::rope(heads_of(y[i], 0, heads + kv_heads), cos, sin); }},
      {"kv write_at",
       [&](int i) {
         (void)cache[i].write_at(heads_of(y[i], heads, kv_heads), heads_of(y[i], heads + kv_heads, kv_heads), at,
                                 length);
       }},
      {"rope_write_at",
       [&](int i) {
         (void)cache[i].rope_write_at(heads_of(y[i], 0, heads), heads_of(y[i], heads, kv_heads),
                                      heads_of(y[i], heads + kv_heads, kv_heads), cos, sin, false, at, length);
       }},
      {"attention",
       [&](int i) {
         (void)nn::scaled_dot_product_attention(heads_of(y[i], 0, heads), cache[i].keys(), cache[i].values(), options);
       }},
      {"add_rms_norm", [&](int i) { (void)nn::add_rms_norm(x[i], residual[i], norm_weight, 1e-5); }},
      {"silu_mul",
       [&](int i) { (void)nn::silu_mul(gate_up[i].narrow(-1, 0, hidden), gate_up[i].narrow(-1, hidden, hidden)); }},
  };
  for (const Row& r : rows) std::printf("  %-16s %8.2f\n", r.name, us_per_call(dev, reps, r.op));
  return 0;
}
