// scaled_dot_product_attention and KvCache (include/wick/nn.h) on every device: values computed by
// hand, masks against explicit -inf masks, grouped heads against repeated heads, strided views,
// special values, bad arguments, and a Llama-style attention block decoding with a KvCache against
// the same block recomputed over the whole sequence.
#include <cmath>
#include <limits>
#include <optional>
#include <tuple>

#include "test_util.h"
#include "wick/nn.h"

namespace wick {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr DType kFloat[] = {DType::F64, DType::F32, DType::F16, DType::BF16};

std::vector<double> values(const Tensor& t) { return t.to_dtype(DType::F64).to_vector<double>(); }

double tolerance(DType dt) { return dt == DType::BF16 ? 2e-2 : dt == DType::F16 ? 2e-3 : 1e-5; }

void expect_near(const Tensor& got, const std::vector<double>& want, double tol) {
  const std::vector<double> g = values(got);
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_NEAR(g[i], want[i], tol) << "element " << i << " (" << got.dtype() << ")";
}

// Equal up to rounding (relative to the largest magnitude of `want`).
void expect_close(const Tensor& got, const Tensor& want, double tol = 1e-5) {
  ASSERT_EQ(got.shape(), want.shape());
  const std::vector<double> g = values(got), w = values(want);
  double scale = 1e-30;
  for (double x : w) scale = std::max(scale, std::abs(x));
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], tol * scale) << "element " << i;
}

Tensor sdpa(const Tensor& q, const Tensor& k, const Tensor& v, bool causal = false, Tensor mask = {},
            int64_t window = 0, std::optional<double> scale = std::nullopt) {
  nn::AttentionOptions o;
  o.causal = causal;
  o.mask = std::move(mask);
  o.window = window;
  o.scale = scale;
  return nn::scaled_dot_product_attention(q, k, v, o);
}

class AttentionTest : public ::testing::TestWithParam<Device> {
 protected:
  Device dev() const { return GetParam(); }
  Tensor make(std::vector<double> v, const Shape& s, DType dt = DType::F32) const {
    return Tensor::from_vector(v, s, dev()).to_dtype(dt);
  }
  Tensor randn(const Shape& s, DType dt = DType::F32) const {
    return Tensor::rand_normal(s, 0, 1, DType::F32, dev()).to_dtype(dt);
  }
  // A (t_q, t_kv) mask of 0 where see(i, j) and -inf elsewhere.
  template <typename F>
  Tensor mask_of(int64_t t_q, int64_t t_kv, F see, DType dt = DType::F32) const {
    std::vector<double> m(static_cast<size_t>(t_q * t_kv));
    for (int64_t i = 0; i < t_q; ++i)
      for (int64_t j = 0; j < t_kv; ++j) m[static_cast<size_t>(i * t_kv + j)] = see(i, j) ? 0 : -kInf;
    return make(m, {t_q, t_kv}, dt);
  }
};

TEST_P(AttentionTest, HandComputedWeights) {
  for (DType dt : kFloat) {
    // Scores (ln 3, 0): weights 3/4 and 1/4 of the value rows (1, 2) and (3, 4).
    const Tensor q = make({1, 0}, {1, 1, 1, 2}, dt), k = make({1, 0, 0, 0}, {1, 1, 2, 2}, dt),
                 v = make({1, 2, 3, 4}, {1, 1, 2, 2}, dt);
    const Tensor out = sdpa(q, k, v, false, {}, 0, std::log(3.0));
    EXPECT_EQ(out.shape(), Shape({1, 1, 1, 2}));
    EXPECT_EQ(out.dtype(), dt);
    expect_near(out, {1.5, 2.5}, tolerance(dt));
    // The default scale 1 / sqrt(2): scores (sqrt(2), 0).
    const double w = std::exp(std::sqrt(2.0)) / (std::exp(std::sqrt(2.0)) + 1);
    const Tensor q2 = make({2, 0}, {1, 1, 1, 2}, dt), k2 = make({1, 0, 0, 1}, {1, 1, 2, 2}, dt);
    expect_near(sdpa(q2, k2, v), {w + 3 * (1 - w), 2 * w + 4 * (1 - w)}, tolerance(dt));
    // Causal over two queries: the first sees key 0 only, the second both.
    const Tensor q3 = make({1, 0, 1, 0}, {1, 1, 2, 2}, dt);
    expect_near(sdpa(q3, k, v, true, {}, 0, std::log(3.0)), {1, 2, 1.5, 2.5}, tolerance(dt));
  }
}

TEST_P(AttentionTest, OneKeyAndEqualKeys) {
  const Tensor q = randn({2, 3, 4, 8}), v = randn({2, 3, 1, 8});
  // One key: weight 1, the value row itself, for any query.
  EXPECT_EQ(values(sdpa(q, randn({2, 3, 1, 8}), v)), values(v.broadcast_as({2, 3, 4, 8}).contiguous()));
  // Equal keys: equal weights, the mean of the values.
  const Tensor vs = randn({2, 3, 5, 8});
  expect_close(sdpa(q, Tensor::zeros({2, 3, 5, 8}, DType::F32, dev()), vs),
               vs.mean(2, true).broadcast_as({2, 3, 4, 8}));
  // A query aligned with one key at a large scale: that key's value.
  const Tensor eye = Tensor::eye(8, DType::F32, dev()).reshape({1, 1, 8, 8});
  const Tensor vals = randn({1, 1, 8, 8});
  expect_close(sdpa(eye, eye, vals, false, {}, 0, 100.0), vals);
}

TEST_P(AttentionTest, CausalAndWindowEqualTheirMasks) {
  for (DType dt : {DType::F32, DType::BF16}) {
    for (std::pair<int64_t, int64_t> sizes : {std::pair<int64_t, int64_t>{7, 7}, {3, 9}, {9, 4}, {1, 130}, {70, 70}}) {
      const int64_t t_q = sizes.first, t_kv = sizes.second;
      const Tensor q = randn({2, 2, t_q, 16}, dt), k = randn({2, 2, t_kv, 16}, dt), v = randn({2, 2, t_kv, 16}, dt);
      const int64_t shift = t_kv - t_q;  // query i sits at position i + shift
      const double tol = dt == DType::BF16 ? 2e-2 : 1e-5;
      auto masked = [&](auto see) { return sdpa(q, k, v, false, mask_of(t_q, t_kv, see, dt)); };
      expect_close(sdpa(q, k, v, true), masked([&](int64_t i, int64_t j) { return j <= i + shift; }), tol);
      for (int64_t w : {1, 3}) {
        expect_close(sdpa(q, k, v, true, {}, w),
                     masked([&](int64_t i, int64_t j) { return j <= i + shift && j > i + shift - w; }), tol);
        expect_close(sdpa(q, k, v, false, {}, w), masked([&](int64_t i, int64_t j) { return j > i + shift - w; }), tol);
      }
    }
  }
  // A window of one position: each query sees its own key only.
  const Tensor q = randn({1, 2, 6, 4}), k = randn({1, 2, 6, 4}), v = randn({1, 2, 6, 4});
  EXPECT_EQ(values(sdpa(q, k, v, true, {}, 1)), values(v));
}

