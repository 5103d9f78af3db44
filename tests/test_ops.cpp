// The semantics every backend keeps (docs/numerics.md), checked with hand-computed values on every
// device: broadcasting, integer wrap-around and division, NaN rules, rounding, reductions,
// sorting, index ops with the skip sentinel, and determinism.
#include <cmath>
#include <cstring>
#include <limits>

#include "test_util.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace wick {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

class OpsTest : public ::testing::TestWithParam<Device> {
 protected:
  Device dev() const { return GetParam(); }
  template <typename T>
  Tensor make(std::vector<T> v, const Shape& s) const {
    return Tensor::from_vector(v, s, dev());
  }
  template <typename T>
  Tensor make(std::vector<T> v) const {
    return make(v, Shape{static_cast<int64_t>(v.size())});
  }
};

// Float vectors compared with NaN equal to NaN.
void expect_same(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]))
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i;
    else
      EXPECT_EQ(got[i], want[i]) << "element " << i;
  }
}

TEST_P(OpsTest, BinaryBroadcastingAndScalars) {
  Tensor a = make<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor row = make<float>({10, 20, 30});
  Tensor col = make<float>({100, 200}, {2, 1});
  EXPECT_EQ((a + row).to_vector<float>(), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ((a * col).to_vector<float>(), (std::vector<float>{100, 200, 300, 800, 1000, 1200}));
  EXPECT_EQ((row - col).shape(), Shape({2, 3}));
  EXPECT_EQ((a.t() / 2).to_vector<float>(), (std::vector<float>{0.5, 2, 1, 2.5, 1.5, 3}));
  EXPECT_EQ((10 - a).to_vector<float>()[5], 4.f);
  EXPECT_EQ((2 / make<float>({4})).item<float>(), 0.5f);
  EXPECT_EQ((-a).to_vector<float>()[0], -1.f);
  EXPECT_EQ(a.maximum(3.5).to_vector<float>(), (std::vector<float>{3.5, 3.5, 3.5, 4, 5, 6}));
  EXPECT_EQ(a.clamp(2, 4).to_vector<float>(), (std::vector<float>{2, 2, 3, 4, 4, 4}));
}

TEST_P(OpsTest, IntegerArithmeticWrapsAndDividesSafely) {
  EXPECT_EQ((make<uint8_t>({250, 3}) + make<uint8_t>({10, 255})).to_vector<uint8_t>(), (std::vector<uint8_t>{4, 2}));
  EXPECT_EQ((make<int32_t>({std::numeric_limits<int32_t>::max()}) + 1).item<int32_t>(),
            std::numeric_limits<int32_t>::min());
  EXPECT_EQ((make<int16_t>({300}) * make<int16_t>({300})).item<int16_t>(), static_cast<int16_t>(90000 - 65536 * 1));
  // Division truncates toward zero; x / 0 is 0; MIN / -1 wraps to MIN.
  EXPECT_EQ((make<int32_t>({7, -7, 7, 5, std::numeric_limits<int32_t>::min()}) / make<int32_t>({2, 2, 0, -1, -1}))
                .to_vector<int32_t>(),
            (std::vector<int32_t>{3, -3, 0, -5, std::numeric_limits<int32_t>::min()}));
  EXPECT_EQ((make<uint32_t>({9}) / make<uint32_t>({0})).item<uint32_t>(), 0u);
  EXPECT_EQ(make<uint8_t>({1, 0}).neg().to_vector<uint8_t>(), (std::vector<uint8_t>{255, 0}));
  EXPECT_EQ(make<int64_t>({std::numeric_limits<int64_t>::min(), -3}).abs().to_vector<int64_t>(),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), 3}));
  EXPECT_EQ(make<int16_t>({-5, 0, 9}).sign().to_vector<int16_t>(), (std::vector<int16_t>{-1, 0, 1}));
  EXPECT_EQ(make<int32_t>({-5, 4}).relu().to_vector<int32_t>(), (std::vector<int32_t>{0, 4}));
  EXPECT_EQ(make<int32_t>({-5, 4}).sqr().to_vector<int32_t>(), (std::vector<int32_t>{25, 16}));
  EXPECT_EQ(make<int64_t>({-7}).round().item<int64_t>(), -7);
  // Integer affine computes in f64 and converts back with the float -> int rules.
  EXPECT_EQ(make<uint8_t>({10, 200}).affine(1.5, 0.75).to_vector<uint8_t>(), (std::vector<uint8_t>{15, 255}));
}

