// Paged attention and the paged cache on every device: nn::paged_attention over keys written by
// nn::paged_write into shuffled blocks equals scaled_dot_product_attention over the same keys held
// contiguously (decode tokens and prompt chunks, windows, grouped heads); indices out of range are
// IndexErrors; and a model's forward_paged over a pool gives the logits forward() gives over its
// contiguous KvCache, chunk by chunk, for sequences of different lengths at once.
#include <algorithm>
#include <limits>
#include <numeric>
#include <random>
#include <tuple>

#include "paged_util.h"
#include "test_util.h"
#include "wick/models/llama.h"
#include "wick/nn.h"
#include "wick/quant.h"

namespace wick::test {
namespace {

class PagedTest : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
};

// Sequences' keys and values in a pool of shuffled blocks, and each held contiguously.
struct Pool {
  int64_t block_size, h_kv, d, max_blocks = 0;
  Tensor k_pool, v_pool;
  std::vector<int32_t> table;        // (sequences, max_blocks), -1 past a sequence's blocks
  std::vector<Tensor> keys, values;  // per sequence (1, h_kv, length, d)

  Pool(const std::vector<int64_t>& lengths, int64_t bs, int64_t kv_heads, int64_t dim, DType dt, Device dev,
       uint64_t seed)
      : block_size(bs), h_kv(kv_heads), d(dim) {
    int64_t blocks = 2;  // two blocks no sequence uses
    for (int64_t len : lengths) {
      blocks += (len + bs - 1) / bs;
      max_blocks = std::max(max_blocks, (len + bs - 1) / bs);
    }
    std::vector<int32_t> order(static_cast<size_t>(blocks));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<uint32_t>(seed)));
    k_pool = Tensor::rand_normal({blocks, bs, h_kv, d}, 0, 1, dt, dev);  // garbage where nothing is written
    v_pool = Tensor::rand_normal({blocks, bs, h_kv, d}, 0, 1, dt, dev);
    table.assign(lengths.size() * static_cast<size_t>(max_blocks), -1);
    size_t next = 0;
    for (size_t s = 0; s < lengths.size(); ++s) {
      const int64_t len = lengths[s];
      std::vector<int64_t> slots;
      for (int64_t p = 0; p < len; ++p) {
        if (p % bs == 0) table[s * static_cast<size_t>(max_blocks) + static_cast<size_t>(p / bs)] = order[next++];
        slots.push_back(int64_t{table[s * static_cast<size_t>(max_blocks) + static_cast<size_t>(p / bs)]} * bs +
                        p % bs);
      }
      const Tensor k = Tensor::rand_normal({len, h_kv, d}, 0, 1, dt, dev);
      const Tensor v = Tensor::rand_normal({len, h_kv, d}, 0, 1, dt, dev);
      nn::paged_write(k_pool, v_pool, k, v, Tensor::from_vector(slots, {len}, dev));
      keys.push_back(k.transpose(0, 1).unsqueeze(0));
      values.push_back(v.transpose(0, 1).unsqueeze(0));
    }
  }
  Tensor tables(Device dev) const {
    return Tensor::from_vector(table, {static_cast<int64_t>(keys.size()), max_blocks}, dev);
  }
};

// The last `chunk` positions of each sequence as queries: paged against contiguous attention.
void expect_paged_equals_contiguous(Device dev, DType dt, const std::vector<int64_t>& lengths, int64_t chunk, int64_t h,
                                    int64_t h_kv, int64_t d, int64_t bs, int64_t window, double tol) {
  const Pool pool(lengths, bs, h_kv, d, dt, dev, 11);
  std::vector<int32_t> seqs, positions;
  std::vector<Tensor> queries;
  for (size_t s = 0; s < lengths.size(); ++s) {
    const int64_t n = std::min(chunk, lengths[s]);
    for (int64_t p = lengths[s] - n; p < lengths[s]; ++p) {
      seqs.push_back(static_cast<int32_t>(s));
      positions.push_back(static_cast<int32_t>(p));
    }
    queries.push_back(Tensor::rand_normal({n, h, d}, 0, 1, dt, dev));
  }
  const auto t = static_cast<int64_t>(seqs.size());
  const Tensor q = cat(queries, 0);
  nn::PagedAttentionOptions o;
  o.window = window;
  const Tensor out =
      nn::paged_attention(q, pool.k_pool, pool.v_pool, pool.tables(dev), Tensor::from_vector(seqs, {t}, dev),
                          Tensor::from_vector(positions, {t}, dev), o);
  ASSERT_EQ(out.shape(), Shape({t, h, d}));
  int64_t row = 0;
  for (size_t s = 0; s < lengths.size(); ++s) {
    const Tensor& qs = queries[s];
    nn::AttentionOptions a;
    a.causal = true;
    a.window = window;
    const Tensor want =
        nn::scaled_dot_product_attention(qs.transpose(0, 1).unsqueeze(0), pool.keys[s], pool.values[s], a)
            .squeeze(0)
            .transpose(0, 1);
    const Tensor got = out.narrow(0, row, qs.dim(0));
    EXPECT_LE(max_abs_diff(got, want), tol) << "sequence " << s << " of length " << lengths[s];
    row += qs.dim(0);
  }
}