// Gemma 2's soft-capping, cap * tanh(s / cap) of each scaled score before the causal mask, against
// the scores formed from ops in f64: decode rows, prompt shapes that take the matrix units (f16,
// bf16) on a GPU and the rows kernel (f32), with a key mask too; query heads sharing key heads.
TEST_P(AttentionTest, SoftcapEqualsTheCappedScores) {
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    for (std::pair<int64_t, int64_t> sizes : {std::pair<int64_t, int64_t>{1, 37}, {7, 7}, {130, 150}}) {
      const int64_t t_q = sizes.first, t_kv = sizes.second, h = 4, h_kv = 2, d = 64;
      const Tensor q = randn({1, h, t_q, d}), k = randn({1, h_kv, t_kv, d}), v = randn({1, h_kv, t_kv, d});
      const double cap = 1.5, scale = 0.3;
      const int64_t shift = t_kv - t_q;
      // A key mask that hides one key of each row, never the diagonal (each row sees a key).
      const Tensor hidden =
          mask_of(t_q, t_kv, [&](int64_t i, int64_t j) { return j == i + shift || j != (i * 5 + 1) % t_kv; });
      for (const bool masked : {false, true}) {
        // Each query head against its key head, in f64 on the CPU.
        const Tensor kr = k.to_device(Device::cpu()).to_dtype(DType::F64).reshape({1, h_kv, 1, t_kv, d});
        const Tensor vr = v.to_device(Device::cpu()).to_dtype(DType::F64).reshape({1, h_kv, 1, t_kv, d});
        const Tensor keys = cat({kr, kr}, 2).reshape({1, h, t_kv, d}), vals = cat({vr, vr}, 2).reshape({1, h, t_kv, d});
        const Tensor qr = q.to_dtype(dt).to_device(Device::cpu()).to_dtype(DType::F64);
        Tensor scores = qr.matmul(keys.transpose(-2, -1)).mul(scale).mul(1 / cap).tanh().mul(cap);
        scores = scores.add(mask_of(
                                t_q, t_kv, [&](int64_t i, int64_t j) { return j <= i + shift; }, DType::F64)
                                .to_device(Device::cpu()));
        if (masked) scores = scores.add(hidden.to_device(Device::cpu()).to_dtype(DType::F64));
        const Tensor want = nn::softmax(scores, -1).matmul(vals);
        nn::AttentionOptions o;
        o.causal = true;
        o.scale = scale;
        o.softcap = cap;
        if (masked) o.mask = hidden.to_dtype(dt);
        const Tensor got = nn::scaled_dot_product_attention(q.to_dtype(dt), k.to_dtype(dt), v.to_dtype(dt), o);
        SCOPED_TRACE(detail::str_cat(dt, " t_q ", t_q, " t_kv ", t_kv, masked ? " masked" : ""));
        expect_close(got.to_device(Device::cpu()).to_dtype(DType::F64), want, tolerance(dt) * 2);
      }
    }
  }
  nn::AttentionOptions bad;
  bad.softcap = -1;
  const Tensor x = randn({1, 1, 2, 8});
  EXPECT_THROW(nn::scaled_dot_product_attention(x, x, x, bad), ShapeError);
}

// library = false (an engine's prompt chunks, whose shapes change every step): wick's own kernels,
// on prefill shapes that cuDNN would otherwise take (128 queries and more, f16 and bf16), give
// what the library's path and the f32 result give.
TEST_P(AttentionTest, WithoutTheLibraryPrefillGivesTheSameResult) {
  for (DType dt : {DType::BF16, DType::F16}) {
    for (std::pair<int64_t, int64_t> sizes : {std::pair<int64_t, int64_t>{128, 128}, {160, 300}, {257, 700}}) {
      const int64_t t_q = sizes.first, t_kv = sizes.second;
      const Tensor q = randn({1, 8, t_q, 128}), k = randn({1, 2, t_kv, 128}), v = randn({1, 2, t_kv, 128});
      nn::AttentionOptions o;
      o.causal = true;
      const Tensor want = nn::scaled_dot_product_attention(q, k, v, o);
      const Tensor library = nn::scaled_dot_product_attention(q.to_dtype(dt), k.to_dtype(dt), v.to_dtype(dt), o);
      o.library = false;
      const Tensor own = nn::scaled_dot_product_attention(q.to_dtype(dt), k.to_dtype(dt), v.to_dtype(dt), o);
      expect_close(own.to_dtype(DType::F32), want, tolerance(dt));
      expect_close(own.to_dtype(DType::F32), library.to_dtype(DType::F32), tolerance(dt));
    }
  }
}

TEST_P(AttentionTest, GroupedHeadsEqualRepeatedHeads) {
  for (int64_t h_kv : {1, 2, 8}) {
    const int64_t h = 8, g = h / h_kv;
    const Tensor q = randn({2, h, 5, 16}), k = randn({2, h_kv, 7, 16}), v = randn({2, h_kv, 7, 16});
    // Key head j repeated g times: query head i meets key head i / g.
    auto repeat = [&](const Tensor& t) {
      return t.unsqueeze(2).broadcast_as({2, h_kv, g, 7, 16}).reshape({2, h, 7, 16});
    };
    for (bool causal : {false, true}) expect_close(sdpa(q, k, v, causal), sdpa(q, repeat(k), repeat(v), causal));
  }
}

TEST_P(AttentionTest, RowsThatSeeNoKeyAreZeros) {
  for (DType dt : kFloat) {
    const Tensor q = randn({1, 2, 3, 4}, dt), k = randn({1, 2, 3, 4}, dt), v = randn({1, 2, 3, 4}, dt);
    // Row 1 fully masked.
    const Tensor mask = make({0, 0, 0, -kInf, -kInf, -kInf, 0, -kInf, 0}, {3, 3}, dt);
    const std::vector<double> out = values(sdpa(q, k, v, false, mask));
    for (int64_t head = 0; head < 2; ++head)
      for (int64_t c = 0; c < 4; ++c) EXPECT_EQ(out[static_cast<size_t>(head * 12 + 4 + c)], 0) << dt;
    for (double x : out) EXPECT_TRUE(std::isfinite(x));
    // More queries than keys, causal: queries 0 and 1 sit before every key.
    const std::vector<double> early = values(sdpa(randn({1, 2, 5, 4}, dt), k, v, true));
    for (int64_t head = 0; head < 2; ++head)
      for (int64_t c = 0; c < 8; ++c) EXPECT_EQ(early[static_cast<size_t>(head * 20 + c)], 0) << dt;
    // No keys at all.
    EXPECT_EQ(values(sdpa(q, k.narrow(2, 0, 0), v.narrow(2, 0, 0))), std::vector<double>(24, 0.0));
  }
}