TEST_P(OpsTest, NaNAndFloatRules) {
  Tensor a = make<float>({kNaN, 1, 2, -0.0f});
  Tensor b = make<float>({1, kNaN, 3, 0.0f});
  expect_same(a.maximum(b).to_vector<float>(), {kNaN, kNaN, 3, -0.0f});
  expect_same(a.minimum(b).to_vector<float>(), {kNaN, kNaN, 2, -0.0f});
  EXPECT_EQ(a.eq(b).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_EQ(a.ne(b).to_vector<uint8_t>(), (std::vector<uint8_t>{1, 1, 1, 0}));
  EXPECT_EQ(a.lt(b).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 0, 1, 0}));
  EXPECT_EQ(a.ge(2).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 0, 1, 0}));
  expect_same(a.relu().to_vector<float>(), {kNaN, 1, 2, 0});
  expect_same(make<float>({kNaN, -3, 0, 2}).sign().to_vector<float>(), {kNaN, -1, 0, 1});
  // round: ties away from zero (Candle, C's round()).
  EXPECT_EQ(make<float>({0.5, 1.5, 2.5, -0.5, -2.5, 2.4f}).round().to_vector<float>(),
            (std::vector<float>{1, 2, 3, -1, -3, 2}));
  EXPECT_EQ(make<float>({-1.5, 1.5}).floor().to_vector<float>(), (std::vector<float>{-2, 1}));
  EXPECT_EQ(make<float>({-1.5, 1.5}).ceil().to_vector<float>(), (std::vector<float>{-1, 2}));
  std::vector<float> r = make<float>({0, -0.0f, 4}).recip().to_vector<float>();
  EXPECT_EQ(r[0], kInf);
  EXPECT_EQ(r[1], -kInf);
  EXPECT_EQ(r[2], 0.25f);
  EXPECT_TRUE(std::isnan(make<float>({-1}).sqrt().item<float>()));
  EXPECT_NEAR(make<float>({1}).gelu().item<float>(), 0.8411920f, 1e-6);
  EXPECT_NEAR(make<float>({1}).gelu_erf().item<float>(), 0.8413447f, 1e-6);
  EXPECT_NEAR(make<float>({2}).silu().item<float>(), 2 / (1 + std::exp(-2.f)), 1e-6);
  EXPECT_NEAR(make<float>({-1}).elu(0.5).item<float>(), 0.5f * (std::exp(-1.f) - 1), 1e-7);
  EXPECT_NEAR(make<float>({2}).powf(0.5).item<float>(), std::sqrt(2.f), 1e-7);
  EXPECT_EQ(make<float>({2, 3}).affine(2, -1).to_vector<float>(), (std::vector<float>{3, 5}));
}

// Float vectors compared within `tol`, with NaN equal to NaN and infinities exact.
void expect_near(const std::vector<float>& got, const std::vector<double>& want, double tol = 2e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]))
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i;
    else if (std::isinf(want[i]))
      EXPECT_EQ(got[i], want[i]) << "element " << i;
    else
      EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
  }
}

