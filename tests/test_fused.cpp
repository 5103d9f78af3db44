// The nn wing (include/wick/nn.h): values computed independently of wick, special values, strided
// views, large magnitudes and bad arguments, on every device. The 2x2x3 inputs and the rms_norm and
// layer_norm values are the cases of Candle's candle-nn/tests/ops.rs (4 decimals); the softmax
// values are exact fractions, as that file notes them.
#include <cmath>
#include <limits>
#include <tuple>

#include "test_util.h"
#include "wick/nn.h"

namespace wick {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

class FusedTest : public ::testing::TestWithParam<Device> {
 protected:
  Device dev() const { return GetParam(); }
  Tensor make(std::vector<double> v, const Shape& s, DType dt = DType::F32) const {
    return Tensor::from_vector(v, s, dev()).to_dtype(dt);
  }
  // The Candle test input: [[[3, 1, 4], [1, 5, 9]], [[2, 1, 7], [8, 2, 8]]].
  Tensor candle_input(DType dt = DType::F32) const { return make({3, 1, 4, 1, 5, 9, 2, 1, 7, 8, 2, 8}, {2, 2, 3}, dt); }
};

std::vector<double> values(const Tensor& t) { return t.to_dtype(DType::F64).to_vector<double>(); }

void expect_near(const Tensor& got, const std::vector<double>& want, double tol) {
  const std::vector<double> g = values(got);
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], tol) << "element " << i << " (" << got.dtype() << ")";
}

double tolerance(DType dt) { return dt == DType::BF16 ? 2e-2 : dt == DType::F16 ? 2e-3 : 1e-4; }

constexpr DType kFloat[] = {DType::F64, DType::F32, DType::F16, DType::BF16};

TEST_P(FusedTest, SoftmaxOfLogsNormalisesAlongEachDim) {
  // softmax(log x) = x / sum(x) along the dim.
  const std::vector<std::vector<double>> want = {
      {3. / 5, 1. / 2, 4. / 11, 1. / 9, 5. / 7, 9. / 17, 2. / 5, 1. / 2, 7. / 11, 8. / 9, 2. / 7, 8. / 17},
      {3. / 4, 1. / 6, 4. / 13, 1. / 4, 5. / 6, 9. / 13, 2. / 10, 1. / 3, 7. / 15, 8. / 10, 2. / 3, 8. / 15},
      {3. / 8, 1. / 8, 4. / 8, 1. / 15, 5. / 15, 9. / 15, 2. / 10, 1. / 10, 7. / 10, 8. / 18, 2. / 18, 8. / 18}};
  for (DType dt : kFloat) {
    const Tensor x = candle_input(dt).to_dtype(DType::F64).log().to_dtype(dt);
    for (int dim = 0; dim < 3; ++dim) {
      Tensor s = nn::softmax(x, dim);
      EXPECT_EQ(s.shape(), Shape({2, 2, 3}));
      EXPECT_EQ(s.dtype(), dt);
      const std::vector<double>& w = want[static_cast<size_t>(dim)];
      expect_near(s, w, tolerance(dt));
      std::vector<double> logs = w;
      for (double& v : logs) v = std::log(v);
      expect_near(nn::log_softmax(x, dim), logs, 4 * tolerance(dt));
    }
    expect_near(nn::softmax(x, -1), want[2], tolerance(dt));
  }
}

TEST_P(FusedTest, SoftmaxIsStableForAnyMagnitude) {
  for (DType dt : {DType::F64, DType::F32}) {
    EXPECT_EQ(values(nn::softmax(make({1234, 0}, {2}, dt), 0)), (std::vector<double>{1, 0}));
    EXPECT_EQ(values(nn::log_softmax(make({1234, 0}, {2}, dt), 0)), (std::vector<double>{0, -1234}));
    expect_near(nn::softmax(make({-1e30, -1e30}, {2}, dt), 0), {0.5, 0.5}, 0);
  }
  EXPECT_EQ(values(nn::softmax(make({60000, 0}, {2}, DType::F16), 0)), (std::vector<double>{1, 0}));
}

TEST_P(FusedTest, SoftmaxSpecialValues) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Rows: -inf among finite values (weight 0), every element -inf (NaN, as PyTorch), a NaN.
  const Tensor x = make({-kInf, 0, 0, -kInf, -kInf, -kInf, 1, nan, 2}, {3, 3});
  const std::vector<double> s = values(nn::softmax(x, -1));
  EXPECT_EQ(s[0], 0);
  EXPECT_EQ(s[1], 0.5);
  EXPECT_EQ(s[2], 0.5);
  for (int i = 3; i < 9; ++i) EXPECT_TRUE(std::isnan(s[static_cast<size_t>(i)])) << i;
  const std::vector<double> l = values(nn::log_softmax(x, -1));
  EXPECT_EQ(l[0], -kInf);
  EXPECT_NEAR(l[1], -std::log(2.0), 1e-6);
}