TEST_P(AttentionTest, NanPropagatesToTheRowsThatSeeIt) {
  const double nan = std::nan("");
  const Tensor k = randn({1, 1, 4, 2}), v = randn({1, 1, 4, 2});
  std::vector<double> qv(8, 0.5);
  qv[2] = nan;  // query 1
  const std::vector<double> out = values(sdpa(make(qv, {1, 1, 4, 2}), k, v));
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(std::isnan(out[i]), i == 2 || i == 3) << i;
  // A NaN key at position 2 reaches causal queries 2 and 3 only.
  std::vector<double> kv = values(k);
  kv[4] = nan;
  const std::vector<double> causal = values(sdpa(randn({1, 1, 4, 2}), make(kv, {1, 1, 4, 2}), v, true));
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(std::isnan(causal[i]), i >= 4) << i;
}

TEST_P(AttentionTest, StridedViewsGiveTheContiguousResult) {
  // (b, t, h, d) tensors seen as (b, h, t, d), a narrowed head dim, and a broadcast mask.
  const Tensor q = randn({2, 9, 4, 16}).transpose(1, 2), k = randn({2, 70, 2, 16}).transpose(1, 2);
  const Tensor v = randn({2, 2, 70, 20}).narrow(3, 3, 16);
  const Tensor mask = randn({1, 1, 9, 70});
  for (bool causal : {false, true}) {
    expect_close(sdpa(q, k, v, causal), sdpa(q.contiguous(), k.contiguous(), v.contiguous(), causal));
    expect_close(sdpa(q, k, v, causal, mask), sdpa(q, k, v, causal, mask.broadcast_as({2, 4, 9, 70}).contiguous()));
  }
  // Keys with a head dim at a stride: a transposed (b, h, d, t) tensor.
  const Tensor kt = randn({2, 2, 16, 70}).transpose(2, 3);
  expect_close(sdpa(q, kt, v), sdpa(q, kt.contiguous(), v));
}

// Keys and values whose rows are contiguous and keys and values whose head dim lies at a stride (a
// transposed (b, h, d, t) tensor) hold the same values: the CPU copies the first into its tiles in
// vectors (the keys in blocks transposed in registers) and the second one value at a time, and the
// results are the same bits. Head dims that
// fill the blocks (16, 128) and leave columns past them (20), tiles of keys with keys past the last
// block (70 and 203 keys), one query row (a decode step) and many, in every float dtype.
TEST_P(AttentionTest, KeysInPlaceAndAtAStrideGiveTheSameBits) {
  struct Case {
    int64_t t_q, t_kv, d;
  };
  for (const Case c : {Case{1, 70, 16}, Case{9, 70, 20}, Case{1, 203, 128}, Case{5, 203, 128}})
    for (DType dt : kFloat) {
      const Tensor q = randn({1, 4, c.t_q, c.d}, dt);
      const Tensor k = randn({1, 2, c.d, c.t_kv}, dt).transpose(2, 3),
                   v = randn({1, 2, c.d, c.t_kv}, dt).transpose(2, 3);
      const Tensor k_rows = k.contiguous(), v_rows = v.contiguous();
      for (bool causal : {false, true}) {
        const Tensor a = sdpa(q, k, v, causal).to_dtype(DType::F64);
        const Tensor b = sdpa(q, k_rows, v_rows, causal).to_dtype(DType::F64);
        EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>())
            << dt << " t_q " << c.t_q << " t_kv " << c.t_kv << " d " << c.d << (causal ? " causal" : "");
      }
    }
}

TEST_P(AttentionTest, LargeMagnitudes) {
  // Scores of 1e6 and more: softmax picks the largest, without overflow.
  const Tensor q = make({1000, 0}, {1, 1, 1, 2}), k = make({1000, 0, 999, 0, -1000, 0}, {1, 1, 3, 2});
  const Tensor v = make({1, 2, 3, 4, 5, 6}, {1, 1, 3, 2});
  expect_near(sdpa(q, k, v), {1, 2}, 1e-6);
}

TEST_P(AttentionTest, EmptyTensors) {
  auto z = [&](const Shape& s) { return Tensor::zeros(s, DType::F32, dev()); };
  EXPECT_EQ(sdpa(z({0, 4, 3, 8}), z({0, 2, 5, 8}), z({0, 2, 5, 8})).shape(), Shape({0, 4, 3, 8}));
  EXPECT_EQ(sdpa(z({1, 4, 0, 8}), z({1, 2, 5, 8}), z({1, 2, 5, 8}), true).shape(), Shape({1, 4, 0, 8}));
  EXPECT_EQ(sdpa(z({1, 4, 3, 0}), z({1, 2, 5, 0}), z({1, 2, 5, 0})).shape(), Shape({1, 4, 3, 0}));
  EXPECT_EQ(sdpa(z({1, 0, 3, 8}), z({1, 2, 5, 8}), z({1, 2, 5, 8})).shape(), Shape({1, 0, 3, 8}));
  const Tensor none = sdpa(randn({1, 4, 3, 8}), z({1, 2, 0, 8}), z({1, 2, 0, 8}));
  EXPECT_EQ(none.shape(), Shape({1, 4, 3, 8}));
  EXPECT_EQ(values(none), std::vector<double>(96, 0.0));
}