TEST_P(PagedTest, DecodeTokensEqualContiguousAttention) {
  expect_paged_equals_contiguous(device(), DType::F32, {1, 16, 17, 300, 5}, 1, 8, 2, 64, 16, 0, 1e-5);
  expect_paged_equals_contiguous(device(), DType::F32, {1200, 33}, 1, 4, 4, 128, 32, 0, 1e-5);
}

// On the CPU the paged kernel runs the contiguous kernel's tiles over keys gathered from the pools:
// a token's result is the contiguous kernel's bits wherever both start their key tiles at the same
// position (every decode step, windows too; a prompt's chunk without a window), in every dtype,
// with tiles of keys that cross blocks and stop inside one.
TEST_P(PagedTest, OnTheCpuTokensAreTheContiguousKernelsBits) {
  if (device().type() != DeviceType::Cpu) GTEST_SKIP() << "the CPU's kernels";
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    SCOPED_TRACE(::testing::Message() << dt);
    expect_paged_equals_contiguous(device(), dt, {1, 16, 17, 70, 300}, 1, 8, 2, 64, 16, 0, 0.0);
    expect_paged_equals_contiguous(device(), dt, {90, 31, 200}, 1, 4, 2, 32, 16, 20, 0.0);
    expect_paged_equals_contiguous(device(), dt, {40, 100, 7}, 12, 4, 1, 80, 8, 0, 0.0);
  }
}

TEST_P(PagedTest, PromptChunksEqualContiguousAttention) {
  expect_paged_equals_contiguous(device(), DType::F32, {40, 100, 7}, 12, 4, 2, 32, 16, 0, 1e-5);
  expect_paged_equals_contiguous(device(), DType::F32, {64}, 64, 4, 1, 16, 8, 0, 1e-5);
}

TEST_P(PagedTest, WindowsAndHalvesEqualContiguousAttention) {
  expect_paged_equals_contiguous(device(), DType::F32, {90, 31}, 5, 4, 2, 32, 16, 20, 1e-5);
  expect_paged_equals_contiguous(device(), DType::BF16, {70, 200}, 3, 8, 2, 64, 16, 0, 2e-2);
  expect_paged_equals_contiguous(device(), DType::F16, {50, 9}, 4, 4, 2, 80, 16, 0, 5e-3);
}