// A view gives its contiguous copy's result up to rounding: the GPU kernels take a dense row in
// registers and a strided slice a thread at a time, so the order of their sums differs.
void expect_close(const Tensor& got, const Tensor& want) {
  const std::vector<double> g = values(got), w = values(want);
  ASSERT_EQ(g.size(), w.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], 2e-6 * std::abs(w[i]) + 1e-6) << "element " << i;
}

TEST_P(FusedTest, StridedViewsGiveTheContiguousResult) {
  const Tensor base = Tensor::rand_normal({6, 5, 40}, 0, 3, DType::F32, dev());
  for (const Tensor& view : {base.transpose(0, 2), base.slice(2, 1, 40, 2), base.narrow(1, 1, 3),
                             base.narrow(0, 0, 1).broadcast_as({4, 5, 40})}) {
    const Tensor dense = view.contiguous();
    for (int64_t dim : {0, 1, -1}) {
      expect_close(nn::softmax(view, dim), nn::softmax(dense, dim));
      expect_close(nn::log_softmax(view, dim), nn::log_softmax(dense, dim));
    }
    const Tensor w = Tensor::rand_normal({view.dim(-1)}, 0, 1, DType::F32, dev());
    expect_close(nn::rms_norm(view, w, 1e-6), nn::rms_norm(dense, w, 1e-6));
    expect_close(nn::layer_norm(view, w, w, 1e-6), nn::layer_norm(dense, w, w, 1e-6));
  }
}

TEST_P(FusedTest, RmsNormCandleValues) {
  for (DType dt : kFloat) {
    const Tensor t = nn::rms_norm(candle_input(dt), make({1, 2, 3}, {3}, dt), 1e-5);
    EXPECT_EQ(t.dtype(), dt);
    expect_near(t, {1.019, 0.6794, 4.0762, 0.1674, 1.6744, 4.521, 0.4714, 0.4714, 4.9497, 1.206, 0.603, 3.6181},
                dt == DType::BF16 ? 5e-2 : dt == DType::F16 ? 5e-3 : 1e-4);
  }
}

TEST_P(FusedTest, LayerNormCandleValues) {
  const std::vector<double> want = {0.7673, -2.6726, 3.0071, -0.7247, 0.0,    3.4742,
                                    -0.008, -1.778,  3.991,  1.2071,  -2.8284, 1.9213};
  for (DType dt : kFloat) {
    const double tol = dt == DType::BF16 ? 5e-2 : dt == DType::F16 ? 5e-3 : 1e-4;
    const Tensor w = make({1, 2, 3}, {3}, dt), b = make({0.5, 0, -0.2}, {3}, dt);
    expect_near(nn::layer_norm(candle_input(dt), w, b, 1e-5), want, tol);
    std::vector<double> unbiased = want;
    for (size_t i = 0; i < unbiased.size(); ++i) unbiased[i] -= std::vector<double>{0.5, 0, -0.2}[i % 3];
    expect_near(nn::layer_norm(candle_input(dt), w, 1e-5), unbiased, tol);
  }
}

// Inputs of magnitude 1e4 with a spread of about 1 (and Candle's alternating 7e9): f32 results
// match an f64 computation here, where E[x^2] - E[x]^2 in f32 would lose every digit.
TEST_P(FusedTest, NormsAtLargeMagnitudes) {
  const int64_t rows = 3, d = 4096;
  std::vector<double> x(static_cast<size_t>(rows * d)), y(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<double>(static_cast<float>(1e4 + std::sin(0.37 * static_cast<double>(i))));
  const Tensor t = make(x, {rows, d}), ones = Tensor::ones({d}, DType::F32, dev());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < d; ++i) mean += x[static_cast<size_t>(r * d + i)] / static_cast<double>(d);
    for (int64_t i = 0; i < d; ++i) var += std::pow(x[static_cast<size_t>(r * d + i)] - mean, 2) / static_cast<double>(d);
    for (int64_t i = 0; i < d; ++i)
      y[static_cast<size_t>(r * d + i)] = (x[static_cast<size_t>(r * d + i)] - mean) / std::sqrt(var + 1e-5);
  }
  expect_near(nn::layer_norm(t, ones, 1e-5), y, 2e-2);

  std::vector<double> big(static_cast<size_t>(4 * 6912));
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<double>(static_cast<float>((i % 2 ? -1 : 1) * std::fabs(std::sin(0.17 * static_cast<double>(i))) * 7e9));
  const std::vector<double> r =
      values(nn::rms_norm(make(big, {4, 6912}), Tensor::ones({6912}, DType::F32, dev()), 1e-5));
  for (size_t row = 0; row < 4; ++row) {
    double squares = 0;
    for (size_t i = 0; i < 6912; ++i) squares += big[row * 6912 + i] * big[row * 6912 + i];
    const double scale = 1 / std::sqrt(squares / 6912 + 1e-5);
    for (size_t i = 0; i < 6912; ++i) ASSERT_NEAR(r[row * 6912 + i], big[row * 6912 + i] * scale, 1e-5) << row << " " << i;
  }
}