TEST_P(AttentionTest, BadArguments) {
  const char* op = "scaled_dot_product_attention: ";
  const Tensor q = Tensor::ones({2, 4, 3, 8}, DType::F32, dev()), k = Tensor::ones({2, 2, 5, 8}, DType::F32, dev());
  WICK_EXPECT_ERROR(sdpa(q.to_dtype(DType::I32), k, k), DTypeError, op, "i32");
  WICK_EXPECT_ERROR(sdpa(q.to_dtype(DType::F8E4M3), k, k), DTypeError, op, "f8e4m3");
  WICK_EXPECT_ERROR(sdpa(q, k.to_dtype(DType::F16), k), DTypeError, op, "k ", "f16", "f32");
  WICK_EXPECT_ERROR(sdpa(q, k, k.to_dtype(DType::BF16)), DTypeError, op, "v ", "bf16");
  WICK_EXPECT_ERROR(sdpa(q.reshape({8, 3, 8}), k, k), ShapeError, op, "rank 4", "[8, 3, 8]");
  WICK_EXPECT_ERROR(sdpa(q, k, k.narrow(2, 0, 4)), ShapeError, op, "[2, 2, 5, 8]", "[2, 2, 4, 8]");
  WICK_EXPECT_ERROR(sdpa(q, k.narrow(3, 0, 4), k.narrow(3, 0, 4)), ShapeError, op, "[2, 4, 3, 8]", "[2, 2, 5, 4]");
  WICK_EXPECT_ERROR(sdpa(q.narrow(0, 0, 1), k, k), ShapeError, op, "[1, 4, 3, 8]");
  WICK_EXPECT_ERROR(sdpa(q.narrow(1, 0, 3), k, k), ShapeError, op, "multiple", "[2, 3, 3, 8]", "[2, 2, 5, 8]");
  WICK_EXPECT_ERROR(sdpa(q, k.narrow(1, 0, 0), k.narrow(1, 0, 0)), ShapeError, op, "multiple");
  WICK_EXPECT_ERROR(sdpa(q, k, k, false, Tensor::zeros({3, 4}, DType::F32, dev())), ShapeError, op, "mask", "[3, 4]",
                    "[2, 4, 3, 5]");
  WICK_EXPECT_ERROR(sdpa(q, k, k, false, Tensor::zeros({1, 2, 4, 3, 5}, DType::F32, dev())), ShapeError, op, "mask");
  WICK_EXPECT_ERROR(sdpa(q, k, k, false, Tensor::zeros({3, 5}, DType::F16, dev())), DTypeError, op, "mask", "f16");
  for (double s : {0.0, -1.0, kInf, std::nan("")})
    WICK_EXPECT_ERROR(sdpa(q, k, k, false, {}, 0, s), ShapeError, op, "scale");
  WICK_EXPECT_ERROR(sdpa(q, k, k, true, {}, -1), ShapeError, op, "window", "-1");
  WICK_EXPECT_ERROR(sdpa(q, Tensor(), k), Error, op);
  WICK_EXPECT_ERROR(sdpa(Tensor(), k, k), Error, op);
  if (!dev().is_cpu()) {
    WICK_EXPECT_ERROR(sdpa(q, k.to_device(Device::cpu()), k), DeviceError, op);
    WICK_EXPECT_ERROR(sdpa(q, k, k, false, Tensor::zeros({3, 5})), DeviceError, op);
  }
}

// ---- KvCache --------------------------------------------------------------------------------------

TEST_P(AttentionTest, KvCacheAppendsEqualConcatenation) {
  for (DType dt : {DType::F32, DType::BF16}) {
    nn::KvCache cache(2, 3, 10, 4, dt, dev());
    EXPECT_EQ(cache.size(), 0);
    EXPECT_EQ(cache.capacity(), 10);
    EXPECT_EQ(cache.keys().shape(), Shape({2, 3, 0, 4}));
    std::vector<Tensor> ks, vs;
    for (int64_t t : {4, 1, 0, 1, 3}) {
      // Appended as (b, t, h, d) tensors seen as (b, h, t, d): strided sources.
      ks.push_back(randn({2, t, 3, 4}, dt).transpose(1, 2));
      vs.push_back(randn({2, 3, t, 4}, dt));
      const auto [keys, vals] = cache.append(ks.back(), vs.back());
      EXPECT_EQ(keys.shape(), Shape({2, 3, cache.size(), 4}));
      EXPECT_EQ(values(keys), values(cat(ks, 2)));
      EXPECT_EQ(values(vals), values(cat(vs, 2)));
    }
    EXPECT_EQ(cache.size(), 9);
  }
}

TEST_P(AttentionTest, KvCacheViewsAliasTheCache) {
  nn::KvCache cache(1, 2, 8, 4, DType::F32, dev());
  const auto [k1, v1] = cache.append(randn({1, 2, 3, 4}), randn({1, 2, 3, 4}));
  const auto [k2, v2] = cache.append(randn({1, 2, 2, 4}), randn({1, 2, 2, 4}));
  // One storage, allocated once: the views of successive steps share it.
  EXPECT_EQ(k1.storage(), k2.storage());
  EXPECT_EQ(v1.storage(), v2.storage());
  EXPECT_EQ(k1.storage(), cache.keys().storage());
  EXPECT_NE(k1.storage(), v1.storage());
  // A write through a view shows in the cache.
  Tensor view = cache.keys();
  view.narrow(2, 0, 1).fill(7.0);
  EXPECT_EQ(values(cache.keys().narrow(2, 0, 1)), std::vector<double>(8, 7.0));
  EXPECT_EQ(values(k2.narrow(2, 0, 1)), std::vector<double>(8, 7.0));
}

TEST_P(AttentionTest, KvCacheCapacityAndTruncate) {
  nn::KvCache cache(1, 2, 4, 3, DType::F32, dev());
  const Tensor k = randn({1, 2, 3, 3}), v = randn({1, 2, 3, 3});
  cache.append(k, v);
  const std::vector<double> before = values(cache.keys()), vbefore = values(cache.values());
  WICK_EXPECT_ERROR(cache.append(randn({1, 2, 2, 3}), randn({1, 2, 2, 3})), ShapeError, "KvCache::append: ", "2",
                    "capacity 4");
  EXPECT_EQ(cache.size(), 3);
  EXPECT_EQ(values(cache.keys()), before);
  EXPECT_EQ(values(cache.values()), vbefore);
  cache.append(randn({1, 2, 1, 3}), randn({1, 2, 1, 3}));
  EXPECT_EQ(cache.size(), 4);
  // Truncate forgets the tail; the next append writes over it.
  cache.truncate(2);
  EXPECT_EQ(cache.size(), 2);
  EXPECT_EQ(values(cache.keys()), values(k.narrow(2, 0, 2)));
  const Tensor k2 = randn({1, 2, 2, 3});
  const auto [keys, vals] = cache.append(k2, randn({1, 2, 2, 3}));
  EXPECT_EQ(values(keys), values(cat({k.narrow(2, 0, 2), k2}, 2)));
  cache.truncate(0);
  EXPECT_EQ(cache.keys().shape(), Shape({1, 2, 0, 3}));
  WICK_EXPECT_ERROR(cache.truncate(1), ShapeError, "KvCache::truncate: ", "1");
  WICK_EXPECT_ERROR(cache.truncate(-1), ShapeError, "KvCache::truncate: ");
}

