// Tensors of more than 2^31 elements on each GPU, where kernels must index with 64 bits: every op
// family runs on a 2^31 + 3072-element tensor and is compared with the CPU backend on the same
// data (whole results where they are small, the last rows where they are not). The CPU indexes
// with 64 bits throughout and is not run at this size here. A device without the ~45 GB these
// need skips the test.
#include "test_util.h"

namespace wick {
namespace {

constexpr int64_t kCols = 1024;
constexpr int64_t kRows = (int64_t(1) << 21) + 3;  // kRows * kCols = 2^31 + 3072
constexpr int64_t kTail = 3;                       // rows compared where a result is as large as the input

class LargeTest : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override {
    if (!GetParam().is_gpu()) GTEST_SKIP() << "GPU only";
  }
  Device dev() const { return GetParam(); }
};

// The last kTail rows of a [kRows, ...] tensor, on the CPU.
Tensor tail(const Tensor& t) { return t.narrow(0, t.dim(0) - kTail, kTail).to_device(Device::cpu()); }

template <typename T>
void expect_equal(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.shape(), want.shape());
  ASSERT_EQ(got.dtype(), want.dtype());
  const std::vector<T> g = got.to_vector<T>(), w = want.to_vector<T>();
  size_t first = g.size();
  for (size_t i = 0; i < g.size() && first == g.size(); ++i)
    if (g[i] != w[i]) first = i;
  EXPECT_EQ(first, g.size()) << "first difference at element " << first;
}

TEST_P(LargeTest, EveryOpFamilyPastTwoToThe31) {
  try {
    // x[r, c] = (7r mod 100) + (3c mod 100), built by a broadcasting add of two stride-0 operands.
    std::vector<uint8_t> rows(kRows), cols(kCols);
    for (int64_t r = 0; r < kRows; ++r) rows[r] = static_cast<uint8_t>(7 * r % 100);
    for (int64_t c = 0; c < kCols; ++c) cols[c] = static_cast<uint8_t>(3 * c % 100);
    Tensor rv = Tensor::from_vector(rows, {kRows, 1}, dev()), cv = Tensor::from_vector(cols, {1, kCols}, dev());
    Tensor x = rv + cv;
    ASSERT_GT(x.numel(), int64_t(1) << 31);
    Tensor xc = x.to_device(Device::cpu());
    {
      const std::vector<uint8_t> last = x.narrow(0, kRows - 1, 1).to_vector<uint8_t>();
      for (int64_t c = 0; c < kCols; ++c) ASSERT_EQ(last[c], rows[kRows - 1] + cols[c]) << "column " << c;
    }

    // Elementwise: dense, strided (a transposed copy), cast, comparison and where.
    expect_equal<uint8_t>(tail(x + x), tail(xc) + tail(xc));
    expect_equal<uint8_t>(x.t().contiguous().narrow(0, kCols - 2, 2).to_device(Device::cpu()),
                          xc.t().contiguous().narrow(0, kCols - 2, 2));
    expect_equal<int16_t>(tail(x.to_dtype(DType::I16)), tail(xc).to_dtype(DType::I16));
    Tensor tc = tail(xc), tr = tail(rv);
    expect_equal<uint8_t>(tail(where_cond(x.gt(100), x, rv)), where_cond(tc.gt(100), tc, tr));

    // Reductions over each dim and over everything; cumsum along the rows.
    expect_equal<uint8_t>(x.sum(0), xc.sum(0));
    expect_equal<uint8_t>(x.max(1), xc.max(1));
    expect_equal<uint32_t>(x.argmax(0), xc.argmax(0));
    expect_equal<uint32_t>(x.argmin(1), xc.argmin(1));
    expect_equal<uint8_t>(x.sum(), xc.sum());
    expect_equal<uint8_t>(tail(x.cumsum(1)), tail(xc).cumsum(1));

    // Index ops reading past 2^31.
    Tensor ids = Tensor::from_vector<uint32_t>({kCols - 1, 5, 0}, {3}, dev());
    expect_equal<uint8_t>(x.index_select(ids, 1), xc.index_select(ids.to_device(Device::cpu()), 1));
    Tensor row_ids = Tensor::from_vector<uint32_t>({kRows - 1, 0, kRows - 2}, {3}, dev());
    expect_equal<uint8_t>(x.index_select(row_ids, 0), xc.index_select(row_ids.to_device(Device::cpu()), 0));

    // argsort: in blocks of rows below 2^31 elements, then as one row of more than 2^31.
    expect_equal<uint32_t>(tail(x.argsort()), tail(xc).argsort());
    {
      Tensor flat = x.flatten_all();
      Tensor order = flat.argsort();
      Tensor sorted = flat.index_select(order, 0);
      const int64_t n = flat.numel();
      EXPECT_EQ(sorted.narrow(0, 1, n - 1).ge(sorted.narrow(0, 0, n - 1)).min().item<uint8_t>(), 1);
      EXPECT_EQ(order.narrow(0, 0, 1).item<uint32_t>(), flat.argmin(0).item<uint32_t>());  // stable: first minimum
    }
  } catch (const OutOfMemoryError& e) {
    GTEST_SKIP() << "not enough device memory: " << e.what();
  }
}

// The random generator's counter passes 2^31: the same numbers as the CPU's.
TEST_P(LargeTest, RandomNumbersPastTwoToThe31) {
  try {
    const Shape shape{kRows, kCols};
    manual_seed(11, dev());
    manual_seed(11, Device::cpu());
    expect_equal<float>(tail(Tensor::rand_uniform(shape, -1, 1, DType::F32, dev())),
                        tail(Tensor::rand_uniform(shape, -1, 1, DType::F32)));
  } catch (const OutOfMemoryError& e) {
    GTEST_SKIP() << "not enough device memory: " << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, LargeTest, ::testing::ValuesIn(test::devices()), test::device_name);

}  // namespace
}  // namespace wick
