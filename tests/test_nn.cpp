// matmul, convolutions, pooling and upsampling: hand-computed values, properties (groups, the
// transposed convolution as the adjoint of the convolution) and bad inputs, on every device.
#include <cmath>

#include "test_util.h"

namespace wick {
namespace {

class NnTest : public ::testing::TestWithParam<Device> {
 protected:
  Device dev() const { return GetParam(); }
  Tensor f32(std::vector<float> v, const Shape& s) const { return Tensor::from_vector(v, s, dev()); }
  Tensor randn(const Shape& s, DType dt = DType::F64) const { return Tensor::rand_normal(s, 0, 1, dt, dev()); }
};

void expect_near(const Tensor& got, const Tensor& want, double tol) {
  ASSERT_EQ(got.shape(), want.shape());
  std::vector<double> g = got.to_dtype(DType::F64).to_vector<double>(),
                      w = want.to_dtype(DType::F64).to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], tol) << "element " << i;
}

TEST_P(NnTest, MatmulValuesAndShapes) {
  Tensor a = f32({1, 2, 3, 4, 5, 6}, {2, 3}), b = f32({7, 8, 9, 10, 11, 12}, {3, 2});
  EXPECT_EQ(a.matmul(b).to_vector<float>(), (std::vector<float>{58, 64, 139, 154}));
  EXPECT_EQ(b.t().matmul(a.t()).to_vector<float>(), (std::vector<float>{58, 139, 64, 154}));  // (ab)^T
  Tensor v = f32({1, 0, -1}, {3});
  EXPECT_EQ(a.mv(v).to_vector<float>(), (std::vector<float>{-2, -2}));
  EXPECT_EQ(v.dot(v).shape(), Shape{});
  EXPECT_EQ(v.dot(v).item<float>(), 2.f);
  EXPECT_EQ(v.matmul(b).to_vector<float>(), (std::vector<float>{-4, -4}));
  // Batch dims broadcast: (2, 1, 2, 3) x (4, 3, 2) -> (2, 4, 2, 2).
  Tensor batched = randn({2, 1, 2, 3}).matmul(randn({4, 3, 2}));
  EXPECT_EQ(batched.shape(), Shape({2, 4, 2, 2}));
  Tensor x = randn({3, 5, 4}), y = randn({4, 6});
  expect_near(x.matmul(y).get(1), x.get(1).matmul(y), 1e-12);
  // A stride-2 operand is copied internally, never refused.
  Tensor wide = randn({5, 8}), rhs = randn({4, 3});
  expect_near(wide.slice(1, 0, 8, 2).matmul(rhs), wide.slice(1, 0, 8, 2).contiguous().matmul(rhs), 1e-12);
  EXPECT_EQ(Tensor::ones({2, 0}, DType::F32, dev()).matmul(Tensor::ones({0, 3}, DType::F32, dev())).to_vector<float>(),
            std::vector<float>(6, 0));
}