// Q8_0 pools: paged_write puts quant::quantize's bytes at each slot and leaves every other byte,
// and paged_attention over them equals attention over the values quant::dequantize gives.
TEST_P(PagedTest, Q8_0PoolsHoldQuantizesBytesAndAttendOverTheirValues) {
  const Device dev = device();
  const int64_t blocks = 6, bs = 8, h_kv = 2, d = 64, h = 8, len = 37, rb = nn::paged_q8_0_row_bytes(d);
  ASSERT_EQ(rb, 68);
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor k_pool = Tensor::full({blocks, bs, h_kv, rb}, 0xAB, DType::U8, dev);
    Tensor v_pool = Tensor::full({blocks, bs, h_kv, rb}, 0xCD, DType::U8, dev);
    // Positions 0 .. len-1 in blocks 4, 1, 5, 0, 2 (block 3 untouched), scaled well past 1.
    const std::vector<int32_t> table = {4, 1, 5, 0, 2};
    std::vector<int64_t> slots;
    for (int64_t p = 0; p < len; ++p) slots.push_back(int64_t{table[static_cast<size_t>(p / bs)]} * bs + p % bs);
    const Tensor k = Tensor::rand_normal({len, h_kv, d}, 0, 3, dt, dev);
    const Tensor v = Tensor::rand_normal({len, h_kv, d}, 0, 40, dt, dev);
    nn::paged_write(k_pool, v_pool, k, v, Tensor::from_vector(slots, {len}, dev));
    for (const auto& [pool, x, poison] : {std::tuple{&k_pool, &k, 0xAB}, std::tuple{&v_pool, &v, 0xCD}}) {
      const std::vector<uint8_t> got = pool->to_device(Device::cpu()).to_vector<uint8_t>();
      const std::vector<uint8_t> want =
          quant::quantize(x->to_dtype(DType::F32).reshape({len * h_kv, d}), quant::QType::Q8_0)
              .bytes()
              .to_device(Device::cpu())
              .to_vector<uint8_t>();
      std::vector<bool> written(static_cast<size_t>(blocks * bs), false);
      for (int64_t p = 0; p < len; ++p) {
        const auto slot = static_cast<size_t>(slots[static_cast<size_t>(p)]);
        written[slot] = true;
        ASSERT_TRUE(std::equal(want.begin() + p * h_kv * rb, want.begin() + (p + 1) * h_kv * rb,
                               got.begin() + static_cast<std::ptrdiff_t>(slot) * h_kv * rb))
            << "position " << p;
      }
      for (size_t slot = 0; slot < written.size(); ++slot) {
        if (written[slot]) continue;
        for (int64_t c = 0; c < h_kv * rb; ++c)
          ASSERT_EQ(got[slot * static_cast<size_t>(h_kv * rb) + static_cast<size_t>(c)], poison) << "slot " << slot;
      }
    }
    // Decode tokens at positions 36 and 20, and a window of 9 for the first.
    const auto values = [&](const Tensor& x) {
      const quant::QTensor q8 = quant::quantize(x.to_dtype(DType::F32).reshape({len * h_kv, d}), quant::QType::Q8_0);
      return quant::dequantize(q8, DType::F32).reshape({len, h_kv, d}).transpose(0, 1).unsqueeze(0);
    };
    const Tensor keys = values(k), vals = values(v);
    const Tensor q = Tensor::rand_normal({2, h, d}, 0, 1, dt, dev);
    for (int64_t window : {int64_t{0}, int64_t{9}}) {
      nn::PagedAttentionOptions o;
      o.window = window;
      const Tensor out = nn::paged_attention(q, k_pool, v_pool, Tensor::from_vector(table, {1, 5}, dev),
                                             Tensor::from_vector<int32_t>({0, 0}, {2}, dev),
                                             Tensor::from_vector<int32_t>({36, 20}, {2}, dev), o);
      const std::vector<int64_t> at = {36, 20};
      for (int64_t i = 0; i < 2; ++i) {
        nn::AttentionOptions a;
        a.causal = true;
        a.window = window;
        // The query as the last of n positions: keys 0 .. n-1 (the last `window` of them).
        const int64_t n = at[static_cast<size_t>(i)] + 1;
        const Tensor qi = q.narrow(0, i, 1).to_dtype(DType::F32).transpose(0, 1).unsqueeze(0);
        const Tensor want = nn::scaled_dot_product_attention(qi, keys.narrow(2, 0, n), vals.narrow(2, 0, n), a)
                                .squeeze(0)
                                .transpose(0, 1);
        EXPECT_LT(max_abs_diff(out.narrow(0, i, 1), want), dt == DType::F32 ? 1e-4 : 0.5)
            << "token " << i << ", window " << window;
      }
    }
  }
  // Misfits: a head dim that is not a multiple of 32, a Q8_0 pool beside a float one, integer rows.
  Tensor k_pool = Tensor::zeros({2, 4, 1, 34}, DType::U8, dev), v_pool = Tensor::zeros({2, 4, 1, 34}, DType::U8, dev);
  const Tensor slot = Tensor::from_vector<int64_t>({1}, {1}, dev);
  const Tensor k16 = Tensor::zeros({1, 1, 16}, DType::F32, dev), k32 = Tensor::zeros({1, 1, 32}, DType::F32, dev);
  EXPECT_THROW(nn::paged_write(k_pool, v_pool, k16, k16, slot), ShapeError);
  Tensor float_pool = Tensor::zeros({2, 4, 1, 34}, DType::F32, dev);
  EXPECT_THROW(nn::paged_write(k_pool, float_pool, k32, k32, slot), DTypeError);
  EXPECT_THROW(nn::paged_write(k_pool, v_pool, k32.to_dtype(DType::I32), k32.to_dtype(DType::I32), slot), DTypeError);
  nn::paged_write(k_pool, v_pool, k32, k32, slot);
  const Tensor one = Tensor::from_vector<int32_t>({0}, {1}, dev);
  const Tensor table = Tensor::from_vector<int32_t>({0, 1}, {1, 2}, dev);
  EXPECT_THROW(nn::paged_attention(Tensor::zeros({1, 1, 16}, DType::F32, dev), k_pool, v_pool, table, one, one),
               ShapeError);
  EXPECT_THROW(nn::paged_attention(Tensor::zeros({1, 1, 32}, DType::F32, dev), k_pool, float_pool, table, one, one),
               Error);
}