// write_at writes where a device tensor says, as append writes at size(); set_size declares them.
// Head dims whose rows are whole 16-byte runs (f32 4, bf16 8, f16 16: moved as runs on a GPU) and
// others.
TEST_P(AttentionTest, KvCacheWritesAtDevicePositions) {
  for (const auto& [dt, d] : std::vector<std::pair<DType, int64_t>>{
           {DType::F32, 4}, {DType::BF16, 4}, {DType::BF16, 8}, {DType::F16, 16}, {DType::F64, 6}}) {
    nn::KvCache appended(2, 3, 10, d, dt, dev()), written(2, 3, 10, d, dt, dev());
    const Tensor k = randn({2, 4, 3, d}, dt).transpose(1, 2), v = randn({2, 3, 4, d}, dt);  // strided k
    appended.append(k, v);
    const Tensor at = Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 3}, {4}, dev());
    const auto [keys, vals] = written.write_at(k, v, at, 6);
    EXPECT_EQ(written.size(), 0);
    EXPECT_EQ(keys.shape(), Shape({2, 3, 6, d}));
    EXPECT_EQ(values(keys.narrow(2, 0, 4)), values(appended.keys()));
    EXPECT_EQ(values(vals.narrow(2, 0, 4)), values(appended.values()));
    EXPECT_EQ(values(keys.narrow(2, 4, 2)), std::vector<double>(static_cast<size_t>(2 * 3 * 2 * d), 0.0));  // untouched
    // One position, out of order: the seventh.
    const Tensor k1 = randn({2, 3, 1, d}, dt), v1 = randn({2, 3, 1, d}, dt);
    written.write_at(k1, v1, Tensor::from_vector(std::vector<int64_t>{6}, {1}, dev()), 7);
    written.set_size(7);
    EXPECT_EQ(values(written.keys().narrow(2, 6, 1)), values(k1));
    EXPECT_EQ(values(written.values().narrow(2, 6, 1)), values(v1));
  }
  nn::KvCache cache(1, 2, 4, 3, DType::F32, dev());
  const Tensor k = randn({1, 2, 1, 3});
  const Tensor at = Tensor::from_vector(std::vector<int64_t>{1}, {1}, dev());
  WICK_EXPECT_ERROR(cache.write_at(k, k, at, 5), ShapeError, "KvCache::write_at: ", "length 5");
  WICK_EXPECT_ERROR(cache.write_at(k, k, Tensor::from_vector(std::vector<int64_t>{1, 2}, {2}, dev()), 2), ShapeError,
                    "KvCache::write_at: ", "1 i64 values");
  WICK_EXPECT_ERROR(cache.write_at(k, k, at.to_dtype(DType::I32), 2), ShapeError, "KvCache::write_at: ");
  WICK_EXPECT_ERROR(cache.write_at(randn({1, 3, 1, 3}), k, at, 2), ShapeError, "KvCache::write_at: ", "(b, h_kv, t_new, d)");
  WICK_EXPECT_ERROR(cache.set_size(5), ShapeError, "KvCache::set_size: ", "5");
  // A position past the capacity: the scatter's IndexError, at the latest when the device is waited
  // for, and nothing written; rows of whole 16-byte runs too.
  for (int64_t d : {3, 8}) {
    nn::KvCache c(1, 2, 4, d, DType::F32, dev());
    const Tensor kd = randn({1, 2, 1, d});
    EXPECT_THROW(
        {
          c.write_at(kd, kd, Tensor::from_vector(std::vector<int64_t>{4}, {1}, dev()), 2);
          synchronize(dev());
        },
        IndexError);
    c.set_size(4);
    EXPECT_EQ(values(c.keys()), std::vector<double>(static_cast<size_t>(2 * 4 * d), 0.0));
  }
  // The error names the cache's op and the position: positions on the host at once, on a GPU when
  // the device is waited for (the fused decode step's kernel, or a check before the scatter).
  nn::KvCache named(1, 2, 4, 8, DType::F32, dev());
  const Tensor k8 = randn({1, 2, 1, 8}), q8 = randn({1, 2, 1, 8});
  const Tensor cos = Tensor::ones({1, 4}, DType::F32, dev()), sin = Tensor::zeros({1, 4}, DType::F32, dev());
  const Tensor past = Tensor::from_vector(std::vector<int64_t>{4}, {1}, dev());
  WICK_EXPECT_ERROR(
      {
        named.write_at(k8, k8, past, 2);
        synchronize(dev());
      },
      IndexError, "KvCache::write_at: ", "position 4", "capacity of 4");
  WICK_EXPECT_ERROR(
      {
        named.write_at(k8, k8, Tensor::from_vector(std::vector<int64_t>{-1}, {1}, dev()), 2);
        synchronize(dev());
      },
      IndexError, "KvCache::write_at: ", "position -1");
  // Two positions (no fused kernel: rope, then the scatter), one past the capacity.
  const Tensor k2 = randn({1, 2, 2, 8}), q2 = randn({1, 2, 2, 8});
  const Tensor cos2 = Tensor::ones({2, 4}, DType::F32, dev()), sin2 = Tensor::zeros({2, 4}, DType::F32, dev());
  const Tensor two = Tensor::from_vector(std::vector<int64_t>{1, 9}, {2}, dev());
  WICK_EXPECT_ERROR(
      {
        named.rope_write_at(q2, k2, k2, cos2, sin2, true, two, 2);
        synchronize(dev());
      },
      IndexError, "KvCache::rope_write_at: ", "position 9");
  WICK_EXPECT_ERROR(
      {
        named.rope_write_at(q8, k8, k8, cos, sin, false, past, 2);
        synchronize(dev());
      },
      IndexError, "KvCache::rope_write_at: ", "position 4", "capacity of 4");
}