// Operands used in place: a transposed view, and a batch broadcast with stride 0 (no copy).
TEST_P(NnTest, MatmulTransposedAndBroadcastBatch) {
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    Tensor a = f32({1, 2, 3, 4, 5, 6, 1, 0, 0, 0, 1, 0}, {2, 2, 3}).to_dtype(dt);
    // b = [[1, 4], [2, 5], [3, 6]], stored transposed, the same matrix for both batch entries.
    Tensor b = f32({1, 2, 3, 4, 5, 6}, {2, 3}).to_dtype(dt).t().unsqueeze(0).expand({2, 3, 2});
    ASSERT_EQ(b.strides(), Strides({0, 1, 3}));
    const std::vector<double> want = {14, 32, 32, 77, 1, 4, 2, 5};
    EXPECT_EQ(a.matmul(b).to_dtype(DType::F64).to_vector<double>(), want) << dtype_name(dt);
    EXPECT_EQ(a.matmul(b.get(0)).to_dtype(DType::F64).to_vector<double>(), want) << dtype_name(dt);
    // (a b)^T = b^T a^T: a stride-0 broadcast left operand times a batch of transposed views.
    Tensor bt = b.transpose(1, 2), at = a.transpose(1, 2);
    EXPECT_EQ(bt.matmul(at).transpose(1, 2).contiguous().to_dtype(DType::F64).to_vector<double>(), want)
        << dtype_name(dt);
  }
  // Several broadcast batch dims, both operands transposed: (2, 1, 3, 5, 4) x (1, 4, 1, 4, 6).
  Tensor x = randn({2, 1, 3, 4, 5}).transpose(-2, -1), y = randn({1, 4, 1, 6, 4}).transpose(-2, -1);
  Tensor got = x.matmul(y);
  ASSERT_EQ(got.shape(), Shape({2, 4, 3, 5, 6}));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t l = 0; l < 3; ++l)
        expect_near(got.get(i).get(j).get(l),
                    x.get(i).get(0).get(l).contiguous().matmul(y.get(0).get(j).get(0).contiguous()), 1e-12);
  // An empty batch dim and n = 0 give correctly shaped empty results.
  EXPECT_EQ(randn({2, 0, 5, 7}).matmul(randn({1, 1, 7, 4})).shape(), Shape({2, 0, 5, 4}));
  EXPECT_EQ(randn({3, 5, 7}).matmul(randn({7, 0})).shape(), Shape({3, 5, 0}));
}

// A linear layer's product, x (b, t, k) times W^T for W (n, k): a few rows read each weight row
// once, more rows go to the GEMM; the batch and row dims of x merge into one product where they
// can, and give the same values where they cannot (a transposed x).
TEST_P(NnTest, MatmulOfALinearLayer) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    const Tensor w = randn({70, 300}).to_dtype(dt);
    for (const Shape& s : {Shape({1, 1, 300}), Shape({2, 3, 300}), Shape({4, 2, 300}), Shape({3, 5, 300})}) {
      const Tensor x = randn(s).to_dtype(dt);
      const Tensor want = x.to_dtype(DType::F64).matmul(w.to_dtype(DType::F64).t());
      // Sums of 300 products of N(0, 1) values (up to about 60) in f32, rounded to dt.
      const double tol = dt == DType::F32 ? 1e-3 : dt == DType::F16 ? 0.05 : 0.5;
      expect_near(x.matmul(w.t()), want, tol);
      expect_near(x.transpose(0, 1).contiguous().transpose(0, 1).matmul(w.t()), want, tol);
      EXPECT_EQ(x.matmul(w.get(0)).shape(), Shape({s[0], s[1]}));
    }
  }
}

// A weight of 1203 rows, k past whole passes of the GPU few-row kernel's groups of lanes, seen
// through a view whose rows are further apart than k, times 1 to 8 rows of x, also apart (on
// CUDA these half products are cuBLAS's, on ROCm wick's own kernels').
TEST_P(NnTest, MatmulOfAWideWeightView) {
  for (DType dt : {DType::F16, DType::BF16}) {
    const Tensor w = randn({1203, 2072}).to_dtype(dt).narrow(1, 8, 2056);
    for (int64_t rows : {1, 3, 8}) {
      const Tensor x = randn({rows, 2064}).to_dtype(dt).narrow(1, 0, 2056);
      const Tensor want = x.to_dtype(DType::F64).matmul(w.to_dtype(DType::F64).t());
      // Sums of 2056 products of N(0, 1) values (up to about 200) in f32, rounded to dt.
      expect_near(x.matmul(w.t()), want, dt == DType::F16 ? 0.15 : 1.0);
    }
  }
}

TEST_P(NnTest, HalfMatmulAccumulatesInF32) {
  // 4096 ones: an f16 accumulator would stop at 2048; f32 accumulation gives the exact 4096.
  Tensor a = Tensor::ones({1, 4096}, DType::F16, dev()), b = Tensor::ones({4096, 1}, DType::F16, dev());
  EXPECT_EQ(static_cast<float>(a.matmul(b).item<f16>()), 4096.f);
  EXPECT_EQ(static_cast<float>(a.to_dtype(DType::BF16).matmul(b.to_dtype(DType::BF16)).item<bf16>()), 4096.f);
}