// paged_rope_write (one kernel on a GPU) against rope() then paged_write(): the same bits in q
// turned and in both pools, for f32, f16 and bf16, rotate-half and interleaved pairs, strided q, k
// and v (views of one stacked product, as a model's), a slot skipped; Q8_0 pools take the
// composition. Errors name paged_rope_write.
TEST_P(PagedTest, PagedRopeWriteIsRopeThenPagedWrite) {
  const int64_t t = 5, h = 4, h_kv = 2, d = 32, blocks = 6, bs = 4;
  const std::vector<int64_t> slots_host = {9, 2, std::numeric_limits<int64_t>::max(), 23, 14};
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    for (bool interleaved : {false, true}) {
      for (bool q8 : {false, true}) {
        const Tensor qkv = Tensor::rand_normal({t, h + 2 * h_kv, d}, 0, 1, dt, device());
        const Tensor q = qkv.narrow(1, 0, h), k = qkv.narrow(1, h, h_kv), v = qkv.narrow(1, h + h_kv, h_kv);
        const Tensor angles = Tensor::rand_uniform({t, d / 2}, -3, 3, DType::F32, device());
        const Tensor cos = angles.cos().to_dtype(dt), sin = angles.sin().to_dtype(dt);
        const Tensor slots = Tensor::from_vector(slots_host, {t}, device());
        const int64_t row = q8 ? nn::paged_q8_0_row_bytes(d) : d;
        const DType pool_dt = q8 ? DType::U8 : dt;
        Tensor k_pool = q8 ? Tensor::zeros({blocks, bs, h_kv, row}, DType::U8, device())
                           : Tensor::rand_normal({blocks, bs, h_kv, d}, 0, 1, dt, device());
        Tensor v_pool = q8 ? Tensor::zeros({blocks, bs, h_kv, row}, DType::U8, device())
                           : Tensor::rand_normal({blocks, bs, h_kv, d}, 0, 1, dt, device());
        Tensor k_want = k_pool.copy(), v_want = v_pool.copy();
        auto turn = [&](const Tensor& x) {
          const Tensor x4 = x.transpose(0, 1).unsqueeze(0);
          return (interleaved ? nn::rope_i(x4, cos, sin) : nn::rope(x4, cos, sin)).squeeze(0).transpose(0, 1);
        };
        nn::paged_write(k_want, v_want, turn(k), v, slots);
        const Tensor got = nn::paged_rope_write(k_pool, v_pool, q, k, v, cos, sin, interleaved, slots);
        const std::string what =
            std::string(dtype_name(dt)) + (interleaved ? ", interleaved" : ", halves") + (q8 ? ", Q8_0 pools" : "");
        ASSERT_EQ(got.shape(), Shape({t, h, d})) << what;
        EXPECT_EQ(max_abs_diff(got, turn(q)), 0.f) << what;
        ASSERT_EQ(k_pool.dtype(), pool_dt);
        auto exact = [](const Tensor& x) {
          return x.to_device(Device::cpu()).to_dtype(DType::F64).to_vector<double>();
        };
        EXPECT_EQ(exact(k_pool), exact(k_want)) << what;
        EXPECT_EQ(exact(v_pool), exact(v_want)) << what;
      }
    }
  }
  Tensor k_pool = Tensor::zeros({blocks, bs, h_kv, d}, DType::F32, device()), v_pool = k_pool.copy();
  const Tensor q = Tensor::rand_normal({t, h, d}, 0, 1, DType::F32, device());
  const Tensor k = Tensor::rand_normal({t, h_kv, d}, 0, 1, DType::F32, device());
  const Tensor cos = Tensor::rand_uniform({t, d / 2}, -1, 1, DType::F32, device()), sin = cos.copy();
  const Tensor slots = Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 3, 4}, {t}, device());
  WICK_EXPECT_ERROR(nn::paged_rope_write(k_pool, v_pool, q.narrow(0, 0, 4), k, k, cos, sin, false, slots), ShapeError,
                    "paged_rope_write");
  WICK_EXPECT_ERROR(nn::paged_rope_write(k_pool, v_pool, q.to_dtype(DType::BF16), k, k, cos, sin, false, slots),
                    DTypeError, "paged_rope_write");
  WICK_EXPECT_ERROR(nn::paged_rope_write(k_pool, v_pool, q, k, k, cos.narrow(1, 0, 3), sin, false, slots), ShapeError,
                    "paged_rope_write");
  const Tensor far = Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 3, blocks * bs}, {t}, device());
  WICK_EXPECT_ERROR(
      {
        (void)nn::paged_rope_write(k_pool, v_pool, q, k, k, cos, sin, false, far);
        synchronize(device());
      },
      IndexError, "");
}