// rope_write_at gives the bits of rope, then write_at, for every dtype and both pairings: q, k and
// v as views of one stacked product (the model's), head dims the GPU moves in 16-byte packs (16,
// 128) and one it does not (6), and rows strided along d; into caches that already hold values.
// Steps of one position (a GPU's kernel), of two (composed), and of a skipped one.
TEST_P(AttentionTest, KvCacheRopeWriteAtIsRopeThenWriteAt) {
  const int64_t b = 2, h = 4, h_kv = 2, capacity = 7;
  const std::vector<std::vector<int64_t>> steps = {{5}, {5, 1}, {std::numeric_limits<int64_t>::max()}};
  for (DType dt : kFloat)
    for (int64_t d : {6, 16, 128})
      for (bool strided : {false, true})
        for (bool interleaved : {false, true})
          for (const std::vector<int64_t>& positions : steps) {
            const auto t = static_cast<int64_t>(positions.size());
            SCOPED_TRACE(detail::str_cat(dt, " d ", d, strided ? " strided" : " stacked",
                                         interleaved ? " interleaved" : " halves", ", first position ", positions[0],
                                         " of ", t));
            Tensor q, k, v;
            if (strided) {  // every other feature
              q = randn({b, h, t, 2 * d}, dt).slice(3, 0, 2 * d, 2);
              k = randn({b, h_kv, t, 2 * d}, dt).slice(3, 1, 2 * d, 2);
              v = randn({b, h_kv, t, 2 * d}, dt).slice(3, 0, 2 * d, 2);
            } else {
              const Tensor y = randn({b, t, (h + 2 * h_kv) * d}, dt);
              auto heads = [&](int64_t from, int64_t n) {
                return y.narrow(2, from * d, n * d).reshape({b, t, n, d}).transpose(1, 2);
              };
              q = heads(0, h);
              k = heads(h, h_kv);
              v = heads(h + h_kv, h_kv);
            }
            const Tensor cos = randn({t, d / 2}, dt), sin = randn({t, d / 2}, dt);
            const Tensor old_k = randn({b, h_kv, capacity, d}, dt), old_v = randn({b, h_kv, capacity, d}, dt);
            nn::KvCache fused(b, h_kv, capacity, d, dt, dev()), composed(b, h_kv, capacity, d, dt, dev());
            fused.append(old_k, old_v);
            composed.append(old_k, old_v);
            auto turn = [&](const Tensor& x) { return interleaved ? nn::rope_i(x, cos, sin) : nn::rope(x, cos, sin); };
            const Tensor at = Tensor::from_vector(positions, {t}, dev());
            const nn::KvCache::Rotated r = fused.rope_write_at(q, k, v, cos, sin, interleaved, at, 6);
            const auto [keys, vals] = composed.write_at(turn(k), v, at, 6);
            EXPECT_EQ(r.q.shape(), q.shape());
            EXPECT_EQ(values(r.q), values(turn(q)));
            EXPECT_EQ(r.keys.shape(), Shape({b, h_kv, 6, d}));
            EXPECT_EQ(values(r.keys), values(keys));
            EXPECT_EQ(values(r.values), values(vals));
            EXPECT_EQ(values(fused.keys()), values(composed.keys()));  // past `length` too
            EXPECT_EQ(fused.size(), capacity);
          }
  // The skipped position wrote nothing.
  nn::KvCache untouched(1, 1, 2, 4, DType::F32, dev());
  const Tensor x = randn({1, 1, 1, 4}), c = randn({1, 2});
  untouched.rope_write_at(x, x, x, c, c, false,
                          Tensor::from_vector(std::vector<int64_t>{std::numeric_limits<int64_t>::max()}, {1}, dev()),
                          2);
  untouched.set_size(2);
  EXPECT_EQ(values(untouched.keys()), std::vector<double>(8, 0.0));
}

TEST_P(AttentionTest, KvCacheRopeWriteAtChecksAndAliases) {
  constexpr const char* op = "KvCache::rope_write_at: ";
  nn::KvCache cache(1, 2, 4, 8, DType::F32, dev());
  const Tensor q = randn({1, 4, 1, 8}), k = randn({1, 2, 1, 8}), cs = randn({1, 4});
  const Tensor at = Tensor::from_vector(std::vector<int64_t>{1}, {1}, dev());
  WICK_EXPECT_ERROR(cache.rope_write_at(q.to_dtype(DType::BF16), k, k, cs, cs, false, at, 2), DTypeError, op, "q ",
                    "bf16");
  WICK_EXPECT_ERROR(cache.rope_write_at(randn({1, 4, 2, 8}), k, k, cs, cs, false, at, 2), ShapeError, op, "q ",
                    "t_new");
  WICK_EXPECT_ERROR(cache.rope_write_at(q, k, k, randn({1, 3}), cs, true, at, 2), ShapeError, op, "cos", "[1, 4]");
  WICK_EXPECT_ERROR(cache.rope_write_at(q, k, k, cs, cs.to_dtype(DType::F64), false, at, 2), DTypeError, op, "sin");
  WICK_EXPECT_ERROR(cache.rope_write_at(q, randn({1, 3, 1, 8}), k, cs, cs, false, at, 2), ShapeError, op,
                    "(b, h_kv, t_new, d)");
  WICK_EXPECT_ERROR(cache.rope_write_at(q, k, k, cs, cs, false, at, 5), ShapeError, op, "length 5");
  WICK_EXPECT_ERROR(cache.rope_write_at(q, k, k, cs, cs, false, at.to_dtype(DType::I32), 2), ShapeError, op, "i64");
  WICK_EXPECT_ERROR(cache.rope_write_at(Tensor(), k, k, cs, cs, false, at, 2), Error, op);
  // A position past the capacity: write_at's IndexError, at the latest when the device is waited
  // for, and nothing written.
  EXPECT_THROW(
      {
        cache.rope_write_at(q, k, k, cs, cs, false, Tensor::from_vector(std::vector<int64_t>{4}, {1}, dev()), 2);
        synchronize(dev());
      },
      IndexError);
  cache.set_size(4);
  EXPECT_EQ(values(cache.keys()), std::vector<double>(2 * 4 * 8, 0.0));
  EXPECT_EQ(values(cache.values()), std::vector<double>(2 * 4 * 8, 0.0));
  // Keys and values read from the cache itself: read before any is written.
  const Tensor old = randn({1, 2, 4, 8});
  nn::KvCache self(1, 2, 4, 8, DType::F32, dev()), copy(1, 2, 4, 8, DType::F32, dev());
  self.append(old, old.mul(2));
  copy.append(old, old.mul(2));
  self.rope_write_at(q, self.keys().narrow(2, 0, 1), self.values().narrow(2, 3, 1), cs, cs, false, at, 4);
  copy.write_at(nn::rope(old.narrow(2, 0, 1), cs, cs), old.mul(2).narrow(2, 3, 1), at, 4);
  EXPECT_EQ(values(self.keys()), values(copy.keys()));
  EXPECT_EQ(values(self.values()), values(copy.values()));
}

