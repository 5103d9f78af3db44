// Batch-invariant mode (wick::set_batch_invariant) on every device: each row of a linear layer's
// product (dense and block formats), of a norm and of paged attention gets the same bits alone, in
// any batch, at any position of it, from a view at any offset; paged attention's bits do not
// depend on the other tokens, the tables' width or whether the token decodes or ends a chunk; and a
// model's logits for one sequence are the same bits beside other sequences, however its prompt is
// chunked, in forward_paged and in recorded decode steps.
#include <algorithm>
#include <bit>
#include <cstring>
#include <numeric>
#include <random>

#include "cpu/quant/qdot.h"
#include "test_util.h"
#include "wick/models/llama.h"
#include "wick/nn.h"
#include "wick/ops.h"
#include "wick/quant.h"

namespace wick::test {
namespace {

using quant::QTensor;
using quant::QType;

class InvariantTest : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
  void SetUp() override { was_ = set_batch_invariant(true); }
  void TearDown() override { set_batch_invariant(was_); }

 private:
  bool was_ = false;
};

// The values' bits, widened exactly to f32 on the host.
std::vector<uint32_t> bits(const Tensor& t) {
  const std::vector<float> v =
      t.to_device(Device::cpu()).to_dtype(DType::F32).contiguous().reshape({-1}).to_vector<float>();
  std::vector<uint32_t> b(v.size());
  std::transform(v.begin(), v.end(), b.begin(), [](float x) { return std::bit_cast<uint32_t>(x); });
  return b;
}

// Rows [start, start + count) of `all` (rows along dim 0).
std::vector<uint32_t> rows_of(const Tensor& all, int64_t start, int64_t count) {
  return bits(all.narrow(0, start, count));
}

// Subsets of 37 rows: single rows first, middle and last; tiles split anywhere; nearly all.
const std::vector<std::pair<int64_t, int64_t>> kSubsets = {{0, 1}, {5, 1}, {36, 1},  {3, 2},   {10, 3}, {0, 4}, {1, 7},
                                                           {2, 8}, {4, 9}, {11, 16}, {20, 17}, {0, 33}, {1, 36}};
constexpr int64_t kRows = 37;

// f(rows of x) for each subset, taken from a view at the subset's offset and from a fresh copy, and
// for the rows in reverse order, against f(x) row by row.
template <typename F>
void expect_rows_invariant(const Tensor& x, const F& f, const std::string& what) {
  const Tensor all = f(x);
  for (const auto& [start, count] : kSubsets) {
    const Tensor view = x.narrow(0, start, count);
    EXPECT_EQ(bits(f(view)), rows_of(all, start, count)) << what << ": rows " << start << "+" << count << " (a view)";
    EXPECT_EQ(bits(f(view.copy())), rows_of(all, start, count)) << what << ": rows " << start << "+" << count;
  }
  std::vector<int64_t> order(static_cast<size_t>(kRows));
  std::iota(order.rbegin(), order.rend(), 0);
  const Tensor reversed = Tensor::from_vector(order, {kRows}, x.device());
  EXPECT_EQ(bits(f(x.index_select(reversed, 0))), bits(all.index_select(reversed, 0))) << what << ": reversed";
}

std::vector<DType> float_dtypes() { return {DType::F32, DType::F16, DType::BF16}; }

TEST_P(InvariantTest, LinearProductRowsDoNotDependOnTheBatch) {
  manual_seed(1, device());
  for (DType dt : float_dtypes()) {
    for (auto [n, k] : {std::pair<int64_t, int64_t>{48, 64}, {72, 1000}, {300, 2048}, {33, 7}}) {
      const Tensor x = Tensor::rand_normal({kRows, k}, 0, 1, dt, device());
      const Tensor w = Tensor::rand_normal({n, k}, 0, 0.1, dt, device());
      const std::string what = detail::str_cat(dt, " (", kRows, ", ", k, ") x (", n, ", ", k, ")^T");
      expect_rows_invariant(
          x, [&](const Tensor& r) { return r.matmul(w.t()); }, what);
      // A weight stored as (k, n) rows, and rows of a 3-D batch.
      const Tensor wk = w.t().copy();
      expect_rows_invariant(
          x, [&](const Tensor& r) { return r.matmul(wk); }, what + ", weight stored (k, n)");
      const Tensor x3 = x.narrow(0, 0, 36).reshape({4, 9, k});
      EXPECT_EQ(bits(x3.matmul(w.t())), rows_of(x.matmul(w.t()), 0, 36)) << what << ": a (4, 9, k) batch";
      // Right, too: against the product in f64.
      const Tensor want = x.to_dtype(DType::F64).matmul(w.to_dtype(DType::F64).t());
      const double tol = dt == DType::F32 ? 1e-4 : dt == DType::F16 ? 2e-2 : 1e-1;
      EXPECT_LT(x.matmul(w.t()).to_dtype(DType::F64).sub(want).abs().max().item<double>(), tol * std::sqrt(k / 64.0))
          << what;
    }
  }
}

// On ROCm, f16 and bf16 rows times a weight take the mode's kernel from 2 rows to 8 (a few
// sequences decoding) with the mode off too: the same bits either way. (Every AMD GPU wick builds
// for has the matrix units that kernel needs.)
TEST_P(InvariantTest, FewHalfRowsTakeTheModesProductOutsideIt) {
  if (device().type() != DeviceType::Rocm) GTEST_SKIP() << "outside the mode, the vendor BLAS takes these products";
  manual_seed(5, device());
  for (DType dt : {DType::F16, DType::BF16}) {
    for (auto [n, k] : {std::pair<int64_t, int64_t>{300, 2048}, {1203, 1000}}) {
      const Tensor w = Tensor::rand_normal({n, k + 16}, 0, 0.1, dt, device()).narrow(1, 8, k);
      for (int64_t rows = 2; rows <= 8; ++rows) {
        const Tensor x = Tensor::rand_normal({rows, k + 8}, 0, 1, dt, device()).narrow(1, 0, k);
        const auto in_mode = bits(x.matmul(w.t()));
        const bool was = set_batch_invariant(false);
        const auto outside = bits(x.matmul(w.t()));
        set_batch_invariant(was);
        EXPECT_EQ(outside, in_mode) << dt << " (" << rows << ", " << k << ") x (" << n << ", " << k << ")^T";
      }
    }
  }
}

TEST_P(InvariantTest, BlockFormatProductRowsDoNotDependOnTheBatch) {
  manual_seed(2, device());
  const int64_t n = 40, k = 512;
  for (QType q : {QType::Q4_0, QType::Q4_1, QType::Q5_0, QType::Q5_1, QType::Q8_0, QType::Q2_K, QType::Q3_K,
                  QType::Q4_K, QType::Q5_K, QType::Q6_K}) {
    const QTensor w = quant::quantize(Tensor::rand_normal({n, k}, 0, 0.1, DType::F32), q).to_device(device());
    for (DType dt : float_dtypes()) {
      const Tensor x = Tensor::rand_normal({kRows, k}, 0, 1, dt, device());
      const std::string what = detail::str_cat(quant::qtype_name(q), " times ", dt);
      if (!device().is_cpu()) {
        expect_rows_invariant(
            x, [&](const Tensor& r) { return quant::qmatmul(r, w); }, what);
        continue;
      }
      // Each SIMD kernel this machine has, and the portable loop; the weight's blocks arranged for
      // the products too (QTensor::arrange), where that instruction set arranges them.
      namespace qdot = cpu::qdot;
      for (qdot::Isa isa : {qdot::Isa::None, qdot::Isa::Avx2, qdot::Isa::Avx512Vnni}) {
        if (isa > qdot::best_isa()) continue;
        const qdot::Isa was = qdot::set_isa_limit(isa);
        std::vector<QTensor> forms = {w};
        if (const QTensor a = w.arrange(); a.arranged()) forms.push_back(a);
        for (const QTensor& v : forms)
          expect_rows_invariant(
              x, [&](const Tensor& r) { return quant::qmatmul(r, v); },
              detail::str_cat(what, v.arranged() ? " (arranged)" : "", ", instruction set ", static_cast<int>(isa)));
        qdot::set_isa_limit(was);
      }
    }
  }
}

TEST_P(InvariantTest, NormRowsDoNotDependOnTheBatch) {
  manual_seed(3, device());
  for (DType dt : float_dtypes()) {
    for (int64_t d : {64, 1000, 4096}) {
      const Tensor x = Tensor::rand_normal({kRows, d}, 0, 1, dt, device());
      const Tensor residual = Tensor::rand_normal({kRows, d}, 0, 1, dt, device());
      const Tensor w = Tensor::rand_normal({d}, 1, 0.1, dt, device());
      const std::string what = detail::str_cat(dt, " rows of ", d);
      expect_rows_invariant(
          x, [&](const Tensor& r) { return nn::rms_norm(r, w, 1e-5); }, "rms_norm, " + what);
      const Tensor both = cat({x, residual}, 1);  // rows of x beside their residual
      expect_rows_invariant(
          both,
          [&](const Tensor& r) {
            const nn::AddRmsNorm s = nn::add_rms_norm(r.narrow(1, 0, d), r.narrow(1, d, d), w, 1e-5);
            return cat({s.sum, s.normed}, 1);
          },
          "add_rms_norm, " + what);
    }
  }
}

// One token of paged attention, h query heads of dim d over pools of shuffled blocks: alone with a
// table just wide enough, beside other sequences' decode tokens with a wider table, and as the last
// query of a chunk.
TEST_P(InvariantTest, PagedAttentionTokensDoNotDependOnTheBatch) {
  manual_seed(4, device());
  const int64_t h = 8, h_kv = 2, d = 64, bs = 16;
  const std::vector<int64_t> lengths = {37, 300, 5, 1100, 64};
  int64_t blocks = 0;
  for (int64_t len : lengths) blocks += (len + bs - 1) / bs;
  for (DType dt : float_dtypes()) {
    for (int64_t window : {int64_t{0}, int64_t{100}}) {
      const Tensor k_pool = Tensor::rand_normal({blocks, bs, h_kv, d}, 0, 1, dt, device());
      const Tensor v_pool = Tensor::rand_normal({blocks, bs, h_kv, d}, 0, 1, dt, device());
      std::vector<int32_t> order(static_cast<size_t>(blocks));
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), std::mt19937(5));
      // Sequence s's blocks: order[first[s]..].
      std::vector<int64_t> first;
      for (int64_t at = 0; int64_t len : lengths) first.push_back(std::exchange(at, at + (len + bs - 1) / bs));
      auto tables = [&](const std::vector<int64_t>& seqs, int64_t width) {
        std::vector<int32_t> t(seqs.size() * static_cast<size_t>(width), -1);
        for (size_t i = 0; i < seqs.size(); ++i) {
          const auto s = static_cast<size_t>(seqs[i]);
          for (int64_t j = 0; j < (lengths[s] + bs - 1) / bs; ++j)
            t[i * static_cast<size_t>(width) + static_cast<size_t>(j)] = order[static_cast<size_t>(first[s] + j)];
        }
        return Tensor::from_vector(t, {static_cast<int64_t>(seqs.size()), width}, device());
      };
      const Tensor q_all = Tensor::rand_normal({64, h, d}, 0, 1, dt, device());
      const nn::PagedAttentionOptions args{std::nullopt, window};
      // Each sequence's last position, its query row q_all[s].
      for (int64_t s = 0; s < static_cast<int64_t>(lengths.size()); ++s) {
        const auto u = static_cast<size_t>(s);
        const int32_t p = static_cast<int32_t>(lengths[u] - 1);
        const Tensor q = q_all.narrow(0, s, 1);
        const Tensor alone = nn::paged_attention(q, k_pool, v_pool, tables({s}, (lengths[u] + bs - 1) / bs),
                                                 Tensor::from_vector(std::vector<int32_t>{0}, {1}, device()),
                                                 Tensor::from_vector(std::vector<int32_t>{p}, {1}, device()), args);
        const std::string what = detail::str_cat(dt, ", window ", window, ", sequence of ", lengths[u]);
        // Beside every sequence's decode token, in reverse order, the table 80 blocks wide.
        std::vector<int64_t> all(lengths.size());
        std::iota(all.rbegin(), all.rend(), 0);
        std::vector<int32_t> seq_ids, pos;
        std::vector<int64_t> rows;
        for (size_t i = 0; i < all.size(); ++i) {
          seq_ids.push_back(static_cast<int32_t>(i));
          pos.push_back(static_cast<int32_t>(lengths[static_cast<size_t>(all[i])] - 1));
          rows.push_back(all[i]);
        }
        const auto n = static_cast<int64_t>(all.size());
        const Tensor batch = nn::paged_attention(
            q_all.index_select(Tensor::from_vector(rows, {n}, device()), 0), k_pool, v_pool, tables(all, 80),
            Tensor::from_vector(seq_ids, {n}, device()), Tensor::from_vector(pos, {n}, device()), args);
        EXPECT_EQ(bits(batch.narrow(0, n - 1 - s, 1)), bits(alone)) << what << ": beside the others";
        // The last query of a chunk of up to 12 positions of its own sequence, after a decode token
        // of sequence 1.
        const int64_t c = std::min<int64_t>(12, lengths[u]);
        std::vector<int32_t> chunk_seqs = {1}, chunk_pos = {static_cast<int32_t>(lengths[1] - 1)};
        std::vector<int64_t> chunk_rows = {63};
        for (int64_t j = 0; j < c; ++j) {
          chunk_seqs.push_back(0);
          chunk_pos.push_back(static_cast<int32_t>(p - c + 1 + j));
          chunk_rows.push_back(j == c - 1 ? s : 50 + j % 10);
        }
        const Tensor chunk =
            nn::paged_attention(q_all.index_select(Tensor::from_vector(chunk_rows, {c + 1}, device()), 0), k_pool,
                                v_pool, tables({s, 1}, 70), Tensor::from_vector(chunk_seqs, {c + 1}, device()),
                                Tensor::from_vector(chunk_pos, {c + 1}, device()), args);
        EXPECT_EQ(bits(chunk.narrow(0, c, 1)), bits(alone)) << what << ": the last of a chunk";
      }
    }
  }
}