TEST_P(PagedTest, IndicesOutOfRangeAreIndexErrors) {
  const Device dev = device();
  const Pool pool({20, 5}, 8, 2, 16, DType::F32, dev, 3);
  const Tensor q = Tensor::rand_normal({1, 4, 16}, 0, 1, DType::F32, dev);
  auto run = [&](int32_t seq, int32_t pos, std::vector<int32_t> table) {
    const Tensor tables = Tensor::from_vector(table, {2, pool.max_blocks}, dev);
    const Tensor out = nn::paged_attention(q, pool.k_pool, pool.v_pool, tables,
                                           Tensor::from_vector(std::vector<int32_t>{seq}, {1}, dev),
                                           Tensor::from_vector(std::vector<int32_t>{pos}, {1}, dev));
    synchronize(dev);
    return out;
  };
  EXPECT_NO_THROW(run(0, 19, pool.table));
  EXPECT_THROW(run(2, 3, pool.table), IndexError);      // no such sequence
  EXPECT_THROW(run(0, 3 * 8, pool.table), IndexError);  // past the table's blocks
  EXPECT_THROW(run(1, 9, pool.table), IndexError);      // an entry of -1
  std::vector<int32_t> bad = pool.table;
  bad[0] = 1000;
  EXPECT_THROW(run(0, 2, bad), IndexError);  // a block outside the pool
  EXPECT_NO_THROW(run(0, 19, pool.table));   // the device's error was raised once
  // Operands that do not fit.
  const Tensor tables = pool.tables(dev), one = Tensor::from_vector(std::vector<int32_t>{0}, {1}, dev);
  EXPECT_THROW(nn::paged_attention(q.to_dtype(DType::F64), pool.k_pool, pool.v_pool, tables, one, one), DTypeError);
  EXPECT_THROW(nn::paged_attention(q, pool.k_pool, pool.v_pool, tables.to_dtype(DType::I64), one, one), DTypeError);
  EXPECT_THROW(nn::paged_attention(Tensor::rand_normal({1, 3, 16}, 0, 1, DType::F32, dev), pool.k_pool, pool.v_pool,
                                   tables, one, one),
               ShapeError);  // 3 heads over 2 KV heads
  EXPECT_THROW(nn::paged_attention(q, pool.k_pool, pool.v_pool, tables,
                                   Tensor::from_vector(std::vector<int32_t>{0, 0}, {2}, dev), one),
               ShapeError);
  Tensor k_pool = pool.k_pool.copy(), v_pool = pool.v_pool.copy();
  const Tensor kv = Tensor::rand_normal({1, 2, 16}, 0, 1, DType::F32, dev);
  EXPECT_THROW(
      nn::paged_write(k_pool, v_pool, kv, kv, Tensor::from_vector(std::vector<int64_t>{k_pool.dim(0) * 8}, {1}, dev));
      synchronize(dev), IndexError);
  EXPECT_THROW(nn::paged_write(k_pool, v_pool, kv, kv, Tensor::from_vector(std::vector<int32_t>{0}, {1}, dev)),
               ShapeError);
}