TEST_P(OpsTest, ComparisonsAndUnaryMath) {
  Tensor a = make<float>({1, 2, 3, kNaN});
  Tensor b = make<float>({2, 2, 1, 1});
  EXPECT_EQ(a.le(b).to_vector<uint8_t>(), (std::vector<uint8_t>{1, 1, 0, 0}));
  EXPECT_EQ(a.gt(b).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 0, 1, 0}));
  EXPECT_EQ(a.le(2).to_vector<uint8_t>(), (std::vector<uint8_t>{1, 1, 0, 0}));
  EXPECT_EQ(a.gt(2).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 0, 1, 0}));
  Tensor u = make<uint8_t>({0, 255, 7}, {3, 1}), v = make<uint8_t>({7, 255});
  EXPECT_EQ(u.le(v).to_vector<uint8_t>(), (std::vector<uint8_t>{1, 1, 0, 1, 1, 1}));
  EXPECT_EQ(u.gt(v).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 0, 1, 0, 0, 0}));

  const double e = 2.718281828459045, pi = 3.141592653589793;
  const float fe = static_cast<float>(e), fpi = static_cast<float>(pi);
  expect_near(make<float>({0, 1, -kInf, kInf, kNaN}).exp().to_vector<float>(), {1, e, 0, kInf, kNaN});
  expect_near(make<float>({1, fe, 0, -1}).log().to_vector<float>(), {0, 1, -kInf, kNaN});
  expect_near(make<float>({0, fpi / 2, fpi / 6, -fpi / 2}).sin().to_vector<float>(), {0, 1, 0.5, -1});
  expect_near(make<float>({0, fpi / 3, fpi}).cos().to_vector<float>(), {1, 0.5, -1});
  expect_near(make<float>({0, 0.5f, -30, kInf}).tanh().to_vector<float>(), {0, 0.46211715726000974, -1, 1});
  expect_near(make<float>({0, 0.5f, -10, 1}).erf().to_vector<float>(), {0, 0.5204998778130465, -1, 0.8427007929497149});
  expect_near(make<float>({0, 2, -kInf, kInf, -2}).sigmoid().to_vector<float>(),
              {0.5, 0.8807970779778823, 0, 1, 0.11920292202211755});
  // A strided operand (every other element) gives the same values.
  expect_near(make<float>({0, 9, 2, 9}).slice(0, 0, 4, 2).sigmoid().to_vector<float>(), {0.5, 0.8807970779778823});
}

TEST_P(OpsTest, PowfEluAndExpand) {
  expect_near(make<float>({1, 2, 3, 4}).powf(2).to_vector<float>(), {1, 4, 9, 16}, 1e-5);
  expect_near(make<float>({4, 9, 0}).powf(0.5).to_vector<float>(), {2, 3, 0});
  expect_near(make<float>({2, 4}).powf(-1).to_vector<float>(), {0.5, 0.25});
  expect_near(make<float>({4, 0.25f}).powf(1.5).to_vector<float>(), {8, 0.125}, 1e-5);
  expect_near(make<float>({5, 0}).powf(0).to_vector<float>(), {1, 1});
  expect_near(make<float>({-1, 0, 2, -kInf}).elu(1.0).to_vector<float>(), {-0.6321205588285577, 0, 2, -1});
  expect_near(make<float>({-2, 3}).elu(0.5).to_vector<float>(), {-0.43233235838169365, 3});
  EXPECT_NEAR(make<double>({-1}).elu(2.0).item<double>(), 2.0 * std::expm1(-1.0), 1e-15);

  // expand: new leading dims and size-1 dims repeat with stride 0, no copy.
  Tensor col = make<int32_t>({1, 2, 3}, {3, 1});
  Tensor e = col.expand({2, 3, 4});
  EXPECT_EQ(e.shape(), Shape({2, 3, 4}));
  EXPECT_EQ(e.strides(), Strides({0, 1, 0}));
  EXPECT_EQ(e.storage(), col.storage());
  std::vector<int32_t> want;
  for (int rep = 0; rep < 2; ++rep)
    for (int32_t v : {1, 2, 3}) want.insert(want.end(), 4, v);
  EXPECT_EQ(e.to_vector<int32_t>(), want);
  EXPECT_EQ((e + 1).sum().item<int32_t>(), 72);
  EXPECT_EQ(Tensor::scalar(5, DType::F32, dev()).expand({2, 2}).to_vector<float>(), std::vector<float>(4, 5));
  EXPECT_EQ(col.expand({3, 1}).to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3}));  // same shape
}