// rope_write_attention gives the bits of rope_write_at, then scaled_dot_product_attention, and
// leaves the same cache: on a GPU one kernel for halves whose key heads take up to 16 query heads
// (the attention's decoding tiles), split key ranges from 33 keys on; f64, f32 and 32 query heads
// per key head composed. q, k and v are views of one stacked product (the model's) or strided
// tensors; the new position the last key, one in the middle, one past the keys read, or skipped.
TEST_P(AttentionTest, KvCacheRopeWriteAttentionIsRopeWriteAtThenAttention) {
  constexpr int64_t kSkip = std::numeric_limits<int64_t>::max();
  struct Shape4 {
    int64_t b, h, h_kv, d;
  };
  const Shape4 shapes[] = {{1, 32, 8, 128}, {2, 4, 2, 16}, {1, 16, 1, 64}, {1, 32, 1, 64},
                           {2, 6, 2, 80},   {1, 4, 4, 96}, {1, 2, 1, 256}, {1, 4, 2, 6}};
  const int64_t capacity = 80;
  for (DType dt : kFloat)
    for (const Shape4& s : shapes)
      for (int64_t length : {1, 33, 70})
        for (int variant = 0; variant < 4; ++variant) {
          // 0: the new position last, a mask hiding the keys past position 5, halves; 1: in the middle, a window of 9,
          // interleaved, strided rows; 2: past the keys read, soft-capped; 3: skipped, a scale of 0.3.
          const bool interleaved = variant == 1, strided = variant == 1;
          const int64_t position = variant == 0   ? length - 1
                                   : variant == 1 ? length / 2
                                   : variant == 2 ? length + 3
                                                  : kSkip;
          if (dt == DType::F64 && (s.h > 8 || s.d > 96)) continue;  // composed either way: keep it short
          SCOPED_TRACE(detail::str_cat(dt, " b ", s.b, " h ", s.h, " h_kv ", s.h_kv, " d ", s.d, ", length ", length,
                                       ", variant ", variant));
          Tensor q, k, v;
          if (strided) {  // every other feature
            q = randn({s.b, s.h, 1, 2 * s.d}, dt).slice(3, 0, 2 * s.d, 2);
            k = randn({s.b, s.h_kv, 1, 2 * s.d}, dt).slice(3, 1, 2 * s.d, 2);
            v = randn({s.b, s.h_kv, 1, 2 * s.d}, dt).slice(3, 0, 2 * s.d, 2);
          } else {
            const Tensor y = randn({s.b, 1, (s.h + 2 * s.h_kv) * s.d}, dt);
            auto heads = [&](int64_t from, int64_t n) {
              return y.narrow(2, from * s.d, n * s.d).reshape({s.b, 1, n, s.d}).transpose(1, 2);
            };
            q = heads(0, s.h);
            k = heads(s.h, s.h_kv);
            v = heads(s.h + s.h_kv, s.h_kv);
          }
          const Tensor cos = randn({1, s.d / 2}, dt), sin = randn({1, s.d / 2}, dt);
          const Tensor old_k = randn({s.b, s.h_kv, capacity, s.d}, dt), old_v = randn({s.b, s.h_kv, capacity, s.d}, dt);
          nn::KvCache fused(s.b, s.h_kv, capacity, s.d, dt, dev()), composed(s.b, s.h_kv, capacity, s.d, dt, dev());
          fused.append(old_k, old_v);
          composed.append(old_k, old_v);
          nn::AttentionOptions o;
          if (variant == 0)
            o.mask = mask_of(
                         1, length, [](int64_t, int64_t j) { return j <= 5; }, dt)
                         .reshape({1, 1, 1, length});
          if (variant == 1) o.window = 9;
          if (variant == 2) o.softcap = 5;
          if (variant == 3) o.scale = 0.3;
          const Tensor at = Tensor::from_vector(std::vector<int64_t>{position}, {1}, dev());
          const Tensor got = fused.rope_write_attention(q, k, v, cos, sin, interleaved, at, length, o);
          const nn::KvCache::Rotated r = composed.rope_write_at(q, k, v, cos, sin, interleaved, at, length);
          const Tensor want = nn::scaled_dot_product_attention(r.q, r.keys, r.values, o);
          ASSERT_EQ(got.shape(), Shape({s.b, s.h, 1, s.d}));
          EXPECT_EQ(got.dtype(), dt);
          EXPECT_EQ(values(got), values(want));
          EXPECT_EQ(values(fused.keys()), values(composed.keys()));  // every position, past `length` too
          EXPECT_EQ(values(fused.values()), values(composed.values()));
        }
}

TEST_P(AttentionTest, KvCacheRopeWriteAttentionChecksBeforeWriting) {
  constexpr const char* op = "KvCache::rope_write_attention: ";
  for (DType dt : {DType::F32, DType::BF16}) {
    nn::KvCache cache(1, 2, 4, 8, dt, dev());
    const Tensor old = randn({1, 2, 4, 8}, dt);
    cache.append(old, old);
    const Tensor q = randn({1, 4, 1, 8}, dt), k = randn({1, 2, 1, 8}, dt), cs = randn({1, 4}, dt);
    const Tensor at = Tensor::from_vector(std::vector<int64_t>{1}, {1}, dev());
    WICK_EXPECT_ERROR(cache.rope_write_attention(q.to_dtype(DType::F64), k, k, cs, cs, false, at, 2, {}), DTypeError,
                      op, "q ");
    WICK_EXPECT_ERROR(cache.rope_write_attention(q, k, k, cs, cs, false, at, 5, {}), ShapeError, op, "length 5");
    WICK_EXPECT_ERROR(cache.rope_write_attention(q, k, k, randn({1, 3}, dt), cs, false, at, 2, {}), ShapeError, op,
                      "cos");
    nn::AttentionOptions bad;
    bad.window = -1;
    WICK_EXPECT_ERROR(cache.rope_write_attention(q, k, k, cs, cs, false, at, 2, bad), ShapeError,
                      "scaled_dot_product_attention: ", "window");
    nn::AttentionOptions wide;
    wide.mask = randn({1, 1, 1, 3}, dt);
    WICK_EXPECT_ERROR(cache.rope_write_attention(q, k, k, cs, cs, false, at, 2, wide), ShapeError,
                      "scaled_dot_product_attention: ", "mask");
    // A position past the capacity: rope_write_at's IndexError, at the latest when the device is
    // waited for. Nothing was written by any of these calls.
    EXPECT_THROW(
        {
          cache.rope_write_attention(q, k, k, cs, cs, false, Tensor::from_vector(std::vector<int64_t>{4}, {1}, dev()),
                                     2, {});
          synchronize(dev());
        },
        IndexError);
    EXPECT_EQ(values(cache.keys()), values(old));
    EXPECT_EQ(values(cache.values()), values(old));
  }
}