TEST_P(PagedTest, EmptyQueriesGiveAnEmptyResult) {
  const Pool pool({4}, 4, 1, 8, DType::F32, device(), 1);
  const Tensor none = Tensor::from_vector(std::vector<int32_t>{}, {0}, device());
  const Tensor out = nn::paged_attention(Tensor::zeros({0, 2, 8}, DType::F32, device()), pool.k_pool, pool.v_pool,
                                         pool.tables(device()), none, none);
  EXPECT_EQ(out.shape(), Shape({0, 2, 8}));
}

// forward_paged, a chunk at a time for several sequences at once, against forward() over a
// KvCache: short chunks (paged_attention only), and chunks of kChunkAttention tokens or more (the
// fused attention kernel over keys gathered from the pool) beside short ones in one step. The runs
// without a window turn 12 of each head's 16 features with LongRoPE's factors (short before position
// 40, long from there on: the rope tables of a step's positions against forward's). The
// windowed runs are Qwen3-MoE's decoder (q and k normed per head, rope over halves, a mixture of
// experts whose tokens come from several sequences and chunks in one step), and again Gemma 3's
// (a local layer with a window of 6 and a global one, each with its rope) and Gemma 2's (the paged
// kernels cap the scores in place, contiguous attention through the composition).
// Gemma 3's decoder at c's size: a local layer (a window of 6, rope at its own base) then a global
// one (linear scaling), q k^T scaled by another factor, norms after attention and the MLP, GELU.
void gemma3(models::LlamaConfig& c) {
  c.architecture = "gemma3";
  c.experts = c.experts_used = 0;
  c.rotary_dim = 0;
  c.long_rope = {};
  c.interleaved_rope = false;
  c.qk_norm = c.embed_scale = c.post_norms = c.tied_embeddings = true;
  c.activation = models::LlamaConfig::Activation::GeluTanh;
  c.window = 6;
  c.layer_windows = {6, 0};
  c.rope_local_theta = 10000, c.rope_theta = 1e6, c.rope_linear = 4;
  c.attention_scale = 0.3;
}