TEST_P(NnTest, Conv1dValues) {
  Tensor x = f32({1, 2, 3, 4, 5}, {1, 1, 5}), k = f32({1, 0, -1}, {1, 1, 3});
  EXPECT_EQ(x.conv1d(k).to_vector<float>(), (std::vector<float>{-2, -2, -2}));
  EXPECT_EQ(x.conv1d(k, {.padding = 1}).to_vector<float>(), (std::vector<float>{-2, -2, -2, -2, 4}));
  EXPECT_EQ(x.conv1d(k, {.padding = 1, .stride = 2}).to_vector<float>(), (std::vector<float>{-2, -2, 4}));
  EXPECT_EQ(x.conv1d(k, {.dilation = 2}).to_vector<float>(), (std::vector<float>{-4}));
  Tensor t = f32({1, 2}, {1, 1, 2}).conv_transpose1d(f32({1, 1, 1}, {1, 1, 3}), {.stride = 2});
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 1, 3, 2, 2}));
  Tensor tp = f32({1, 2}, {1, 1, 2}).conv_transpose1d(f32({1, 1, 1}, {1, 1, 3}), {.stride = 2, .output_padding = 1});
  EXPECT_EQ(tp.shape(), Shape({1, 1, 6}));
}

// Grouped half-precision convolutions with outputs of a few elements: some vendor-library
// engines write these at misaligned addresses. Small integers are exact in bf16 and f32.
TEST_P(NnTest, SmallGroupedHalfConvolutions) {
  for (DType dt : {DType::BF16, DType::F16}) {
    std::vector<float> xv(32), kv(4);
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
    for (size_t i = 0; i < kv.size(); ++i) kv[i] = static_cast<float>(static_cast<int>(i % 3) - 1);
    const Tensor x = f32(xv, {2, 4, 4}), k = f32(kv, {1, 2, 2}).broadcast_as({4, 2, 2});
    const Conv1dOptions o{.stride = 2, .dilation = 2, .groups = 2};
    const Tensor want = x.to_device(Device::cpu()).conv1d(k.to_device(Device::cpu()), o);
    EXPECT_EQ(x.to_dtype(dt).conv1d(k.to_dtype(dt), o).to_dtype(DType::F32).to_vector<float>(),
              want.to_vector<float>())
        << dt;
  }
}

TEST_P(NnTest, Conv2dProperties) {
  // A 1x1 convolution is a matmul over channels.
  Tensor x = randn({2, 3, 4, 5}), w = randn({6, 3, 1, 1});
  Tensor as_matmul = w.reshape({6, 3}).matmul(x.permute({1, 0, 2, 3}).reshape({3, 40})).reshape({6, 2, 4, 5});
  expect_near(x.conv2d(w), as_matmul.permute({1, 0, 2, 3}), 1e-12);
  // Groups are independent convolutions of the channel groups.
  Tensor xg = randn({2, 4, 6, 6}), wg = randn({6, 2, 3, 3});
  Tensor grouped = xg.conv2d(wg, {.padding = 1, .groups = 2});
  Tensor first = xg.narrow(1, 0, 2).conv2d(wg.narrow(0, 0, 3), {.padding = 1});
  Tensor second = xg.narrow(1, 2, 2).conv2d(wg.narrow(0, 3, 3), {.padding = 1});
  expect_near(grouped, cat({first, second}, 1), 1e-12);
  // A non-contiguous kernel gives the same result as its contiguous copy.
  Tensor wt = randn({6, 4, 3, 3}).transpose(2, 3);
  expect_near(xg.conv2d(wt), xg.conv2d(wt.contiguous()), 1e-12);
}