TEST_P(AttentionTest, KvCacheBadArguments) {
  WICK_EXPECT_ERROR(nn::KvCache(1, 2, -1, 4, DType::F32, dev()), ShapeError, "KvCache: ", "capacity -1");
  WICK_EXPECT_ERROR(nn::KvCache(1, 2, 4, 4, DType::I32, dev()), DTypeError, "KvCache: ", "i32");
  nn::KvCache cache(1, 2, 4, 3, DType::F32, dev());
  const Tensor good = randn({1, 2, 1, 3});
  WICK_EXPECT_ERROR(cache.append(randn({1, 2, 1, 4}), good), ShapeError, "KvCache::append: ", "k ", "[1, 2, 1, 4]");
  WICK_EXPECT_ERROR(cache.append(good, randn({1, 1, 1, 3})), ShapeError, "KvCache::append: ", "v ", "[1, 1, 1, 3]");
  WICK_EXPECT_ERROR(cache.append(good.reshape({2, 1, 3}), good), ShapeError, "KvCache::append: ", "[2, 1, 3]");
  WICK_EXPECT_ERROR(cache.append(good, randn({1, 2, 2, 3})), ShapeError, "KvCache::append: ", "positions");
  WICK_EXPECT_ERROR(cache.append(good.to_dtype(DType::F16), good), DTypeError, "KvCache::append: ", "f16", "f32");
  WICK_EXPECT_ERROR(cache.append(good, Tensor()), Error, "KvCache::append: ");
  if (!dev().is_cpu())
    WICK_EXPECT_ERROR(cache.append(good.to_device(Device::cpu()), good), DeviceError, "KvCache::append: ");
  EXPECT_EQ(cache.size(), 0);
}

// ---- a Llama-style attention block ---------------------------------------------------------------

// x + o(attention(rope(q(n)), rope(k(n)), v(n))) with n = rms_norm(x), grouped heads, rope by the
// halves of each head (GPT-NeoX pairs). forward() runs it as a model does, with the nn wing and a
// KvCache; composed() runs the same block from primitives over the whole prefix: the norm, rope and
// a causal softmax written with tensor ops, each key head repeated for its group.
struct Block {
  int64_t dim, heads, kv_heads, head_dim;
  Tensor norm, wq, wk, wv, wo;  // weights as (in, out)
  static constexpr double kTheta = 10000, kEps = 1e-5;

  // (b, t, dim) -> (b, h, t, head_dim) projections.
  Tensor heads_of(const Tensor& n, const Tensor& w, int64_t h) const {
    return n.matmul(w).reshape({n.dim(0), n.dim(1), h, head_dim}).transpose(1, 2);
  }
  Tensor project_out(const Tensor& x, const Tensor& a) const {
    return x.add(a.transpose(1, 2).reshape({x.dim(0), x.dim(1), heads * head_dim}).matmul(wo));
  }

  // Rows start .. start + t - 1 of the sequence, with their keys and values appended to the cache.
  Tensor forward(const Tensor& x, int64_t start, nn::KvCache& cache) const {
    const Tensor n = nn::rms_norm(x, norm, kEps);
    const nn::RopeTables rt = nn::rope_tables(head_dim, x.dim(1), kTheta, start, DType::F32, x.device());
    const Tensor q = nn::rope(heads_of(n, wq, heads), rt.cos, rt.sin);
    const Tensor k = nn::rope(heads_of(n, wk, kv_heads), rt.cos, rt.sin);
    const auto [keys, values] = cache.append(k, heads_of(n, wv, kv_heads));
    nn::AttentionOptions o;
    o.causal = true;
    return project_out(x, nn::scaled_dot_product_attention(q, keys, values, o));
  }

  // The whole sequence x (b, t, dim) from primitives, no cache.
  Tensor composed(const Tensor& x) const {
    const int64_t t = x.dim(1), half = head_dim / 2, group = heads / kv_heads;
    const Tensor n = x.div(x.sqr().mean(2, true).add(kEps).sqrt()).mul(norm);
    std::vector<double> c(static_cast<size_t>(t * half)), s(c.size());
    for (int64_t p = 0; p < t; ++p)
      for (int64_t i = 0; i < half; ++i) {
        const double angle =
            static_cast<double>(p) * std::pow(kTheta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
        c[static_cast<size_t>(p * half + i)] = std::cos(angle);
        s[static_cast<size_t>(p * half + i)] = std::sin(angle);
      }
    const Tensor cs = Tensor::from_vector(c, {t, half}, x.device()).to_dtype(DType::F32);
    const Tensor sn = Tensor::from_vector(s, {t, half}, x.device()).to_dtype(DType::F32);
    const auto rope = [&](const Tensor& h) {
      const Tensor a = h.narrow(3, 0, half), b = h.narrow(3, half, half);
      return cat({a.mul(cs).sub(b.mul(sn)), a.mul(sn).add(b.mul(cs))}, 3);
    };
    const auto repeat = [&](const Tensor& h) {  // (b, kv_heads, t, d) -> (b, heads, t, d)
      return h.unsqueeze(2)
          .broadcast_as({x.dim(0), kv_heads, group, t, head_dim})
          .reshape({x.dim(0), heads, t, head_dim});
    };
    const Tensor q = rope(heads_of(n, wq, heads));
    const Tensor k = repeat(rope(heads_of(n, wk, kv_heads))), v = repeat(heads_of(n, wv, kv_heads));
    const Tensor pos = Tensor::arange(t, DType::I64, x.device());
    const Tensor hidden = pos.reshape({1, t}).gt(pos.reshape({t, 1}));  // key after query
    const Tensor scores = q.matmul(k.transpose(2, 3)).mul(1 / std::sqrt(static_cast<double>(head_dim)));
    const Tensor masked = hidden.where_cond(Tensor::scalar(-1e30, DType::F32, x.device()), scores);
    const Tensor e = masked.sub(masked.max(3, true)).exp();
    return project_out(x, e.div(e.sum(3, true)).matmul(v));
  }
};

TEST_P(AttentionTest, LlamaBlockDecodesWithACache) {
  const int64_t b = 2, dim = 64, heads = 8, kv_heads = 2, head_dim = 16, prefill = 5, steps = 16;
  auto w = [&](int64_t in, int64_t out) {
    return Tensor::rand_normal({in, out}, 0, 1 / std::sqrt(double(in)), DType::F32, dev());
  };
  const Block block{dim,
                    heads,
                    kv_heads,
                    head_dim,
                    Tensor::rand_uniform({dim}, 0.5, 1.5, DType::F32, dev()),
                    w(dim, heads * head_dim),
                    w(dim, kv_heads * head_dim),
                    w(dim, kv_heads * head_dim),
                    w(heads * head_dim, dim)};
  const Tensor x = randn({b, prefill + steps, dim});
  const Tensor expected = block.composed(x);
  nn::KvCache cache(b, kv_heads, prefill + steps, head_dim, DType::F32, dev());
  // Prefill, then one token at a time, each against the composed block's row.
  expect_close(block.forward(x.narrow(1, 0, prefill), 0, cache), expected.narrow(1, 0, prefill), 1e-5);
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t t = prefill + s;
    const Tensor step = block.forward(x.narrow(1, t, 1), t, cache);
    EXPECT_EQ(cache.size(), t + 1);
    expect_close(step, expected.narrow(1, t, 1), 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, AttentionTest, ::testing::ValuesIn(test::devices()), test::device_name);

}  // namespace
}  // namespace wick