// add_rms_norm's sum is x + residual and its normed rows rms_norm of that sum, bit for bit, on the
// GPU's one-kernel path (dense rows: a warp's, a block's) and its add-then-norm path (a transposed
// residual, f64).
TEST_P(FusedTest, AddRmsNormIsAddThenRmsNormBitForBit) {
  for (DType dt : kFloat) {
    for (const Shape& shape : {Shape({3, 96}), Shape({2, 1, 4096}), Shape({5, 7})}) {
      const Tensor x = Tensor::rand_normal(shape, 0.0, 1.0, dt, dev());
      const Tensor w = Tensor::rand_normal({shape[shape.rank() - 1]}, 0.0, 1.0, dt, dev());
      const Tensor dense = Tensor::rand_normal(shape, 0.0, 1.0, dt, dev());
      const Shape flipped({shape[shape.rank() - 1], shape.numel() / shape[shape.rank() - 1]});
      const Tensor transposed = Tensor::rand_normal(flipped, 0.0, 1.0, dt, dev()).t().reshape(shape);
      for (const Tensor& residual : {dense, transposed}) {
        const nn::AddRmsNorm r = nn::add_rms_norm(x, residual, w, 1e-5);
        ASSERT_EQ(r.sum.shape(), shape);
        ASSERT_EQ(r.normed.dtype(), dt);
        const Tensor sum = x + residual;
        EXPECT_EQ(values(r.sum), values(sum)) << dt << " " << shape;
        EXPECT_EQ(values(r.normed), values(nn::rms_norm(sum, w, 1e-5))) << dt << " " << shape;
      }
    }
  }
}

// A weight of x's last two dims (m, d): row i of it norms x[..., i, :] as a call with that row
// alone norms those rows, bit for bit. Dense rows (the GPU's rows held in registers), q's and k's
// heads as a view of a wider product (its strided kernel), rows too short for packs, and a
// single row (m = 1) whose stride along m means nothing.
TEST_P(FusedTest, RmsNormWeightPerRowIsEachRowsNormBitForBit) {
  for (DType dt : kFloat) {
    for (const auto& [lead, m, d] :
         {std::tuple{Shape({2, 3}), int64_t{6}, int64_t{128}}, std::tuple{Shape({1, 1}), int64_t{36}, int64_t{128}},
          std::tuple{Shape({4}), int64_t{5}, int64_t{7}}, std::tuple{Shape({3}), int64_t{1}, int64_t{70}}}) {
      std::vector<int64_t> dims(lead.begin(), lead.begin() + lead.rank()), wide = dims;
      dims.insert(dims.end(), {m, d});
      wide.push_back((m + 2) * d);  // q and k's heads, then v's: one product's row
      const Tensor w = Tensor::rand_normal({m, d}, 1.0, 0.5, dt, dev());
      const Tensor dense = Tensor::rand_normal(Shape(dims), 0.0, 2.0, dt, dev());
      const Tensor view =
          Tensor::rand_normal(Shape(wide), 0.0, 2.0, dt, dev()).narrow(-1, 0, m * d).reshape(Shape(dims));
      for (const Tensor& x : {dense, view}) {
        const Tensor all = nn::rms_norm(x, w, 1e-6);
        ASSERT_EQ(all.shape(), x.shape());
        ASSERT_EQ(all.dtype(), dt);
        for (int64_t i = 0; i < m; ++i) {
          const Tensor rows = x.narrow(-2, i, 1);
          const Tensor one =
              nn::rms_norm(x.is_contiguous() ? rows.contiguous() : rows, w.narrow(0, i, 1).reshape({d}), 1e-6);
          ASSERT_EQ(values(all.narrow(-2, i, 1)), values(one)) << dt << " " << x.shape() << " row " << i;
        }
      }
    }
  }
  const Tensor x = Tensor::ones({2, 3, 4}, DType::F32, dev());
  WICK_EXPECT_ERROR(nn::rms_norm(x, Tensor::ones({2, 4}, DType::F32, dev()), 1e-5), ShapeError, "rms_norm: ", "[2, 4]",
                    "[2, 3, 4]");
  WICK_EXPECT_ERROR(nn::rms_norm(x, Tensor::ones({3, 4}, DType::BF16, dev()), 1e-5), DTypeError, "rms_norm: ", "bf16");
  WICK_EXPECT_ERROR(nn::rms_norm(Tensor::ones({4}, DType::F32, dev()), Tensor::ones({1, 4}, DType::F32, dev()), 1e-5),
                    ShapeError, "rms_norm: ", "[1, 4]");
}