// <conv(x, w), y> = <x, conv_transpose(y, w)> for every stride, padding, dilation and groups.
TEST_P(NnTest, TransposedConvolutionIsTheAdjoint) {
  struct P {
    Pair stride, padding, dilation;
    int64_t groups;
  };
  for (const P& p : {P{1, 0, 1, 1}, P{2, 1, 1, 1}, P{{2, 3}, {1, 0}, {2, 1}, 2}, P{3, 2, 2, 4}}) {
    const int64_t h = 9, w = 10, kh = 3, kw = 2;
    Tensor x = randn({2, 4, h, w}), k = randn({8, 4 / p.groups, kh, kw});
    Tensor y = x.conv2d(k, {.padding = p.padding, .stride = p.stride, .dilation = p.dilation, .groups = p.groups});
    Tensor r = randn(y.shape());
    // output_padding brings the transposed output back to x's size.
    auto extra = [&](int64_t in, int64_t out, int64_t s, int64_t pad, int64_t d, int64_t ks) {
      return in - ((out - 1) * s - 2 * pad + d * (ks - 1) + 1);
    };
    Pair op{extra(h, y.dim(2), p.stride.h, p.padding.h, p.dilation.h, kh),
            extra(w, y.dim(3), p.stride.w, p.padding.w, p.dilation.w, kw)};
    Tensor xt = r.conv_transpose2d(
        k,
        {.padding = p.padding, .stride = p.stride, .dilation = p.dilation, .output_padding = op, .groups = p.groups});
    ASSERT_EQ(xt.shape(), x.shape());
    EXPECT_NEAR((y * r).sum().item<double>(), (x * xt).sum().item<double>(), 1e-9);
  }
}