TEST_P(OpsTest, WhereCond) {
  Tensor cond = make<uint8_t>({1, 0, 7}, {3, 1});
  Tensor t = make<int64_t>({1, 2}, {1, 2}), f = make<int64_t>({-1});
  EXPECT_EQ(where_cond(cond, t, f).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, -1, -1, 1, 2}));
  EXPECT_EQ(make<int64_t>({0, -5}).where_cond(make<float>({1, 2}), make<float>({3, 4})).to_vector<float>(),
            (std::vector<float>{3, 2}));
}

TEST_P(OpsTest, Reductions) {
  Tensor x = make<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(x.sum().item<float>(), 21.f);
  EXPECT_EQ(x.sum(0).to_vector<float>(), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ(x.sum(-1, true).shape(), Shape({2, 1}));
  EXPECT_EQ(x.t().sum(1).to_vector<float>(), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ(x.sum({0, 1}).shape(), Shape{});
  EXPECT_EQ(x.mean(1).to_vector<float>(), (std::vector<float>{2, 5}));
  EXPECT_EQ(x.max(0).to_vector<float>(), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(x.min().item<float>(), 1.f);
  EXPECT_FLOAT_EQ(x.var(1).to_vector<float>()[1], 1.f);
  EXPECT_EQ(Tensor::zeros({3, 0}).sum(1).to_vector<float>(), (std::vector<float>{0, 0, 0}));
  // Integer sums wrap in the dtype; mean of f16 does not overflow on the way.
  EXPECT_EQ(make<uint8_t>({200, 100}).sum().item<uint8_t>(), 44);
  Tensor big = Tensor::full({1000}, 100, DType::F16, dev());
  EXPECT_EQ(static_cast<float>(big.mean().item<f16>()), 100.f);
  // NaN propagates through max/min; argmax/argmin take the first NaN, or else the first extreme.
  Tensor n = make<float>({1, kNaN, 3, kNaN});
  EXPECT_TRUE(std::isnan(n.max().item<float>()));
  EXPECT_TRUE(std::isnan(n.min().item<float>()));
  EXPECT_EQ(n.argmax(0).item<uint32_t>(), 1u);
  EXPECT_EQ(n.argmin(0).item<uint32_t>(), 1u);
  Tensor ties = make<int32_t>({3, 7, 7, 1, 1, 7}, {2, 3});
  EXPECT_EQ(ties.argmax(1).to_vector<uint32_t>(), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(ties.argmin(1, true).shape(), Shape({2, 1}));
  EXPECT_EQ(ties.argmin(0).to_vector<uint32_t>(), (std::vector<uint32_t>{1, 1, 0}));
}

TEST_P(OpsTest, ReductionsKeepDimsAndSeveralDims) {
  Tensor x = make<float>({3, 1, 2, 0, 5, -2}, {2, 3});
  Tensor m = x.min(1, true);
  EXPECT_EQ(m.shape(), Shape({2, 1}));
  EXPECT_EQ(m.to_vector<float>(), (std::vector<float>{1, -2}));
  EXPECT_EQ(x.min(0, true).shape(), Shape({1, 3}));
  EXPECT_EQ(x.min(0, true).to_vector<float>(), (std::vector<float>{0, 1, -2}));
  EXPECT_EQ(x.min(-1).to_vector<float>(), (std::vector<float>{1, -2}));
  Tensor mean = x.mean(0, true);
  EXPECT_EQ(mean.shape(), Shape({1, 3}));
  EXPECT_EQ(mean.to_vector<float>(), (std::vector<float>{1.5, 3, 0}));
  EXPECT_EQ(x.mean(Dims{0, 1}, true).shape(), Shape({1, 1}));
  EXPECT_FLOAT_EQ(x.mean(Dims{0, 1}, true).item<float>(), 1.5f);
  // Keepdim results broadcast back against the input.
  EXPECT_EQ(x.mean(1, true).shape(), Shape({2, 1}));
  expect_near((x - x.mean(1, true)).to_vector<float>(), {1, -1, 0, -1, 4, -3});

  // var over {0, 2} of 1..8 in [2, 2, 2]: {1, 2, 5, 6} and {3, 4, 7, 8}, each 17 / 3.
  Tensor y = make<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  for (const Dims& dims : {Dims{0, 2}, Dims{2, 0}, Dims{-1, 0}}) {
    std::vector<float> got = y.var(dims).to_vector<float>();
    ASSERT_EQ(got.size(), 2u);
    EXPECT_FLOAT_EQ(got[0], 17.f / 3);
    EXPECT_FLOAT_EQ(got[1], 17.f / 3);
  }
  EXPECT_EQ(y.var(Dims{0, 2}, true).shape(), Shape({1, 2, 1}));
  EXPECT_FLOAT_EQ(y.var(Dims{0, 1, 2}).item<float>(), 6.f);  // 42 / 7
  EXPECT_FLOAT_EQ(y.var(Dims{}).item<float>(), 6.f);         // no dims: every dim
  EXPECT_DOUBLE_EQ(y.to_dtype(DType::F64).var(Dims{1, 2}).to_vector<double>()[1], 5.0 / 3);
}

TEST_P(OpsTest, RankZeroReductionsGiveTheValue) {
  Tensor s = Tensor::scalar(-2.5, DType::F32, dev());
  for (const Tensor& r : {s.sum(), s.max(), s.min(), s.mean(), s.sum(Dims{}, true)}) {
    EXPECT_EQ(r.shape(), Shape{});
    EXPECT_EQ(r.item<float>(), -2.5f);
  }
  Tensor r = s.sum();
  r.fill(1);
  EXPECT_EQ(s.item<float>(), -2.5f);  // a new tensor, not the input
  EXPECT_EQ(Tensor::scalar(7, DType::I32, dev()).max().item<int32_t>(), 7);
}

TEST_P(OpsTest, CumsumAndSort) {
  Tensor x = make<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(x.cumsum(1).to_vector<int32_t>(), (std::vector<int32_t>{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(x.cumsum(0).to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3, 5, 7, 9}));
  Tensor v = make<float>({3, kNaN, 1, 3, -kInf, 1});
  // Stable: equal values keep their order. NaN is last ascending, first descending.
  EXPECT_EQ(v.argsort().to_vector<uint32_t>(), (std::vector<uint32_t>{4, 2, 5, 0, 3, 1}));
  EXPECT_EQ(v.argsort(false).to_vector<uint32_t>(), (std::vector<uint32_t>{1, 0, 3, 2, 5, 4}));
  auto [values, idx] = make<int64_t>({5, 1, 4, 2, 9, 0}, {2, 3}).sort();
  EXPECT_EQ(values.to_vector<int64_t>(), (std::vector<int64_t>{1, 4, 5, 0, 2, 9}));
  EXPECT_EQ(idx.to_vector<uint32_t>(), (std::vector<uint32_t>{1, 2, 0, 2, 0, 1}));
}

TEST_P(OpsTest, IndexOpsAndTheSkipSentinel) {
  Tensor x = make<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor ids = make<uint32_t>({2, 0, 0xffffffffu, 2});
  EXPECT_EQ(x.index_select(ids, 0).to_vector<float>(), (std::vector<float>{5, 6, 1, 2, 0, 0, 5, 6}));
  EXPECT_EQ(x.index_select(make<int64_t>({1}), 1).to_vector<float>(), (std::vector<float>{2, 4, 6}));
  Tensor g = x.gather(make<uint8_t>({1, 255, 0}, {3, 1}), 1);
  EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{2, 0, 5}));
  Tensor emb = embedding(x, make<int32_t>({2, 1, 0, 2}, {2, 2}));
  EXPECT_EQ(emb.shape(), Shape({2, 2, 2}));
  EXPECT_EQ(emb.to_vector<float>(), (std::vector<float>{5, 6, 3, 4, 1, 2, 5, 6}));

  // scatter: the last write along the dim wins; the sentinel leaves the element alone.
  Tensor dst = Tensor::zeros({2, 3}, DType::F32, dev());
  Tensor sids = make<int64_t>({2, 2, std::numeric_limits<int64_t>::max(), 0, 1, 0}, {2, 3});
  Tensor src = make<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(dst.scatter(sids, src, 1).to_vector<float>(), (std::vector<float>{0, 0, 2, 6, 5, 0}));
  EXPECT_EQ(dst.scatter_add(sids, src, 1).to_vector<float>(), (std::vector<float>{0, 0, 3, 10, 5, 0}));
  EXPECT_EQ(dst.sum().item<float>(), 0.f);  // functional forms leave dst alone
  dst.scatter_add_set(sids, src, 1);
  dst.scatter_add_set(sids, src, 1);
  EXPECT_EQ(dst.to_vector<float>(), (std::vector<float>{0, 0, 6, 20, 10, 0}));
  // index_add: rows of src added at ids along dim (repeats accumulate).
  Tensor base = Tensor::ones({3, 2}, DType::I32, dev());
  Tensor added = base.index_add(make<uint8_t>({2, 2, 255}), make<int32_t>({1, 2, 3, 4, 5, 6}, {3, 2}), 0);
  EXPECT_EQ(added.to_vector<int32_t>(), (std::vector<int32_t>{1, 1, 1, 1, 5, 7}));
  // gather with ids smaller than x in the other dims (PyTorch's rule).
  EXPECT_EQ(x.gather(make<int64_t>({1}, {1, 1}), 0).item<float>(), 3.f);
}

TEST_P(OpsTest, ReductionsAreDeterministic) {
  manual_seed(3, dev());
  Tensor x = Tensor::rand_normal({1 << 20}, 0, 1, DType::F32, dev());
  Tensor t = Tensor::rand_normal({512, 1024}, 0, 1, DType::F32, dev());
  float s1 = x.sum().item<float>();
  std::vector<float> c1 = t.sum(0).to_vector<float>(), r1 = t.t().sum(0).to_vector<float>();
#ifdef _OPENMP
  int threads = omp_get_max_threads();
  omp_set_num_threads(1);  // results must not depend on the number of threads
#endif
  EXPECT_EQ(x.sum().item<float>(), s1);
  EXPECT_EQ(t.sum(0).to_vector<float>(), c1);
  EXPECT_EQ(t.t().sum(0).to_vector<float>(), r1);
#ifdef _OPENMP
  omp_set_num_threads(threads);
#endif
  EXPECT_EQ(x.sum().item<float>(), s1);
}

// Ops made of IEEE basic operations give the CPU's bits on every device: no backend fuses a
// multiply and an add into one rounding (docs/numerics.md, the section on contraction).
TEST_P(OpsTest, IeeeOpsGiveTheCpuBits) {
  manual_seed(5, Device::cpu());
  for (DType dt : {DType::F32, DType::F64}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor x = Tensor::rand_normal({2, 3, 17, 19}, 0, 1, dt, Device::cpu());
    const Tensor on = x.to_device(dev());
    auto expect_bits = [&](const Tensor& got, const Tensor& want, const char* op) {
      const std::vector<double> g = got.to_dtype(DType::F64).to_vector<double>();
      const std::vector<double> w = want.to_dtype(DType::F64).to_vector<double>();
      ASSERT_EQ(g.size(), w.size()) << op;
      size_t differ = 0;
      for (size_t i = 0; i < g.size(); ++i) differ += std::memcmp(&g[i], &w[i], sizeof(double)) != 0;
      EXPECT_EQ(differ, 0u) << op << ": " << differ << " of " << g.size() << " elements differ from the CPU's";
    };
    expect_bits(on.affine(0.7, -0.3), x.affine(0.7, -0.3), "affine");
    expect_bits(on.upsample_bilinear2d(29, 41), x.upsample_bilinear2d(29, 41), "upsample_bilinear2d");
    expect_bits(on.avg_pool2d(3, 2), x.avg_pool2d(3, 2), "avg_pool2d");
    expect_bits(on.abs().sqrt() / (on + 3), x.abs().sqrt() / (x + 3), "sqrt, div");
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, OpsTest, ::testing::ValuesIn(test::devices()), test::device_name);

}  // namespace
}  // namespace wick