TEST_P(PagedTest, ForwardPagedGivesForwardsLogits) {
  models::LlamaConfig c = models::LlamaConfig::preset("llama3-8b");
  c.vocab = 96, c.dim = 64, c.hidden = 128, c.layers = 2, c.heads = 4, c.kv_heads = 2, c.head_dim = 16, c.context = 256;
  struct Schedule {
    std::vector<int64_t> lengths, chunks;
  };
  const Schedule schedules[] = {{{37, 20}, {9, 1, 13, 1, 100}}, {{90, 5, 50}, {20, 1, 30, 100}}};
  static_assert(models::LlamaModel::kChunkAttention <= 20);
  for (const Schedule& plan : schedules) {
    for (int kind = 0; kind < 4; ++kind) {
      const int64_t window = kind == 1 ? 7 : 0;
      c.window = window;
      c.architecture = window > 0 ? "qwen3moe" : "llama";
      c.qk_norm = window > 0;
      c.experts = window > 0 ? 4 : 0;
      c.experts_used = window > 0 ? 2 : 0;
      // Without a window: Phi-4-mini's rope over part of each head, whose LongRoPE factors turn
      // from the short to the long ones at position 40, inside the longer sequences.
      c.rotary_dim = window > 0 ? 0 : 12;
      c.long_rope = {};
      if (window == 0) {
        c.long_rope.original_context = 40, c.long_rope.attention_factor = 1.1;
        for (int i = 0; i < 6; ++i)
          c.long_rope.short_factor.push_back(1 + 0.1 * i), c.long_rope.long_factor.push_back(2 + 0.7 * i);
      }
      c.interleaved_rope = window == 0;
      if (kind >= 2) gemma3(c);
      if (kind == 3) {  // Gemma 2: one rope, soft-capped scores and logits
        c.architecture = "gemma2";
        c.qk_norm = false;
        c.rope_local_theta = 0, c.rope_linear = 1;
        c.attn_softcap = 0.5, c.final_softcap = 2;
      }
      const models::LlamaModel m = models::LlamaModel::random(c, device(), DType::F32, std::nullopt, 5);
      std::mt19937 rng(9);
      std::uniform_int_distribution<int32_t> id(0, 95);
      const std::vector<int64_t>& lengths = plan.lengths;
      const size_t sequences = lengths.size();
      std::vector<std::vector<int32_t>> tokens;
      for (int64_t n : lengths) {
        tokens.emplace_back(static_cast<size_t>(n));
        for (int32_t& x : tokens.back()) x = id(rng);
      }
      const int64_t bs = 8, max_blocks = 12, blocks = 24;
      models::PagedKvCache pool = m.make_paged_cache(blocks, bs, models::KvType::Model);
      // Blocks handed out backwards: sequence 0 gets the last ones; the next sequence after it.
      std::vector<std::vector<int32_t>> table(sequences);
      auto next = static_cast<int32_t>(blocks - 1);
      for (size_t s = 0; s < sequences; ++s)
        for (int64_t j = 0; j < (lengths[s] + bs - 1) / bs; ++j) table[s].push_back(next--);
      std::vector<int64_t> done(sequences, 0);
      std::vector<std::vector<float>> paged(sequences);  // the logits of every position, in order
      for (int64_t chunk : plan.chunks) {
        models::PagedBatch b;
        b.max_blocks = max_blocks;
        b.tables.assign(sequences * max_blocks, -1);
        for (size_t s = 0; s < sequences; ++s) {
          std::copy(table[s].begin(), table[s].end(), b.tables.begin() + static_cast<std::ptrdiff_t>(s * max_blocks));
          const int64_t n = std::min(chunk, lengths[s] - done[s]);
          for (int64_t p = done[s]; p < done[s] + n; ++p) {
            b.logits_of.push_back(static_cast<int64_t>(b.tokens.size()));
            b.tokens.push_back(tokens[s][static_cast<size_t>(p)]);
            b.seqs.push_back(static_cast<int32_t>(s));
            b.positions.push_back(static_cast<int32_t>(p));
            b.slots.push_back(int64_t{table[s][static_cast<size_t>(p / bs)]} * bs + p % bs);
          }
        }
        const std::vector<float> logits = m.forward_paged(b, pool).to_device(Device::cpu()).to_vector<float>();
        ASSERT_EQ(logits.size(), b.tokens.size() * 96);
        for (size_t i = 0; i < b.tokens.size(); ++i) {
          const auto s = static_cast<size_t>(b.seqs[i]);
          paged[s].insert(paged[s].end(), logits.begin() + static_cast<std::ptrdiff_t>(i * 96),
                          logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * 96));
          ++done[s];
        }
      }
      for (size_t s = 0; s < sequences; ++s) {
        ASSERT_EQ(done[s], lengths[s]);
        auto cache = m.make_cache(1, lengths[s]);
        const Tensor want = m.forward(Tensor::from_vector(tokens[s], {1, lengths[s]}), cache).reshape({lengths[s], 96});
        const Tensor got = Tensor::from_vector(paged[s], {lengths[s], 96});
        EXPECT_LT(max_abs_diff(got, want), 1e-4)
            << "lengths " << lengths[0] << ".., kind " << kind << ", sequence " << s;
      }
    }
  }
}

// forward_paged over a Q8_0 cache, a chunk at a time, against forward() over a KvCache in f32: close
// (the keys and values rounded to 8 bits per 32), and not equal (the cache is Q8_0).
TEST_P(PagedTest, ForwardPagedOverAQ8_0CacheIsCloseToForwards) {
  models::LlamaConfig c = models::LlamaConfig::preset("llama3-8b");
  c.vocab = 96, c.dim = 128, c.hidden = 256, c.layers = 2, c.heads = 4, c.kv_heads = 2, c.head_dim = 32;
  c.context = 256;
  const models::LlamaModel m = models::LlamaModel::random(c, device(), DType::F32, std::nullopt, 6);
  std::vector<int32_t> tokens = {5, 17, 90, 3, 3, 41, 60, 2, 77, 12, 8, 33, 51, 19, 64, 70, 1, 9, 44, 28};
  for (int32_t i = 0; i < 20; ++i) tokens.push_back((i * 37 + 11) % 96);
  const auto n = static_cast<int64_t>(tokens.size());
  const int64_t bs = 4;
  models::PagedKvCache pool = m.make_paged_cache(12, bs, models::KvType::Q8_0);
  ASSERT_EQ(pool.keys[0].dtype(), DType::U8);
  const std::vector<int32_t> table = {6, 0, 3, 7, 1, 11, 2, 9, 4, 10};
  std::vector<float> paged;
  // Short chunks, and one of kChunkAttention tokens or more, whose keys are dequantized rows.
  for (int64_t done = 0; int64_t chunk : {7, 1, 12, 20}) {
    models::PagedBatch b;
    b.max_blocks = 10;
    b.tables = table;
    for (int64_t p = done; p < done + chunk; ++p) {
      b.logits_of.push_back(p - done);
      b.tokens.push_back(tokens[static_cast<size_t>(p)]);
      b.seqs.push_back(0);
      b.positions.push_back(static_cast<int32_t>(p));
      b.slots.push_back(int64_t{table[static_cast<size_t>(p / bs)]} * bs + p % bs);
    }
    const std::vector<float> logits = m.forward_paged(b, pool).to_device(Device::cpu()).to_vector<float>();
    paged.insert(paged.end(), logits.begin(), logits.end());
    done += chunk;
  }
  auto cache = m.make_cache(1, n);
  const Tensor want = m.forward(Tensor::from_vector(tokens, {1, n}), cache).reshape({n, 96});
  const float diff = max_abs_diff(Tensor::from_vector(paged, {n, 96}), want);
  const float scale = want.abs().max().item<float>();
  EXPECT_LT(diff, 0.05f * scale);
  EXPECT_GT(diff, 0.f);
}