TEST_P(NnTest, Pooling) {
  Tensor x = f32({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, {1, 1, 4, 4});
  EXPECT_EQ(x.avg_pool2d(2).to_vector<float>(), (std::vector<float>{3.5, 5.5, 11.5, 13.5}));
  EXPECT_EQ(x.max_pool2d(2).to_vector<float>(), (std::vector<float>{6, 8, 14, 16}));
  EXPECT_EQ(x.max_pool2d(3, 1).to_vector<float>(), (std::vector<float>{11, 12, 15, 16}));
  EXPECT_EQ(x.max_pool2d({1, 4}).to_vector<float>(), (std::vector<float>{4, 8, 12, 16}));
  EXPECT_EQ(x.to_dtype(DType::I32).max_pool2d(2).to_vector<int32_t>(), (std::vector<int32_t>{6, 8, 14, 16}));
  EXPECT_EQ(x.avg_pool2d(3, 2).shape(), Shape({1, 1, 1, 1}));  // floor((4 - 3) / 2) + 1
  Tensor n = f32({1, NAN, 3, 4}, {1, 1, 2, 2});
  EXPECT_TRUE(std::isnan(n.max_pool2d(2).item<float>()));
}

TEST_P(NnTest, Upsampling) {
  EXPECT_EQ(f32({1, 2, 3}, {1, 1, 3}).upsample_nearest1d(7).to_vector<float>(),
            (std::vector<float>{1, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(f32({1, 2, 3, 4}, {1, 1, 2, 2}).upsample_nearest2d(3, 4).to_vector<float>(),
            (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4}));
  Tensor row = f32({0, 3}, {1, 1, 1, 2});
  EXPECT_EQ(row.upsample_bilinear2d(1, 4, true).to_vector<float>(), (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ(row.upsample_bilinear2d(1, 4, false).to_vector<float>(), (std::vector<float>{0, 0.75, 2.25, 3}));
  // With a scale factor its own step is used (here 1 / 2.5), not in / out.
  Tensor scaled = row.upsample_bilinear2d_scale(1, 2.5);
  EXPECT_EQ(scaled.shape(), Shape({1, 1, 1, 5}));
  std::vector<float> s = scaled.to_vector<float>();
  EXPECT_FLOAT_EQ(s[1], 3 * (1.5f / 2.5f - 0.5f));
  // With align_corners the scale factors only set the output size (as PyTorch): the source index
  // is dst (in - 1) / (out - 1), corners on corners.
  Tensor aligned = row.upsample_bilinear2d_scale(1, 2.5, true);
  EXPECT_EQ(aligned.shape(), Shape({1, 1, 1, 5}));
  EXPECT_EQ(aligned.to_vector<float>(), (std::vector<float>{0, 0.75, 1.5, 2.25, 3}));
  Tensor col = f32({0, 2, 4}, {1, 1, 3, 1});
  EXPECT_EQ(col.upsample_bilinear2d_scale(1.5, 3, true).to_vector<float>(),
            col.upsample_bilinear2d(4, 3, true).to_vector<float>());
}

TEST_P(NnTest, BadInputs) {
  Tensor m = Tensor::ones({2, 3}, DType::F32, dev());
  WICK_EXPECT_ERROR(m.matmul(m), ShapeError, "matmul", "inner dims", "[2, 3]", "f32", dev().to_string());
  WICK_EXPECT_ERROR(Tensor::scalar(1, DType::F32, dev()).matmul(m), ShapeError, "matmul", "rank");
  WICK_EXPECT_ERROR(m.to_dtype(DType::I32).matmul(m.to_dtype(DType::I32).t()), DTypeError, "matmul", "i32");
  WICK_EXPECT_ERROR(Tensor::ones({2, 2, 3}, DType::F32, dev()).matmul(Tensor::ones({3, 3, 2}, DType::F32, dev())),
                    ShapeError, "matmul", "batch");
  WICK_EXPECT_ERROR(m.dot(m), ShapeError, "dot", "rank 1");

  Tensor x = Tensor::ones({1, 4, 5, 5}, DType::F32, dev());
  WICK_EXPECT_ERROR(x.conv2d(Tensor::ones({2, 3, 3, 3}, DType::F32, dev())), ShapeError, "conv2d", "channels",
                    "[1, 4, 5, 5]");
  WICK_EXPECT_ERROR(x.conv2d(Tensor::ones({2, 4, 3}, DType::F32, dev())), ShapeError, "conv2d", "rank 4");
  WICK_EXPECT_ERROR(x.conv2d(Tensor::ones({2, 4, 3, 3}, DType::F32, dev()), {.groups = 3}), ShapeError, "conv2d",
                    "groups 3");
  WICK_EXPECT_ERROR(x.conv2d(Tensor::ones({3, 2, 3, 3}, DType::F32, dev()), {.groups = 2}), ShapeError, "conv2d",
                    "output channels");
  WICK_EXPECT_ERROR(x.conv2d(Tensor::ones({2, 4, 7, 3}, DType::F32, dev())), ShapeError, "conv2d", "larger than",
                    "padded input");
  WICK_EXPECT_ERROR(x.conv2d(Tensor::ones({2, 4, 3, 3}, DType::F32, dev()), {.stride = 0}), ShapeError, "conv2d",
                    "stride");
  WICK_EXPECT_ERROR(x.conv2d(Tensor::ones({2, 4, 3, 3}, DType::F32, dev()), {.output_padding = 1}), ShapeError,
                    "conv2d", "output_padding");
  WICK_EXPECT_ERROR(
      x.conv_transpose2d(Tensor::ones({4, 2, 3, 3}, DType::F32, dev()), {.stride = 2, .output_padding = 2}), ShapeError,
      "conv_transpose2d", "output_padding");
  WICK_EXPECT_ERROR(x.conv_transpose2d(Tensor::ones({3, 2, 3, 3}, DType::F32, dev())), ShapeError, "conv_transpose2d",
                    "input channels");
  WICK_EXPECT_ERROR(x.conv2d(Tensor::ones({2, 4, 3, 3}, DType::F16, dev())), DTypeError, "conv2d", "f16");
  WICK_EXPECT_ERROR(Tensor::ones({1, 1, 5}, DType::I64, dev()).conv1d(Tensor::ones({1, 1, 2}, DType::I64, dev())),
                    DTypeError, "conv1d", "i64");

  WICK_EXPECT_ERROR(x.max_pool2d(6), ShapeError, "max_pool2d", "larger than");
  WICK_EXPECT_ERROR(x.avg_pool2d(2, 0), ShapeError, "avg_pool2d", "stride");
  WICK_EXPECT_ERROR(x.to_dtype(DType::U8).avg_pool2d(2), DTypeError, "avg_pool2d", "u8");
  WICK_EXPECT_ERROR(Tensor::ones({4, 4}, DType::F32, dev()).max_pool2d(2), ShapeError, "max_pool2d", "rank 4");
  WICK_EXPECT_ERROR(x.upsample_nearest2d(0, 3), ShapeError, "upsample_nearest2d", "output size");
  WICK_EXPECT_ERROR(x.upsample_nearest1d(3), ShapeError, "upsample_nearest1d", "rank 3");
  WICK_EXPECT_ERROR(x.upsample_bilinear2d_scale(0, 2), ShapeError, "upsample_bilinear2d", "scale");
}

TEST_P(NnTest, BadVectorProducts) {
  Tensor m = Tensor::ones({2, 3}, DType::F32, dev()), v3 = Tensor::ones({3}, DType::F32, dev()),
         v4 = Tensor::ones({4}, DType::F32, dev());
  WICK_EXPECT_ERROR(m.mv(m), ShapeError, "mv: ", "matrix and a vector", "[2, 3]");
  WICK_EXPECT_ERROR(v3.mv(v3), ShapeError, "mv: ", "matrix and a vector", "[3]");
  WICK_EXPECT_ERROR(m.mv(v4), ShapeError, "mv: ", "inner dims", "[2, 3]", "[4]");
  WICK_EXPECT_ERROR(v3.dot(v4), ShapeError, "dot: ", "inner dims", "[3]", "[4]");
  WICK_EXPECT_ERROR(v3.dot(v3.to_dtype(DType::F64)), DTypeError, "dot: ", "f32", "f64");
  WICK_EXPECT_ERROR(m.to_dtype(DType::I32).mv(v3.to_dtype(DType::I32)), DTypeError, "mv: ", "i32");
}

// Every convolution names itself, the input and the kernel in its errors.
TEST_P(NnTest, BadConvolutionInputs) {
  auto ones = [&](const Shape& s) { return Tensor::ones(s, DType::F32, dev()); };
  Tensor x1 = ones({1, 4, 5}), x2 = ones({1, 4, 5, 5});
  Tensor k1 = ones({2, 4, 3}), k2 = ones({2, 4, 3, 3}), kt1 = ones({4, 2, 3}), kt2 = ones({4, 2, 3, 3});

  // The input's rank, with a kernel of the right rank.
  WICK_EXPECT_ERROR(ones({4, 5}).conv1d(k1), ShapeError, "conv1d: ", "input must have rank 3", "[4, 5]", "[2, 4, 3]");
  WICK_EXPECT_ERROR(x2.conv1d(k1), ShapeError, "conv1d: ", "input must have rank 3", "[1, 4, 5, 5]");
  WICK_EXPECT_ERROR(x1.conv2d(k2), ShapeError, "conv2d: ", "input must have rank 4", "[1, 4, 5]", "[2, 4, 3, 3]");
  WICK_EXPECT_ERROR(ones({4, 5}).conv_transpose1d(kt1), ShapeError, "conv_transpose1d: ", "input must have rank 3",
                    "[4, 5]", "[4, 2, 3]");
  WICK_EXPECT_ERROR(ones({1, 1, 4, 5, 5}).conv_transpose2d(kt2), ShapeError,
                    "conv_transpose2d: ", "input must have rank 4", "[1, 1, 4, 5, 5]", "[4, 2, 3, 3]");
  WICK_EXPECT_ERROR(x1.conv_transpose1d(ones({4, 2})), ShapeError, "conv_transpose1d: ", "kernel must have rank 3",
                    "[4, 2]", "[1, 4, 5]");

  // Channels that do not match the kernel, and groups that do not divide them.
  WICK_EXPECT_ERROR(x1.conv1d(ones({2, 3, 3})), ShapeError, "conv1d: ", "channels per group", "[1, 4, 5]", "[2, 3, 3]");
  WICK_EXPECT_ERROR(x1.conv_transpose1d(ones({3, 2, 3})), ShapeError, "conv_transpose1d: ", "input channels",
                    "[1, 4, 5]", "[3, 2, 3]");
  WICK_EXPECT_ERROR(x2.conv_transpose2d(ones({2, 2, 3, 3})), ShapeError, "conv_transpose2d: ", "input channels",
                    "[1, 4, 5, 5]", "[2, 2, 3, 3]");
  WICK_EXPECT_ERROR(x1.conv1d(ones({3, 4, 3}), {.groups = 3}), ShapeError, "conv1d: ", "groups 3 do not divide",
                    "[1, 4, 5]", "[3, 4, 3]");
  WICK_EXPECT_ERROR(x1.conv1d(ones({3, 2, 3}), {.groups = 2}), ShapeError, "conv1d: ", "output channels", "[3, 2, 3]");
  WICK_EXPECT_ERROR(x1.conv_transpose1d(kt1, {.groups = 3}), ShapeError, "conv_transpose1d: ", "groups 3 do not divide",
                    "[1, 4, 5]", "[4, 2, 3]");
  WICK_EXPECT_ERROR(x2.conv_transpose2d(kt2, {.groups = 3}), ShapeError, "conv_transpose2d: ", "groups 3 do not divide",
                    "[1, 4, 5, 5]", "[4, 2, 3, 3]");
  WICK_EXPECT_ERROR(x1.conv1d(k1, {.groups = 0}), ShapeError, "conv1d: ", "groups must be at least 1", "[1, 4, 5]",
                    "[2, 4, 3]");

  // Stride and dilation of zero, negative padding, on either axis.
  WICK_EXPECT_ERROR(x1.conv1d(k1, {.stride = 0}), ShapeError, "conv1d: ", "stride must be at least 1, got 0",
                    "[1, 4, 5]", "[2, 4, 3]");
  WICK_EXPECT_ERROR(x1.conv_transpose1d(kt1, {.stride = 0}), ShapeError, "conv_transpose1d: ", "stride", "got 0",
                    "[1, 4, 5]", "[4, 2, 3]");
  WICK_EXPECT_ERROR(x2.conv_transpose2d(kt2, {.stride = {1, 0}}), ShapeError, "conv_transpose2d: ", "stride", "got 0",
                    "[1, 4, 5, 5]", "[4, 2, 3, 3]");
  WICK_EXPECT_ERROR(x1.conv1d(k1, {.dilation = 0}), ShapeError, "conv1d: ", "dilation must be at least 1, got 0",
                    "[1, 4, 5]", "[2, 4, 3]");
  WICK_EXPECT_ERROR(x2.conv2d(k2, {.dilation = {1, 0}}), ShapeError, "conv2d: ", "dilation", "got 0", "[1, 4, 5, 5]",
                    "[2, 4, 3, 3]");
  WICK_EXPECT_ERROR(x1.conv_transpose1d(kt1, {.dilation = 0}), ShapeError, "conv_transpose1d: ", "dilation", "got 0");
  WICK_EXPECT_ERROR(x2.conv_transpose2d(kt2, {.dilation = {0, 1}}), ShapeError, "conv_transpose2d: ", "dilation",
                    "got 0");
  WICK_EXPECT_ERROR(x1.conv1d(k1, {.padding = -1}), ShapeError, "conv1d: ", "padding must be at least 0, got -1",
                    "[1, 4, 5]", "[2, 4, 3]");
  WICK_EXPECT_ERROR(x2.conv2d(k2, {.padding = {0, -2}}), ShapeError, "conv2d: ", "padding", "got -2");
  WICK_EXPECT_ERROR(x1.conv_transpose1d(kt1, {.padding = -1}), ShapeError, "conv_transpose1d: ", "padding", "got -1",
                    "[1, 4, 5]", "[4, 2, 3]");
  WICK_EXPECT_ERROR(x2.conv_transpose2d(kt2, {.padding = {-1, 0}}), ShapeError, "conv_transpose2d: ", "padding",
                    "got -1");
  WICK_EXPECT_ERROR(x1.conv1d(k1, {.output_padding = 1}), ShapeError, "conv1d: ", "output_padding", "[1, 4, 5]",
                    "[2, 4, 3]");

  // A kernel (dilated) larger than the padded input; a transposed padding that leaves no output.
  WICK_EXPECT_ERROR(x1.conv1d(ones({2, 4, 6})), ShapeError, "conv1d: ", "larger than the padded input", "[1, 4, 5]",
                    "[2, 4, 6]");
  WICK_EXPECT_ERROR(x1.conv1d(k1, {.dilation = 3}), ShapeError, "conv1d: ", "dilation 3", "larger than");
  EXPECT_EQ(x1.conv1d(ones({2, 4, 6}), {.padding = 1}).shape(), Shape({1, 2, 2}));
  WICK_EXPECT_ERROR(ones({1, 1, 2}).conv_transpose1d(ones({1, 1, 1}), {.padding = 1}), ShapeError,
                    "conv_transpose1d: ", "padding 1 leaves no output", "[1, 1, 2]", "[1, 1, 1]");
  WICK_EXPECT_ERROR(ones({1, 1, 3, 2}).conv_transpose2d(ones({1, 1, 1, 1}), {.padding = {0, 1}}), ShapeError,
                    "conv_transpose2d: ", "padding 1 leaves no output", "[1, 1, 3, 2]", "[1, 1, 1, 1]");
  EXPECT_EQ(ones({1, 1, 3}).conv_transpose1d(ones({1, 1, 1}), {.padding = 1}).shape(), Shape({1, 1, 1}));
  WICK_EXPECT_ERROR(x2.conv_transpose2d(kt2, {.stride = {2, 1}, .output_padding = {1, 1}}), ShapeError,
                    "conv_transpose2d: ", "output_padding 1 must be smaller than the stride 1", "[1, 4, 5, 5]",
                    "[4, 2, 3, 3]");
}

TEST_P(NnTest, BadPoolingInputs) {
  Tensor x = Tensor::ones({1, 4, 5, 6}, DType::F32, dev());
  WICK_EXPECT_ERROR(x.max_pool2d(2, 0), ShapeError, "max_pool2d: ", "stride must be at least 1, got 0", "[1, 4, 5, 6]");
  WICK_EXPECT_ERROR(x.avg_pool2d({2, 2}, {1, 0}), ShapeError, "avg_pool2d: ", "stride", "got 0", "[1, 4, 5, 6]");
  WICK_EXPECT_ERROR(x.avg_pool2d(0), ShapeError, "avg_pool2d: ", "kernel size must be at least 1", "[1, 4, 5, 6]");
  WICK_EXPECT_ERROR(x.avg_pool2d(6), ShapeError, "avg_pool2d: ", "kernel 6x6 is larger than the input", "[1, 4, 5, 6]");
  WICK_EXPECT_ERROR(x.max_pool2d({1, 7}), ShapeError, "max_pool2d: ", "kernel 1x7 is larger than the input",
                    "[1, 4, 5, 6]");
  EXPECT_EQ(x.max_pool2d({5, 6}).shape(), Shape({1, 4, 1, 1}));
  WICK_EXPECT_ERROR(Tensor::ones({4, 5, 6}, DType::F32, dev()).avg_pool2d(2), ShapeError, "avg_pool2d: ", "rank 4",
                    "[4, 5, 6]");
}

INSTANTIATE_TEST_SUITE_P(Devices, NnTest, ::testing::ValuesIn(test::devices()), test::device_name);

}  // namespace
}  // namespace wick