// silu(gate) * up against values computed here in double, for gate and up apart and as the two
// halves of one stacked row; f32 gives exactly gate.silu() * up.
TEST_P(FusedTest, SiluMulValues) {
  const std::vector<double> g = {-6, -1.5, -0.25, 0, 0.5, 1, 2.75, 9}, u = {1, -2, 3, 0.5, -4, 0.25, 7, -1};
  std::vector<double> want(g.size());
  for (size_t i = 0; i < g.size(); ++i) want[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
  for (DType dt : kFloat) {
    expect_near(nn::silu_mul(make(g, {2, 4}, dt), make(u, {2, 4}, dt)), want, 4 * tolerance(dt));
    std::vector<double> both;
    for (size_t row = 0; row < 2; ++row) {
      both.insert(both.end(), g.begin() + 4 * row, g.begin() + 4 * row + 4);
      both.insert(both.end(), u.begin() + 4 * row, u.begin() + 4 * row + 4);
    }
    const Tensor stacked = make(both, {2, 8}, dt);
    expect_near(nn::silu_mul(stacked.narrow(1, 0, 4), stacked.narrow(1, 4, 4)), want, 4 * tolerance(dt));
  }
  const Tensor gate = Tensor::rand_normal({3, 1000}, 0.0, 2.0, DType::F32, dev());
  const Tensor up = Tensor::rand_normal({1000, 3}, 0.0, 1.0, DType::F32, dev()).t();
  EXPECT_EQ(values(nn::silu_mul(gate, up)), values(gate.silu() * up));
}

TEST_P(FusedTest, EmptyTensors) {
  EXPECT_EQ(nn::softmax(Tensor::zeros({0, 3}, DType::F32, dev()), -1).shape(), Shape({0, 3}));
  EXPECT_EQ(nn::log_softmax(Tensor::zeros({3, 0}, DType::F32, dev()), -1).shape(), Shape({3, 0}));
  EXPECT_EQ(nn::rms_norm(Tensor::zeros({0, 4}, DType::F32, dev()), Tensor::ones({4}, DType::F32, dev()), 1e-5).shape(),
            Shape({0, 4}));
  EXPECT_EQ(
      nn::layer_norm(Tensor::zeros({2, 0}, DType::F32, dev()), Tensor::ones({0}, DType::F32, dev()), 1e-5).shape(),
      Shape({2, 0}));
  const Tensor none = Tensor::zeros({0, 4}, DType::F32, dev());
  const nn::AddRmsNorm r = nn::add_rms_norm(none, none, Tensor::ones({4}, DType::F32, dev()), 1e-5);
  EXPECT_EQ(r.sum.shape(), Shape({0, 4}));
  EXPECT_EQ(r.normed.shape(), Shape({0, 4}));
  EXPECT_EQ(nn::silu_mul(none, none).shape(), Shape({0, 4}));
}

TEST_P(FusedTest, BadArguments) {
  const Tensor x = Tensor::ones({2, 3}, DType::F32, dev()), w = Tensor::ones({3}, DType::F32, dev());
  WICK_EXPECT_ERROR(nn::softmax(Tensor::ones({2, 3}, DType::I32, dev()), -1), DTypeError, "softmax: ", "i32", "[2, 3]");
  WICK_EXPECT_ERROR(nn::log_softmax(Tensor::ones({2}, DType::F8E4M3, dev()), 0), DTypeError, "log_softmax: ", "f8e4m3");
  WICK_EXPECT_ERROR(nn::softmax(x, 2), ShapeError, "softmax: ", "[2, 3]");
  WICK_EXPECT_ERROR(nn::softmax(Tensor(), 0), Error, "softmax: ");
  WICK_EXPECT_ERROR(nn::softmax(Tensor::scalar(1.0, DType::F32, dev()), 0), ShapeError, "softmax: ");
  WICK_EXPECT_ERROR(nn::rms_norm(x, Tensor::ones({4}, DType::F32, dev()), 1e-5), ShapeError, "rms_norm: ", "weight",
                    "[4]", "[2, 3]");
  WICK_EXPECT_ERROR(nn::rms_norm(x, Tensor::ones({3}, DType::F16, dev()), 1e-5), DTypeError, "rms_norm: ", "f16", "f32");
  WICK_EXPECT_ERROR(nn::rms_norm(x, Tensor::ones({1, 3}, DType::F32, dev()), 1e-5), ShapeError, "rms_norm: ", "[1, 3]");
  WICK_EXPECT_ERROR(nn::rms_norm(x, w, -1), ShapeError, "rms_norm: ", "eps", "-1");
  WICK_EXPECT_ERROR(nn::rms_norm(x, w, std::nan("")), ShapeError, "rms_norm: ", "eps");
  WICK_EXPECT_ERROR(nn::layer_norm(x, w, Tensor::ones({2}, DType::F32, dev()), 1e-5), ShapeError, "layer_norm: ", "bias",
                    "[2]");
  WICK_EXPECT_ERROR(nn::layer_norm(x, Tensor(), 1e-5), Error, "layer_norm: ");
  WICK_EXPECT_ERROR(nn::rms_norm(Tensor::scalar(1.0, DType::F32, dev()), w, 1e-5), ShapeError, "rms_norm: ");
  WICK_EXPECT_ERROR(nn::add_rms_norm(x, Tensor::ones({3, 2}, DType::F32, dev()), w, 1e-5), ShapeError,
                    "add_rms_norm: ", "residual", "[3, 2]", "[2, 3]");
  WICK_EXPECT_ERROR(nn::add_rms_norm(x, Tensor::ones({3}, DType::F32, dev()), w, 1e-5), ShapeError,
                    "add_rms_norm: ", "residual", "[3]");
  WICK_EXPECT_ERROR(nn::add_rms_norm(x, Tensor::ones({2, 3}, DType::BF16, dev()), w, 1e-5), DTypeError,
                    "add_rms_norm: ", "bf16", "f32");
  WICK_EXPECT_ERROR(nn::add_rms_norm(x, x, Tensor::ones({2}, DType::F32, dev()), 1e-5), ShapeError,
                    "add_rms_norm: ", "weight", "[2]");
  WICK_EXPECT_ERROR(nn::add_rms_norm(x, x, w, -1), ShapeError, "add_rms_norm: ", "eps");
  WICK_EXPECT_ERROR(nn::add_rms_norm(x, Tensor(), w, 1e-5), Error, "add_rms_norm: ");
  const Tensor ints = Tensor::ones({2, 3}, DType::I32, dev());
  WICK_EXPECT_ERROR(nn::add_rms_norm(ints, ints, w, 1e-5), DTypeError, "add_rms_norm: ", "i32");
  WICK_EXPECT_ERROR(nn::silu_mul(x, Tensor::ones({2, 1}, DType::F32, dev())), ShapeError, "silu_mul: ", "up", "[2, 1]");
  WICK_EXPECT_ERROR(nn::silu_mul(x, Tensor::ones({2, 3}, DType::F16, dev())), DTypeError, "silu_mul: ", "f16");
  WICK_EXPECT_ERROR(nn::silu_mul(ints, ints), DTypeError, "silu_mul: ", "i32");
  WICK_EXPECT_ERROR(nn::silu_mul(x, Tensor()), Error, "silu_mul: ");
  if (!dev().is_cpu()) {
    WICK_EXPECT_ERROR(nn::rms_norm(x, Tensor::ones({3}), 1e-5), DeviceError, "rms_norm: ");
    WICK_EXPECT_ERROR(nn::add_rms_norm(x, Tensor::ones({2, 3}), w, 1e-5), DeviceError, "add_rms_norm: ");
    WICK_EXPECT_ERROR(nn::silu_mul(x, Tensor::ones({2, 3})), DeviceError, "silu_mul: ");
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, FusedTest, ::testing::ValuesIn(test::devices()), test::device_name);

}  // namespace
}  // namespace wick