// Recorded decode steps (PagedDecodeGraph, also on the CPU, where a replay runs the ops again)
// against forward_paged on a copy of the same pool: batches of 1, 3 and 5 sequences (run at sizes
// 1, 4 and 8, the extra rows on the scratch block), steps replayed, positions crossing blocks; for
// Llama's decoder, Gemma 3's (a window on one layer, the local rope there) and a mixture of experts
// in Q8_0 (on a GPU its experts stacked: routing and grouped products recorded).
TEST_P(PagedTest, RecordedDecodeStepsGiveForwardPagedsLogits) {
  for (const std::string kind : {"llama", "gemma3", "mixture"}) {
    SCOPED_TRACE(kind);
    models::LlamaConfig c = models::LlamaConfig::preset("llama3-8b");
    c.vocab = 96, c.dim = 64, c.hidden = 128, c.layers = 2, c.heads = 4, c.kv_heads = 2, c.head_dim = 16,
    c.context = 64;
    std::optional<quant::QType> weights;
    if (kind == "gemma3") gemma3(c);
    if (kind == "mixture") c.experts = 4, c.experts_used = 2, c.hidden = 64, weights = quant::QType::Q8_0;
    const models::LlamaModel m = models::LlamaModel::random(c, device(), DType::F32, weights, 8);
    const int64_t bs = 4, seqs = 5;
    models::PagedKvCache graph_pool = m.make_paged_cache(seqs * 16 + 1, bs, models::KvType::Model),
                         plain = m.make_paged_cache(seqs * 16 + 1, bs, models::KvType::Model);
    graph_pool.scratch = plain.scratch = static_cast<int32_t>(seqs * 16);
    models::PagedDecodeGraph steps(m, graph_pool, 8);
    std::mt19937 rng(4);
    std::uniform_int_distribution<int32_t> id(0, 95);
    std::vector<int64_t> length(seqs, 0);
    for (int64_t n : {1, 3, 5, 5, 3, 1, 5, 5, 5, 5, 5, 5}) {
      std::vector<int32_t> tokens(static_cast<size_t>(n));
      for (int32_t& t : tokens) t = id(rng);
      const models::PagedBatch b = decode_batch(tokens, length, 16, bs);
      const Tensor got = steps.step(b).to_device(Device::cpu()).copy();
      const Tensor want = m.forward_paged(b, plain);
      // Block formats round x to 8 bits: a last-bit difference of attention's can move a step.
      const float tolerance = weights ? 1e-2f * std::max(1.f, want.abs().max().item<float>()) : 1e-4f;
      EXPECT_LT(max_abs_diff(got, want), tolerance) << n << " sequences";
    }
    EXPECT_EQ(steps.recording_error(), "");
    models::PagedBatch two_tokens;  // a chunk is not a decode step
    two_tokens.tokens = {1, 2};
    two_tokens.seqs = {0, 0};
    two_tokens.positions = {0, 1};
    two_tokens.slots = {0, 1};
    two_tokens.tables.assign(16, 0);
    two_tokens.max_blocks = 16;
    two_tokens.logits_of = {0, 1};
    EXPECT_THROW(steps.step(two_tokens), ShapeError);
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, PagedTest, ::testing::ValuesIn(devices()), device_name);

}  // namespace
}  // namespace wick::test
