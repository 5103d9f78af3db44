// Cases for paged attention (nn::paged_attention): sequences of different lengths whose keys and
// values lie in shuffled blocks of one pool, queried by decode tokens (one per sequence) and
// prompt chunks (many, causal, after the sequence's cached positions), with grouped heads,
// windows, head dims of each tiling, strided queries and Q8_0 pools. The reference backend composes the op
// (the sequence's keys gathered by slot, then the composed attention); a backend with a kernel is
// compared with that. And nn::paged_rope_write, a step's rope and write into such a pool.
#include <algorithm>
#include <limits>
#include <numeric>
#include <random>

#include "parity/cases.h"
#include "wick/nn.h"
#include "wick/ops.h"
#include "wick/quant.h"

namespace wick::parity {

namespace {

struct PagedVariant {
  std::string name;
  std::vector<int64_t> lengths;  // each sequence's positions after the step
  int64_t chunk = 1;             // the step's tokens of each sequence (at most its length)
  int64_t h = 4, h_kv = 2, d = 16, block_size = 16;
  int64_t window = 0;
  bool strided_q = false;  // q a (t, h, d) view of (h, t, d) storage
  bool q8 = false;         // Q8_0 pools (nn.h): random values rounded by quant::quantize
};

std::vector<PagedVariant> paged_variants() {
  std::vector<PagedVariant> v = {
      {"decode", {1, 17, 5, 64}},
      {"decode", {300, 2, 31}, 1, 8, 2, 64, 16},
      {"decode", {2500, 900, 1}, 1, 8, 1, 128, 16},  // several thousand positions
      {"decode", {40, 33}, 1, 4, 4, 32, 1},          // blocks of one position
      {"decode", {70, 129, 3}, 1, 2, 1, 64, 32},
      {"chunk", {20, 48}, 8, 4, 2, 32, 16},  // chunks after cached positions
      {"chunk", {37}, 37, 4, 1, 16, 8},      // a whole prompt
      {"chunk", {300, 7}, 5, 8, 2, 64, 16, 0, true},
      {"window", {100, 30, 65}, 1, 4, 2, 32, 16, 24},
      {"window", {90, 45}, 12, 4, 2, 16, 8, 10},
      {"gqa8", {50, 16}, 3, 8, 1, 64, 16},
      {"mha", {21, 60}, 2, 4, 4, 16, 4},
      {"strided", {25, 70}, 1, 4, 2, 32, 16, 0, true},
  };
  for (int64_t d : {8, 80, 96, 256, 512}) v.push_back({"head_dim", {45, 9}, 2, 4, 2, d, 16, 0, d == 80});
  v.push_back({"head_dim", {20, 3}, 1, 2, 1, 600, 8});  // past kPagedMaxHeadDim: composed everywhere
  // Q8_0 pools, whose head dims are multiples of 32 (and one past the kernels' 512, composed).
  for (const PagedVariant& x : std::vector<PagedVariant>(v))
    if (x.d % 32 == 0 && x.d <= 512) {
      PagedVariant y = x;
      y.q8 = true;
      v.push_back(y);
    }
  v.push_back({"head_dim", {20, 3}, 1, 2, 1, 544, 8, 0, false, true});
  return v;
}

void add_paged(std::vector<Case>& cases, DType dt) {
  for (const PagedVariant& v : paged_variants()) {
    const auto s = static_cast<int64_t>(v.lengths.size());
    int64_t t = 0, max_blocks = 0, used = 0;
    for (int64_t len : v.lengths) {
      t += std::min(v.chunk, len);
      const int64_t nb = (len + v.block_size - 1) / v.block_size;
      max_blocks = std::max(max_blocks, nb);
      used += nb;
    }
    const int64_t blocks = used + 3;  // a few blocks no table lists
    std::string extra = "kv " + std::to_string(v.h_kv) + " blocks " + std::to_string(blocks) + "x" +
                        std::to_string(v.block_size) + " seqs " + std::to_string(s);
    if (v.window) extra += " window " + std::to_string(v.window);
    if (v.q8) extra += " q8_0";
    cases.push_back({OpKey(NnOp::PagedAttention).name(),
                     label(dt),
                     shape_label({t, v.h, v.d}, extra),
                     v.name + (v.strided_q ? ".strided" : "") + (v.q8 ? ".q8_0" : ""),
                     NnOp::PagedAttention,
                     {dt},
                     Compare::Float,
                     false,
                     [=](Ctx& c) {
                       const Device dev = c.backend().device();
                       // Physical blocks shuffled; table entries past a sequence's blocks are -1.
                       std::vector<int32_t> order(static_cast<size_t>(blocks));
                       std::iota(order.begin(), order.end(), 0);
                       std::shuffle(order.begin(), order.end(), c.rng());
                       std::vector<int32_t> table(static_cast<size_t>(s * max_blocks), -1), seqs, positions;
                       size_t next = 0;
                       for (int64_t i = 0; i < s; ++i) {
                         const int64_t len = v.lengths[static_cast<size_t>(i)];
                         for (int64_t j = 0; j < (len + v.block_size - 1) / v.block_size; ++j)
                           table[static_cast<size_t>(i * max_blocks + j)] = order[next++];
                         for (int64_t p = len - std::min(v.chunk, len); p < len; ++p) {
                           seqs.push_back(static_cast<int32_t>(i));
                           positions.push_back(static_cast<int32_t>(p));
                         }
                       }
                       const Shape pool = {blocks, v.block_size, v.h_kv, v.d};
                       // A pool of random values, or those values in Q8_0 rows.
                       auto make_pool = [&] {
                         const DType pdt = v.q8 ? DType::F32 : dt;
                         const Arg a = c.input(pdt, pool);
                         const Tensor x(a.storage, a.layout, pdt);
                         if (!v.q8) return x;
                         return quant::quantize(x.reshape({blocks * v.block_size * v.h_kv, v.d}), quant::QType::Q8_0)
                             .bytes()
                             .reshape({blocks, v.block_size, v.h_kv, nn::paged_q8_0_row_bytes(v.d)});
                       };
                       const Tensor k = make_pool();
                       const Tensor val = make_pool();
                       Tensor q;
                       if (v.strided_q) {
                         const Arg qa = c.input(dt, {v.h, t, v.d});
                         q = Tensor(qa.storage, qa.layout, dt).transpose(0, 1);
                       } else {
                         const Arg qa = c.input(dt, {t, v.h, v.d});
                         q = Tensor(qa.storage, qa.layout, dt);
                       }
                       nn::PagedAttentionOptions o;
                       o.window = v.window;
                       const Tensor out = nn::paged_attention(
                           q, k, val, Tensor::from_vector(table, {s, max_blocks}, dev),
                           Tensor::from_vector(seqs, {t}, dev), Tensor::from_vector(positions, {t}, dev), o);
                       return Output{out.contiguous().storage(), dt};
                     }});
  }
}

// nn::paged_rope_write: a step's q and k turned by rope and k and v written into shuffled slots of
// a pool (one slot skipped), q, k and v views of one stacked product as a model's; the output is q
// turned and both pools after the write, flattened together.
struct RopeWriteVariant {
  std::string name;
  int64_t t, h, h_kv, d, blocks, block_size;
  bool interleaved = false;
};

void add_paged_rope_write(std::vector<Case>& cases, DType dt) {
  const RopeWriteVariant variants[] = {
      {"decode", 3, 4, 2, 32, 4, 4},    {"decode", 1, 32, 8, 128, 6, 16},
      {"chunk", 37, 8, 2, 64, 5, 16},   {"interleaved", 9, 4, 4, 16, 3, 8, true},
      {"head_dim", 5, 2, 1, 256, 2, 4}, {"odd_dim", 4, 2, 2, 6, 2, 4},
  };
  for (const RopeWriteVariant& v : variants) {
    const std::string extra =
        "kv " + std::to_string(v.h_kv) + " blocks " + std::to_string(v.blocks) + "x" + std::to_string(v.block_size);
    cases.push_back({"nn.paged_rope_write",
                     label(dt),
                     shape_label({v.t, v.h, v.d}, extra),
                     v.name,
                     NnOp::RopeWriteAt,
                     {dt},
                     Compare::Float,
                     false,
                     [=](Ctx& c) {
                       const Device dev = c.backend().device();
                       const int64_t slots_held = v.blocks * v.block_size;
                       std::vector<int64_t> order(static_cast<size_t>(slots_held));
                       std::iota(order.begin(), order.end(), 0);
                       std::shuffle(order.begin(), order.end(), c.rng());
                       std::vector<int64_t> slots(order.begin(), order.begin() + v.t);
                       if (v.t > 2) slots[1] = std::numeric_limits<int64_t>::max();  // skipped
                       const Arg qa = c.input(dt, {v.t, v.h + 2 * v.h_kv, v.d});
                       const Tensor qkv(qa.storage, qa.layout, dt);
                       const Arg ca = c.input(dt, {v.t, v.d / 2}), sa = c.input(dt, {v.t, v.d / 2});
                       const Arg ka = c.input(dt, {v.blocks, v.block_size, v.h_kv, v.d});
                       const Arg va = c.input(dt, {v.blocks, v.block_size, v.h_kv, v.d});
                       Tensor k_pool = Tensor(ka.storage, ka.layout, dt).copy();
                       Tensor v_pool = Tensor(va.storage, va.layout, dt).copy();
                       const Tensor q = nn::paged_rope_write(
                           k_pool, v_pool, qkv.narrow(1, 0, v.h), qkv.narrow(1, v.h, v.h_kv),
                           qkv.narrow(1, v.h + v.h_kv, v.h_kv), Tensor(ca.storage, ca.layout, dt),
                           Tensor(sa.storage, sa.layout, dt), v.interleaved, Tensor::from_vector(slots, {v.t}, dev));
                       auto flat = [](const Tensor& x) { return x.contiguous().reshape({x.numel()}); };
                       const Tensor out = cat({flat(q), flat(k_pool), flat(v_pool)}, 0);
                       return Output{out.storage(), dt};
                     }});
  }
}

}  // namespace

void add_paged_cases(std::vector<Case>& cases) {
  for (DType dt : {DType::F64, DType::F32, DType::F16, DType::BF16}) add_paged(cases, dt);
  for (DType dt : {DType::F64, DType::F32, DType::F16, DType::BF16}) add_paged_rope_write(cases, dt);
}

}  // namespace wick::parity
