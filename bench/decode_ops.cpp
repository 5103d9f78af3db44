// Times the ops of a Llama decode step, as a recorded step runs them: each op 32 times in one
// wick::Graph (one call per layer, each layer with its own tensors), the graph replayed,
// microseconds per call. The shape is Llama 3 8B's at batch 1 by default (32 query heads, 8 key
// heads, head dim 128, width 4096, feed-forward 14336), in bf16 (--dtype f16: f16), with the
// cache's first `context` positions filled and the keys read in spans of 256 positions as the
// runner reads them (the positions past the context hidden by the mask). The first row times a
// fill of one row of the width: the cost of any node of the graph.
//
// With --qtype, each of a layer's four products (q, k and v stacked; o; gate and up stacked; down)
// is timed the same way, with that block format's weights (bf16: dense weights, in the dtype of
// the activations), 32 layers of its own so that the weights come from memory, and the weight
// bytes read per microsecond (GB/s) printed beside a copy of 256 MiB timed alike.
//
//   bench_decode_ops [--context N] [--batch B] [--reps R] [--dtype bf16|f16] [--qtype bf16|q4_k|...]...
//                    [--product NAME] [--moe SHAPE] [--deterministic]
//
// --product times only the products whose name holds NAME ("gate_up"), and no other op.
// --moe SHAPE times the ops of a mixture of experts' feed-forward instead (qwen3-30b-a3b: 128
// experts of width 768 over 2048, 8 a token; mixtral-8x7b: 8 of 14336 over 4096, 2 a token), as
// models/blocks/moe.cpp runs them, with the experts' weights stacked in the first --qtype's format
// (q4_k by default) and every layer's router scores random (so each layer chooses its own
// experts), then all of them in a row: the mixture of one layer (at batch 1 the token's row read in
// place by the grouped product, as the model does; the row "gathered" gathers it first, as batch 2
// and more do).
// --deterministic runs every op in batch-invariant mode (wick::set_batch_invariant).
//
// The attention kernel is chosen as in a model: set WICK_ATTENTION (library, own, rows) to compare.
// The rows marked "paged" are the engine's step ops (models/blocks/decoder.cpp's run_paged): rope of
// q and of k apart and the write into a pool of 16-position blocks (shuffled), or both in one
// (paged_rope_write, what the step calls), and paged_attention reading each sequence's context + 1
// positions through its block table.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <optional>
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

// A layer's products for each format in `formats`, as the runner makes them: x (batch, 1, in) times
// a weight (out, in) transposed, dense bf16 or blocks (256 random rows quantized, repeated).
void time_products(Device dev, int reps, int64_t batch, DType dt, const std::vector<std::string>& formats,
                   const std::string& only) {
  const Tensor from = Tensor::rand_uniform({int64_t{128} << 20}, -1, 1, DType::BF16, dev);
  Tensor to = Tensor::zeros({from.numel()}, DType::BF16, dev);
  const double copy_us = us_per_call(dev, reps, [&](int) { to.copy_from(from); });
  const double copy_gbs = 2.0 * static_cast<double>(from.numel()) * 2.0 / (copy_us * 1e3);
  std::printf("products, us per call in a graph (GB/s of weight bytes; copy of 256 MiB: %.2f us, %.0f GB/s):\n",
              copy_us, copy_gbs);
  struct Shape {
    const char* name;
    int64_t out, in;
  };
  const Shape shapes[] = {{"qkv 6144x4096", 6144, 4096},
                          {"o 4096x4096", 4096, 4096},
                          {"gate_up 28672x4096", 28672, 4096},
                          {"down 4096x14336", 4096, 14336}};
  for (const std::string& format : formats) {
    const std::optional<quant::QType> q = quant::parse_qtype(format);
    for (const Shape& s : shapes) {
      if (std::string(s.name).find(only) == std::string::npos) continue;
      std::vector<Tensor> dense;
      std::vector<quant::QTensor> blocks;
      std::vector<Tensor> xs;
      int64_t bytes = 0;
      for (int i = 0; i < kLayers; ++i) {
        xs.push_back(Tensor::rand_uniform({batch, 1, s.in}, -1, 1, dt, dev));
        if (q) {
          const int64_t rows = 256;
          const quant::QTensor block = quant::quantize(Tensor::rand_normal({rows, s.in}, 0.0, 0.02), *q).to_device(dev);
          std::vector<int64_t> rows_of(static_cast<size_t>(s.out));
          for (int64_t r = 0; r < s.out; ++r) rows_of[static_cast<size_t>(r)] = (r * 7 + i) % rows;
          const Tensor which = Tensor::from_vector(rows_of, {s.out}, dev);
          blocks.emplace_back(*q, s.out, s.in, block.bytes().index_select(which, 0));
          bytes = blocks.back().nbytes();
        } else {
          dense.push_back(Tensor::rand_normal({s.out, s.in}, 0.0, 0.02, dt, dev));
          bytes = s.out * s.in * 2;
        }
      }
      const double us = us_per_call(dev, reps, [&](int i) {
        (void)(q ? quant::qmatmul(xs[i], blocks[i]) : xs[i].matmul(dense[i].transpose(0, 1)));
      });
      const double gbs = static_cast<double>(bytes) / (us * 1e3);
      std::printf("  %-5s %-20s %8.2f  (%5.0f GB/s, %.2f of copy)\n", format.c_str(), s.name, us, gbs, gbs / copy_gbs);
    }
  }
}

