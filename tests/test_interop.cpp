// What users of the library touch first and what other libraries share with it: printing, braced
// creation, any C++ number as a Scalar, and memory lent in (from_blob) and out (data_ptr,
// native_stream), on every device.
#include <cmath>
#include <memory>
#include <sstream>

#include "test_util.h"

namespace wick {
namespace {

class InteropTest : public ::testing::TestWithParam<Device> {
 protected:
  Device dev() const { return GetParam(); }
};

template <typename E, typename F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  WICK_EXPECT_ERROR(f(), E, parts);
}

std::string printed(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

TEST_P(InteropTest, PrintsValuesAsPyTorchDoes) {
  const std::string where = dev().is_cpu() ? "" : ", device=" + dev().to_string();
  EXPECT_EQ(printed(Tensor::from_vector({1.5f, -2.25f, 3.f, 4.f}, {2, 2}, dev())),
            "tensor([[ 1.5000, -2.2500],\n        [ 3.0000,  4.0000]], dtype=f32" + where + ")");
  EXPECT_EQ(printed(Tensor::from_vector({1, 20, -300}, {3}, dev())), "tensor([   1,   20, -300], dtype=i32" + where + ")");
  EXPECT_EQ(printed(Tensor::scalar(2, DType::BF16, dev())), "tensor(2., dtype=bf16" + where + ")");
  EXPECT_EQ(printed(Tensor::zeros({0, 3}, DType::F32, dev())), "tensor([], size=[0, 3], dtype=f32" + where + ")");
  EXPECT_EQ(printed(Tensor::from_vector({1e-6, 1.0}, {2}, dev())), "tensor([1.0000e-06, 1.0000e+00], dtype=f64" + where + ")");
  EXPECT_EQ(printed(Tensor::from_vector({NAN, INFINITY, -INFINITY, 0.5f}, {4}, dev())),
            "tensor([   nan,    inf,   -inf, 0.5000], dtype=f32" + where + ")");
  EXPECT_EQ(printed(Tensor()), "tensor(undefined)");
  // Past 1000 elements, the first and last three of each longer dim; only those leave the device.
  const std::string big = printed(Tensor::arange(0, 40 * 50, 1, DType::I64, dev()).reshape({40, 50}));
  EXPECT_EQ(big,
            "tensor([[   0,    1,    2, ...,   47,   48,   49],\n"
            "        [  50,   51,   52, ...,   97,   98,   99],\n"
            "        [ 100,  101,  102, ...,  147,  148,  149],\n"
            "        ...,\n"
            "        [1850, 1851, 1852, ..., 1897, 1898, 1899],\n"
            "        [1900, 1901, 1902, ..., 1947, 1948, 1949],\n"
            "        [1950, 1951, 1952, ..., 1997, 1998, 1999]], dtype=i64" + where + ")");
}

TEST_P(InteropTest, BracedListsAndEveryNumberType) {
  Tensor t = Tensor::from_vector({1.f, 2.f, 3.f}, {3}, dev());
  EXPECT_EQ(t.dtype(), DType::F32);
  EXPECT_EQ((t * 2ul).to_vector<float>(), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ((t + true).to_vector<float>(), (std::vector<float>{2, 3, 4}));
  EXPECT_EQ((Tensor::from_vector({int64_t{5}}, {1}, dev()) - uint64_t{3}).to_vector<int64_t>(), std::vector<int64_t>{2});
  EXPECT_EQ((Tensor::from_vector({uint8_t{1}, uint8_t{2}}, {2}, dev()) * short{3}).to_vector<uint8_t>(),
            (std::vector<uint8_t>{3, 6}));
  expect_error<DTypeError>([&] { t.add(uint64_t{1} << 63); }, {"9223372036854775808", "i64"});
}

TEST_P(InteropTest, FromBlobSharesMemoryAndKeepsItsOwner) {
  Tensor src = Tensor::from_vector({0.f, 1.f, 2.f, 3.f, 4.f, 5.f}, {2, 3}, dev());
  auto keeper = std::make_shared<Tensor>(src);
  std::weak_ptr<Tensor> watch = keeper;
  // Columns 1 and 2 of src, as another library would describe them: address, shape, strides.
  void* p = static_cast<char*>(src.data_ptr()) + sizeof(float);
  Tensor view = Tensor::from_blob(p, {2, 2}, {3, 1}, DType::F32, dev(), std::move(keeper));
  EXPECT_EQ(view.data_ptr(), p);
  EXPECT_EQ(view.to_vector<float>(), (std::vector<float>{1, 2, 4, 5}));
  view.select(1, 0).fill(9);
  EXPECT_EQ(src.to_vector<float>(), (std::vector<float>{0, 9, 2, 3, 9, 5}));
  src = Tensor();
  EXPECT_FALSE(watch.expired()) << "the owner lives while a tensor over its memory does";
  Tensor narrow = view.narrow(0, 1, 1);
  EXPECT_EQ(narrow.data_ptr(), static_cast<char*>(p) + 3 * sizeof(float));
  view = Tensor();
  EXPECT_FALSE(watch.expired()) << "a view keeps the owner too";
  narrow = Tensor();
  EXPECT_TRUE(watch.expired()) << "the owner goes with the last tensor";
}

TEST_P(InteropTest, FromBlobRefusesWhatItCannotHold) {
  Tensor src = Tensor::zeros({8}, DType::F32, dev());
  void* p = src.data_ptr();
  expect_error<ShapeError>([&] { Tensor::from_blob(p, {2, 2}, {-1, 1}, DType::F32, dev(), nullptr); },
                                 {"from_blob", "negative stride"});
  expect_error<ShapeError>([&] { Tensor::from_blob(p, {2, 2}, {1}, DType::F32, dev(), nullptr); },
                                 {"from_blob", "1 strides for shape [2, 2]"});
  expect_error<ShapeError>(
      [&] { Tensor::from_blob(static_cast<char*>(p) + 1, {2}, {1}, DType::F32, dev(), nullptr); },
      {"from_blob", "not aligned", "f32"});
  expect_error<ShapeError>([&] { Tensor::from_blob(nullptr, {2}, {1}, DType::F32, dev(), nullptr); },
                                 {"from_blob", "null"});
  expect_error<ShapeError>(
      [&] { Tensor::from_blob(p, {int64_t{1} << 62, 4}, {4, 1}, DType::F32, dev(), nullptr); }, {"from_blob"});
  EXPECT_EQ(Tensor::from_blob(nullptr, {0, 3}, {3, 1}, DType::F32, dev(), nullptr).numel(), 0);
}

TEST_P(InteropTest, NativeStream) {
  if (dev().is_cpu())
    EXPECT_EQ(native_stream(dev()), nullptr);
  else
    EXPECT_NE(native_stream(dev()), nullptr);
  expect_error<DeviceError>([] { native_stream(Device::cuda(kMaxDeviceIndex)); }, {"native_stream"});
}

INSTANTIATE_TEST_SUITE_P(Devices, InteropTest, ::testing::ValuesIn(test::devices()), test::device_name);

}  // namespace
}  // namespace wick