// A sequence's logits at every position: run alone (its prompt whole, then decode steps), and beside
// two others (its prompt in chunks of 4, 1, 13 and 11, then decode steps in recorded steps with
// the others at other places in the batch): the same bits.
TEST_P(InvariantTest, ModelLogitsDoNotDependOnTheBatch) {
  models::LlamaConfig c = models::LlamaConfig::preset("llama3-8b");
  c.vocab = 96, c.dim = 128, c.hidden = 256, c.layers = 2, c.heads = 4, c.kv_heads = 2, c.head_dim = 32,
  c.context = 128;
  for (DType dt : {DType::F32, DType::BF16}) {
    const models::LlamaModel m = models::LlamaModel::random(c, device(), dt, std::nullopt, 6);
    std::mt19937 rng(7);
    std::uniform_int_distribution<int32_t> id(0, 95);
    auto random_tokens = [&](int64_t n) {
      std::vector<int32_t> t(static_cast<size_t>(n));
      for (int32_t& x : t) x = id(rng);
      return t;
    };
    const int64_t bs = 8, decode = 6;
    const std::vector<int64_t> prompt = {29, 40, 7};
    std::vector<std::vector<int32_t>> tokens;
    for (int64_t n : prompt) tokens.push_back(random_tokens(n + decode + 4));
    // Runs batches of (sequence, position count) in order; returns sequence 0's logits per position.
    auto run = [&](const std::vector<std::vector<std::pair<int32_t, int64_t>>>& steps, bool recorded) {
      models::PagedKvCache pool = m.make_paged_cache(3 * 8 + 1, bs, models::KvType::Model);
      pool.scratch = 24;
      std::optional<models::PagedDecodeGraph> graph;
      if (recorded) graph.emplace(m, pool, 4);
      std::vector<int64_t> done(3, 0);
      std::vector<uint32_t> got;
      for (const auto& step : steps) {
        models::PagedBatch b;
        b.max_blocks = 8;
        std::vector<int64_t> mine;  // sequence 0's rows of the step
        for (const auto& [s, n] : step) {
          const auto u = static_cast<size_t>(s);
          for (int64_t j = 0; j < 8; ++j) b.tables.push_back(static_cast<int32_t>(s * 8 + (j * 5 + s) % 8));
          const int32_t row = static_cast<int32_t>(b.tables.size() / 8 - 1);
          for (int64_t p = done[u]; p < done[u] + n; ++p) {
            if (s == 0) mine.push_back(static_cast<int64_t>(b.tokens.size()));
            b.logits_of.push_back(static_cast<int64_t>(b.tokens.size()));
            b.tokens.push_back(tokens[u][static_cast<size_t>(p)]);
            b.seqs.push_back(row);
            b.positions.push_back(static_cast<int32_t>(p));
            b.slots.push_back(int64_t{b.tables[static_cast<size_t>(row) * 8 + static_cast<size_t>(p / bs)]} * bs +
                              p % bs);
          }
          done[u] += n;
        }
        const bool decode_only = std::all_of(step.begin(), step.end(), [](const auto& e) { return e.second == 1; });
        const Tensor logits = graph && decode_only ? graph->step(b).copy() : m.forward_paged(b, pool);
        if (mine.empty()) continue;
        const std::vector<uint32_t> l =
            bits(logits.index_select(Tensor::from_vector(mine, {static_cast<int64_t>(mine.size())}, device()), 0));
        got.insert(got.end(), l.begin(), l.end());
      }
      if (graph) {
        EXPECT_EQ(graph->recording_error(), "");
      }
      return got;
    };
    std::vector<std::vector<std::pair<int32_t, int64_t>>> alone = {{{0, 29}}};
    for (int64_t i = 0; i < decode; ++i) alone.push_back({{0, 1}});
    const std::vector<uint32_t> want = run(alone, false);
    ASSERT_EQ(want.size(), static_cast<size_t>((29 + decode) * 96));
    std::vector<std::vector<std::pair<int32_t, int64_t>>> beside = {
        {{1, 30}, {0, 4}}, {{2, 7}, {0, 1}, {1, 10}}, {{0, 13}, {2, 1}}, {{1, 1}, {2, 1}, {0, 11}}};
    for (int64_t i = 0; i < decode; ++i) {
      if (i % 2 == 0)
        beside.push_back({{1, 1}, {0, 1}, {2, 1}});
      else
        beside.push_back({{2, 1}, {1, 1}, {0, 1}});
    }
    for (bool recorded : {false, true})
      EXPECT_EQ(run(beside, recorded), want) << dt << (recorded ? ", recorded decode steps" : "");
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, InvariantTest, ::testing::ValuesIn(devices()), device_name);

}  // namespace
}  // namespace wick::test