// The mixture of experts' ops of a decode step (see --moe in the header), us per call in a graph.
bool time_mixture(Device dev, int reps, int64_t batch, DType dt, const std::string& shape, quant::QType q) {
  struct Mixture {
    const char* name;
    int64_t dim, hidden, experts, k;
  };
  const Mixture shapes[] = {{"qwen3-30b-a3b", 2048, 768, 128, 8}, {"mixtral-8x7b", 4096, 14336, 8, 2}};
  const Mixture* m = nullptr;
  for (const Mixture& c : shapes)
    if (shape == c.name) m = &c;
  if (m == nullptr) {
    std::fprintf(stderr, "bench_decode_ops: --moe takes qwen3-30b-a3b or mixtral-8x7b, not '%s'\n", shape.c_str());
    return false;
  }
  // Stacked weights of 256 random rows quantized, repeated in an order of each layer's own.
  auto stacked = [&](int64_t rows, int64_t cols, int layer) {
    const quant::QTensor block = quant::quantize(Tensor::rand_normal({256, cols}, 0.0, 0.02), q).to_device(dev);
    std::vector<int64_t> rows_of(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) rows_of[static_cast<size_t>(r)] = (r * 7 + layer) % 256;
    return quant::QTensor(q, rows, cols, block.bytes().index_select(Tensor::from_vector(rows_of, {rows}, dev), 0));
  };
  std::vector<Tensor> x, router, scores;
  std::vector<quant::QTensor> gate_up, down;
  std::vector<nn::MoeRouting> routing;
  std::vector<Tensor> rows, gu, act, y;
  int64_t expert_bytes = 0;
  // The pairs' rows as models/blocks/moe.cpp makes them: one token's row expanded, else gathered.
  auto pairs_rows = [&](const Tensor& xi, const nn::MoeRouting& r) {
    return batch == 1 ? xi.broadcast_as({m->k, m->dim}) : xi.index_select(r.tokens, 0);
  };
  for (int i = 0; i < kLayers; ++i) {
    x.push_back(Tensor::rand_uniform({batch, m->dim}, -1, 1, dt, dev));
    router.push_back(Tensor::rand_normal({m->experts, m->dim}, 0.0, 1.0, dt, dev));
    scores.push_back(Tensor::rand_normal({batch, m->experts}, 0.0, 1.0, dt, dev));
    gate_up.push_back(stacked(m->experts * 2 * m->hidden, m->dim, i));
    down.push_back(stacked(m->experts * m->dim, m->hidden, i));
    expert_bytes = (gate_up.back().nbytes() + down.back().nbytes()) / m->experts;
    routing.push_back(nn::moe_route(scores.back(), m->k, true));
    rows.push_back(pairs_rows(x.back(), routing.back()));
    gu.push_back(quant::qmatmul_grouped(rows.back(), gate_up.back(), m->experts, routing.back().groups, batch));
    act.push_back(nn::silu_mul(gu.back().narrow(1, 0, m->hidden), gu.back().narrow(1, m->hidden, m->hidden)));
    y.push_back(quant::qmatmul_grouped(act.back(), down.back(), m->experts, routing.back().groups, batch));
  }
  const Tensor ids = routing[0].ids.to_device(Device::cpu());
  std::printf("mixture %s, %s experts, %s, batch %lld, %lld of %lld experts a token; us per call in a graph:\n",
              m->name, std::string(quant::qtype_name(q)).c_str(), std::string(dtype_name(dt)).c_str(),
              static_cast<long long>(batch), static_cast<long long>(m->k), static_cast<long long>(m->experts));
  struct Row {
    const char* name;
    std::function<void(int)> op;
  };
  std::vector<Row> ops = {
      {"router product", [&](int i) { (void)x[i].matmul(router[i].transpose(0, 1)); }},
      {"moe_route", [&](int i) { (void)nn::moe_route(scores[i], m->k, true); }},
      {"rows (gather)", [&](int i) { (void)x[i].index_select(routing[i].tokens, 0); }},
      {"gate_up grouped",
       [&](int i) { (void)quant::qmatmul_grouped(rows[i], gate_up[i], m->experts, routing[i].groups, batch); }},
      {"silu_mul",
       [&](int i) { (void)nn::silu_mul(gu[i].narrow(1, 0, m->hidden), gu[i].narrow(1, m->hidden, m->hidden)); }},
      {"down grouped",
       [&](int i) { (void)quant::qmatmul_grouped(act[i], down[i], m->experts, routing[i].groups, batch); }},
      {"moe_combine", [&](int i) { (void)nn::moe_combine(y[i], routing[i]); }},
  };
  auto mixture = [&](int i, bool gathered) {
    const nn::MoeRouting r = nn::moe_route(x[i].matmul(router[i].transpose(0, 1)), m->k, true);
    const Tensor in = gathered ? x[i].index_select(r.tokens, 0) : pairs_rows(x[i], r);
    const Tensor g = quant::qmatmul_grouped(in, gate_up[i], m->experts, r.groups, batch);
    const Tensor a = nn::silu_mul(g.narrow(1, 0, m->hidden), g.narrow(1, m->hidden, m->hidden));
    (void)nn::moe_combine(quant::qmatmul_grouped(a, down[i], m->experts, r.groups, batch), r);
  };
  ops.push_back({"the mixture", [&](int i) { mixture(i, false); }});
  if (batch == 1) ops.push_back({"  gathered", [&](int i) { mixture(i, true); }});
  for (const Row& r : ops) std::printf("  %-16s %8.2f\n", r.name, us_per_call(dev, reps, r.op));
  // The experts' bytes a step reads: each distinct expert the batch chose, once (layer 0's choice).
  std::vector<int64_t> chosen = ids.to_vector<int64_t>();
  std::sort(chosen.begin(), chosen.end());
  const auto distinct = std::unique(chosen.begin(), chosen.end()) - chosen.begin();
  std::printf("  (layer 0: %lld distinct experts, %.2f MB of their weights)\n", static_cast<long long>(distinct),
              static_cast<double>(distinct * expert_bytes) / 1e6);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t context = 128, batch = 1;
  int reps = 9;
  DType dt = DType::BF16;
  std::vector<std::string> products;
  std::string only;  // --product: only the products whose name holds this, and none of the other ops
  std::string mixture;  // --moe: the ops of this shape's mixture of experts, and none of the other ops
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--context" && i + 1 < argc) {
      context = std::atoll(argv[++i]);
    } else if (a == "--batch" && i + 1 < argc) {
      batch = std::atoll(argv[++i]);
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (a == "--product" && i + 1 < argc) {
      only = argv[++i];
    } else if (a == "--moe" && i + 1 < argc) {
      mixture = argv[++i];
    } else if (a == "--dtype" && i + 1 < argc) {
      const std::string v = argv[++i];
      if (v != "bf16" && v != "f16") {
        std::fprintf(stderr, "bench_decode_ops: --dtype takes bf16 or f16, not '%s'\n", v.c_str());
        return 2;
      }
      dt = v == "f16" ? DType::F16 : DType::BF16;
    } else if (a == "--deterministic") {
      set_batch_invariant(true);
    } else if (a == "--qtype" && i + 1 < argc) {
      products.emplace_back(argv[++i]);
      if (products.back() != "bf16" && !quant::parse_qtype(products.back())) {
        std::fprintf(stderr, "bench_decode_ops: unknown block format '%s'\n", products.back().c_str());
        return 2;
      }
    } else {
      std::fprintf(
          stderr,
          "usage: bench_decode_ops [--context N] [--batch B] [--reps R] [--dtype bf16|f16] [--qtype bf16|q4_k|...]..."
          " [--product NAME] [--moe SHAPE] [--deterministic]\n");
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
  if (!mixture.empty()) {
    const quant::QType q =
        products.empty() || products[0] == "bf16" ? quant::QType::Q4_K : *quant::parse_qtype(products[0]);
    return time_mixture(dev, reps, batch, dt, mixture, q) ? 0 : 2;
  }
  constexpr int64_t heads = 32, kv_heads = 8, head_dim = 128, dim = 4096, hidden = 14336, span = 256;
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
  std::printf("device %s, %s, batch %lld, context %lld (keys read %lld), attention path %s, us per call in a graph:\n",
              dev.to_string().c_str(), std::string(dtype_name(dt)).c_str(), static_cast<long long>(batch),
              static_cast<long long>(context), static_cast<long long>(length), path ? path : "default");
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
      {"rope_write_attention",
       [&](int i) {
         (void)cache[i].rope_write_attention(heads_of(y[i], 0, heads), heads_of(y[i], heads, kv_heads),
                                             heads_of(y[i], heads + kv_heads, kv_heads), cos, sin, false, at, length,
                                             options);
       }},
      {"add_rms_norm", [&](int i) { (void)nn::add_rms_norm(x[i], residual[i], norm_weight, 1e-5); }},
      {"silu_mul",
       [&](int i) { (void)nn::silu_mul(gate_up[i].narrow(-1, 0, hidden), gate_up[i].narrow(-1, hidden, hidden)); }},
  };
  // The engine's pools: every sequence its own blocks, handed out in a shuffled order.
  constexpr int64_t bs = 16;
  const int64_t per_seq = (context + 1 + bs - 1) / bs, pool_blocks = batch * per_seq;
  std::vector<int32_t> table_host(static_cast<size_t>(pool_blocks));
  for (int64_t j = 0; j < pool_blocks; ++j)
    table_host[static_cast<size_t>(j)] = static_cast<int32_t>((j * 7919) % pool_blocks);
  std::vector<int32_t> seqs_host(static_cast<size_t>(batch)), positions_host(static_cast<size_t>(batch));
  std::vector<int64_t> slots_host(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    const auto u = static_cast<size_t>(b);
    seqs_host[u] = static_cast<int32_t>(b);
    positions_host[u] = static_cast<int32_t>(context);
    slots_host[u] = int64_t{table_host[static_cast<size_t>(b * per_seq + context / bs)]} * bs + context % bs;
  }
  std::vector<Tensor> k_pool, v_pool;
  for (int i = 0; i < kLayers; ++i) {
    k_pool.push_back(Tensor::rand_uniform({pool_blocks, bs, kv_heads, head_dim}, -1, 1, dt, dev));
    v_pool.push_back(Tensor::rand_uniform({pool_blocks, bs, kv_heads, head_dim}, -1, 1, dt, dev));
  }
  const Tensor tables = Tensor::from_vector(table_host, {batch, per_seq}, dev);
  const Tensor seqs = Tensor::from_vector(seqs_host, {batch}, dev);
  const Tensor positions = Tensor::from_vector(positions_host, {batch}, dev);
  const Tensor slots = Tensor::from_vector(slots_host, {batch}, dev);
  // The views run_paged makes: (t, heads, head_dim) of the stacked product.
  // A row of cos and sin per token, as paged_rope_write takes them.
  const Tensor token_cos = cos.broadcast_as({batch, head_dim / 2}), token_sin = sin.broadcast_as({batch, head_dim / 2});
  const std::vector<Row> paged_rows = {
      {"paged rope q, k",
       [&](int i) {
         (void)nn::rope(heads_of(y[i], 0, heads), cos, sin);
         (void)nn::rope(heads_of(y[i], heads, kv_heads), cos, sin);
       }},
      {"paged_write",
       [&](int i) {
         nn::paged_write(k_pool[i], v_pool[i], heads_of(y[i], heads, kv_heads).squeeze(2),
                         heads_of(y[i], heads + kv_heads, kv_heads).squeeze(2), slots);
       }},
      {"paged_rope_write",
       [&](int i) {
         (void)nn::paged_rope_write(
             k_pool[i], v_pool[i], heads_of(y[i], 0, heads).squeeze(2), heads_of(y[i], heads, kv_heads).squeeze(2),
             heads_of(y[i], heads + kv_heads, kv_heads).squeeze(2), token_cos, token_sin, false, slots);
       }},
      {"paged_attention",
       [&](int i) {
         (void)nn::paged_attention(heads_of(y[i], 0, heads).squeeze(2), k_pool[i], v_pool[i], tables, seqs, positions);
       }},
  };
  if (only.empty())
    for (const Row& r : rows) std::printf("  %-16s %8.2f\n", r.name, us_per_call(dev, reps, r.op));
  if (only.empty())
    for (const Row& r : paged_rows) std::printf("  %-16s %8.2f\n", r.name, us_per_call(dev, reps, r.op));
  if (!products.empty()) time_products(dev, reps, batch, dt, products, only);
  return 0;
}
