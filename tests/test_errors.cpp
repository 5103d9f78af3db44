// Bad inputs: each raises the right wick::Error subclass, with a message that starts with the op's
// name and gives the shapes, dtypes and device involved; none crashes. Runs on every device present;
// a second host-memory backend standing in for cuda:0 reaches the cross-device checks in CPU-only
// builds.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/registry.h"
#include "cpu/parallel.h"
#include "reference/reference.h"
#include "test_util.h"

namespace wick {
namespace {

constexpr uint8_t kSkipU8 = std::numeric_limits<uint8_t>::max();
constexpr uint32_t kSkipU32 = std::numeric_limits<uint32_t>::max();
constexpr int32_t kSkipI32 = std::numeric_limits<int32_t>::max();

class ErrorsTest : public ::testing::TestWithParam<Device> {
 protected:
  Device dev() const { return GetParam(); }
  std::string d() const { return dev().to_string(); }
  // 0, 1, 2, ... in row-major order.
  Tensor iota(const Shape& shape, DType dtype = DType::F32) const {
    return Tensor::arange(0, shape.numel(), 1, dtype, dev()).reshape(shape);
  }
  Tensor zeros(const Shape& shape, DType dtype = DType::F32) const { return Tensor::zeros(shape, dtype, dev()); }
  Tensor ones(const Shape& shape, DType dtype = DType::F32) const { return Tensor::ones(shape, dtype, dev()); }
  template <typename T>
  Tensor vec(std::vector<T> v, const Shape& shape) const {
    return Tensor::from_vector(v, shape, dev());
  }
};

// ---- the hierarchy --------------------------------------------------------------------------

template <typename E>
void expect_catchable_as_bases() {
  static_assert(std::is_base_of_v<Error, E> && std::is_base_of_v<std::runtime_error, E>);
  try {
    throw E("op: message");
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "op: message");
  }
  try {
    throw E("op: message");
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "op: message");
  }
}

TEST(ErrorTypes, DeriveFromErrorAndRuntimeError) {
  static_assert(std::is_base_of_v<std::runtime_error, Error>);
  expect_catchable_as_bases<Error>();
  expect_catchable_as_bases<ShapeError>();
  expect_catchable_as_bases<DTypeError>();
  expect_catchable_as_bases<DeviceError>();
  expect_catchable_as_bases<IndexError>();
  expect_catchable_as_bases<OutOfMemoryError>();
  expect_catchable_as_bases<NotSupportedError>();
}

TEST(ErrorTypes, RaisedByTheLibrary) {
  Tensor x = Tensor::zeros({2, 3});
  EXPECT_THROW(x + Tensor::zeros({4}), ShapeError);
  EXPECT_THROW(x + Tensor::zeros({2, 3}, DType::F16), DTypeError);
  EXPECT_THROW(x.narrow(0, 1, 5), IndexError);
  EXPECT_THROW(x.to_device(Device(DeviceType::Cpu, 1)), DeviceError);
  // Past the address space of any host: the allocation fails cleanly.
  WICK_EXPECT_ERROR(Tensor::zeros({int64_t{1} << 50}, DType::U8), OutOfMemoryError, "cpu");
  // The front end asks supports() first, so only a direct backend call reaches this.
  Tensor i = Tensor::zeros({2}, DType::I32);
  WICK_EXPECT_ERROR(backend_for(Device::cpu()).unary(UnaryOp::Exp, View{*i.storage(), i.layout(), i.dtype()}),
                    NotSupportedError, "exp", "i32", "cpu");
}

// ---- shapes -----------------------------------------------------------------------------------

TEST_P(ErrorsTest, BinaryOpsRejectIncompatibleShapes) {
  Tensor a = zeros({2, 3}), b = zeros({4}), c = zeros({3, 2});
  WICK_EXPECT_ERROR(a.add(b), ShapeError, "add: ", "[2, 3]", "[4]", "f32", d());
  WICK_EXPECT_ERROR(a + b, ShapeError, "add: ", "[2, 3]", "[4]", "f32", d());
  WICK_EXPECT_ERROR(a.mul(c), ShapeError, "mul: ", "[2, 3]", "[3, 2]", "f32", d());
  WICK_EXPECT_ERROR(a.maximum(b), ShapeError, "maximum: ", "[2, 3]", "[4]", "f32", d());
  WICK_EXPECT_ERROR(a.eq(zeros({2})), ShapeError, "eq: ", "[2, 3]", "[2]", "f32", d());
  Tensor cond = ones({2, 3}, DType::U8);
  WICK_EXPECT_ERROR(where_cond(cond, a, c), ShapeError, "where_cond: ", "[2, 3]", "[3, 2]", "f32", d());
  WICK_EXPECT_ERROR(where_cond(ones({4}, DType::U8), a, a), ShapeError, "where_cond: ", "[4]", "u8", "[2, 3]", "f32",
                    d());
}

TEST_P(ErrorsTest, JoinsRejectMismatchedShapes) {
  Tensor a = zeros({2, 3});
  WICK_EXPECT_ERROR(cat({a, zeros({2, 4})}, 0), ShapeError, "cat: ", "[2, 3]", "[2, 4]", "dim 1", "f32", d());
  WICK_EXPECT_ERROR(cat({a, zeros({3})}, 0), ShapeError, "cat: ", "rank", "[2, 3]", "[3]", "f32", d());
  WICK_EXPECT_ERROR(stack({a, zeros({3, 2})}, 0), ShapeError, "stack: ", "[2, 3]", "[3, 2]", "f32", d());
  WICK_EXPECT_ERROR(cat({}, 0), ShapeError, "cat: ");
  WICK_EXPECT_ERROR(stack({}, 0), ShapeError, "stack: ");
}

TEST_P(ErrorsTest, WritesRejectMismatchedShapes) {
  Tensor dst = zeros({4, 3});
  WICK_EXPECT_ERROR(dst.slice_set(ones({2, 2}), 0, 0), ShapeError, "slice_set: ", "[2, 2]", "[4, 3]", "f32", d());
  WICK_EXPECT_ERROR(dst.slice_set(ones({3}), 0, 0), ShapeError, "slice_set: ", "[3]", "[4, 3]", "f32", d());
  WICK_EXPECT_ERROR(dst.copy_from(ones({3, 4})), ShapeError, "copy_from: ", "[3, 4]", "[4, 3]", "f32", d());
  EXPECT_EQ(dst.to_vector<float>(), std::vector<float>(12, 0));
}

TEST_P(ErrorsTest, IndexOpsRejectMismatchedShapes) {
  Tensor x = zeros({3, 2});
  Tensor ids = vec<uint32_t>({0, 1}, {2});
  // src must be x with dim 0 the length of ids: [2, 2].
  WICK_EXPECT_ERROR(x.index_add(ids, ones({3, 2}), 0), ShapeError, "index_add: ", "[3, 2]", "[2, 2]", "f32", d());
  Tensor ids2 = vec<uint32_t>({0, 1, 2, 0}, {2, 2});
  WICK_EXPECT_ERROR(x.scatter(ids2, ones({2, 3}), 0), ShapeError, "scatter: ", "[2, 2]", "u32", "[2, 3]", "f32", d());
  WICK_EXPECT_ERROR(x.scatter_set(ids2, ones({2, 3}), 0), ShapeError, "scatter_set: ", "[2, 2]", "u32", "[2, 3]", "f32",
                    d());
  WICK_EXPECT_ERROR(x.index_select(ids2, 0), ShapeError, "index_select: ", "rank 1", "[2, 2]", "u32", d());
  EXPECT_EQ(x.to_vector<float>(), std::vector<float>(6, 0));
}

// ---- dtypes -----------------------------------------------------------------------------------

TEST_P(ErrorsTest, OperandsOfDifferentDtypes) {
  Tensor a = zeros({2, 3}), h = zeros({3}, DType::F16), i = zeros({2, 3}, DType::I32);
  WICK_EXPECT_ERROR(a.add(h), DTypeError, "add: ", "dtype mismatch", "[2, 3] f32", "[3] f16", d());
  WICK_EXPECT_ERROR(a * i, DTypeError, "mul: ", "[2, 3] f32", "[2, 3] i32", d());
  WICK_EXPECT_ERROR(a.maximum(i), DTypeError, "maximum: ", "[2, 3] f32", "[2, 3] i32", d());
  WICK_EXPECT_ERROR(a.lt(i), DTypeError, "lt: ", "[2, 3] f32", "[2, 3] i32", d());
  WICK_EXPECT_ERROR(a.eq(h), DTypeError, "eq: ", "[2, 3] f32", "[3] f16", d());
  Tensor cond = ones({2, 3}, DType::U8);
  WICK_EXPECT_ERROR(where_cond(cond, a, zeros({2, 3}, DType::F64)), DTypeError, "where_cond: ", "[2, 3] f32",
                    "[2, 3] f64", d());
  WICK_EXPECT_ERROR(where_cond(ones({2, 3}), a, a), DTypeError, "where_cond: ", "condition", "[2, 3] f32", d());
  WICK_EXPECT_ERROR(cat({a, zeros({2, 3}, DType::BF16)}, 0), DTypeError, "cat: ", "[2, 3] f32", "[2, 3] bf16", d());
  WICK_EXPECT_ERROR(stack({a, zeros({2, 3}, DType::BF16)}, 0), DTypeError, "stack: ", "[2, 3] f32", "[2, 3] bf16", d());
  WICK_EXPECT_ERROR(zeros({4, 3}).slice_set(i, 0, 0), DTypeError, "slice_set: ", "[4, 3] f32", "[2, 3] i32", d());
  WICK_EXPECT_ERROR(a.copy_from(i), DTypeError, "copy_from: ", "[2, 3] f32", "[2, 3] i32", d());
}

TEST_P(ErrorsTest, OpsNotDefinedForADtype) {
  Tensor i = zeros({2, 3}, DType::I32), u = zeros({2, 3}, DType::U8);
  WICK_EXPECT_ERROR(i.exp(), DTypeError, "exp: ", "i32", "[2, 3]", d());
  WICK_EXPECT_ERROR(i.log(), DTypeError, "log: ", "i32", "[2, 3]", d());
  WICK_EXPECT_ERROR(i.sqrt(), DTypeError, "sqrt: ", "i32", "[2, 3]", d());
  WICK_EXPECT_ERROR(u.powf(2.0), DTypeError, "powf: ", "u8", "[2, 3]", d());
  WICK_EXPECT_ERROR(u.elu(1.0), DTypeError, "elu: ", "u8", "[2, 3]", d());
  WICK_EXPECT_ERROR(i.mean(), DTypeError, "mean: ", "float", "i32", "[2, 3]", d());
  WICK_EXPECT_ERROR(i.mean(0), DTypeError, "mean: ", "i32", "[2, 3]", d());
  WICK_EXPECT_ERROR(u.var(1), DTypeError, "var: ", "u8", "[2, 3]", d());
  WICK_EXPECT_ERROR(Tensor::rand_uniform({2}, 0.0, 1.0, DType::I32, dev()), DTypeError, "rand_uniform: ", "float",
                    "i32");
  WICK_EXPECT_ERROR(Tensor::rand_normal({2}, 0.0, 1.0, DType::U8, dev()), DTypeError, "rand_normal: ", "float", "u8");
  WICK_EXPECT_ERROR(Tensor::arange(0, 1.5, 1, DType::I32, dev()), DTypeError, "arange: ", "i32", "1.5");
}

TEST_P(ErrorsTest, IndicesOfAFloatDtype) {
  Tensor x = iota({3, 2}), fids = zeros({2}), fids2 = zeros({2, 2});
  WICK_EXPECT_ERROR(x.index_select(fids, 0), DTypeError, "index_select: ", "integer", "[2] f32", d());
  WICK_EXPECT_ERROR(x.gather(fids2, 0), DTypeError, "gather: ", "integer", "[2, 2] f32", d());
  WICK_EXPECT_ERROR(x.scatter(fids2, ones({2, 2}), 0), DTypeError, "scatter: ", "integer", "[2, 2] f32", d());
  WICK_EXPECT_ERROR(x.index_add(fids, ones({2, 2}), 0), DTypeError, "index_add: ", "integer", "[2] f32", d());
  WICK_EXPECT_ERROR(embedding(x, fids), DTypeError, "embedding: ", "integer", "[2] f32", d());
}

TEST_P(ErrorsTest, ReadingOutAsTheWrongType) {
  Tensor x = zeros({2, 3});
  WICK_EXPECT_ERROR(x.to_vector<int32_t>(), DTypeError, "to_vector: ", "f32", "i32", "[2, 3]", d());
  WICK_EXPECT_ERROR(x.to_vector<double>(), DTypeError, "to_vector: ", "f32", "f64", "[2, 3]", d());
  WICK_EXPECT_ERROR(zeros({}, DType::U8).item<float>(), DTypeError, "item: ", "u8", "f32", d());
  WICK_EXPECT_ERROR(x.item<float>(), ShapeError, "item: ", "one element", "[2, 3]", "f32", d());
}

TEST_P(ErrorsTest, ScalarsThatDoNotFitTheDtype) {
  Tensor u = zeros({2}, DType::U8), i = zeros({2}, DType::I32);
  WICK_EXPECT_ERROR(u + 300, DTypeError, "add: ", "300", "u8", "[2]", d());
  WICK_EXPECT_ERROR(300 - u, DTypeError, "sub: ", "300", "u8", "[2]", d());
  WICK_EXPECT_ERROR(u + (-1), DTypeError, "add: ", "-1", "u8", "[2]", d());
  WICK_EXPECT_ERROR(i + 1.5, DTypeError, "add: ", "1.5", "i32", "[2]", d());
  WICK_EXPECT_ERROR(i.mul(2.5), DTypeError, "mul: ", "2.5", "i32", "[2]", d());
  WICK_EXPECT_ERROR(u.eq(256), DTypeError, "eq: ", "256", "u8", "[2]", d());
  WICK_EXPECT_ERROR(u.const_set(300), DTypeError, "const_set: ", "300", "u8", "[2]", d());
  WICK_EXPECT_ERROR(Tensor::full({2}, -1, DType::U32, dev()), DTypeError, "full: ", "-1", "u32");
  WICK_EXPECT_ERROR(Tensor::full({2}, 0.5, DType::I64, dev()), DTypeError, "full: ", "0.5", "i64");
  EXPECT_EQ(u.to_vector<uint8_t>(), std::vector<uint8_t>(2, 0));
}

// ---- dims -------------------------------------------------------------------------------------

TEST_P(ErrorsTest, DimOutOfRange) {
  Tensor x = zeros({2, 3});
  Tensor ids = vec<uint32_t>({0}, {1});
  for (int64_t bad : {int64_t{2}, int64_t{-3}}) {
    const std::string dim = "dim " + std::to_string(bad);
    SCOPED_TRACE(dim);
    WICK_EXPECT_ERROR(x.sum(bad), ShapeError, "sum: ", dim, "[2, 3]", "f32", d());
    WICK_EXPECT_ERROR(x.max(bad), ShapeError, "max: ", dim, "[2, 3]", "f32", d());
    WICK_EXPECT_ERROR(x.argmax(bad), ShapeError, "argmax: ", dim, "[2, 3]", "f32", d());
    WICK_EXPECT_ERROR(x.mean(bad), ShapeError, "mean: ", dim, "[2, 3]", "f32", d());
    WICK_EXPECT_ERROR(x.narrow(bad, 0, 1), ShapeError, "narrow: ", dim, "[2, 3]", "f32", d());
    WICK_EXPECT_ERROR(x.transpose(0, bad), ShapeError, "transpose: ", dim, "[2, 3]", "f32", d());
    WICK_EXPECT_ERROR(cat({x, x}, bad), ShapeError, "cat: ", dim, "[2, 3]", "f32", d());
    WICK_EXPECT_ERROR(x.index_select(ids, bad), ShapeError, "index_select: ", dim, "[2, 3]", "f32", d());
    WICK_EXPECT_ERROR(x.cumsum(bad), ShapeError, "cumsum: ", dim, "[2, 3]", "f32", d());
  }
  // unsqueeze takes one more dim: [-3, 2] for rank 2.
  WICK_EXPECT_ERROR(x.unsqueeze(3), ShapeError, "unsqueeze: ", "dim 3", "[2, 3]", "f32", d());
  WICK_EXPECT_ERROR(x.unsqueeze(-4), ShapeError, "unsqueeze: ", "dim -4", "[2, 3]", "f32", d());
  WICK_EXPECT_ERROR(x.sum(Dims{0, 5}), ShapeError, "sum: ", "dim 5", "[2, 3]", "f32", d());
}

TEST_P(ErrorsTest, DimListedTwice) {
  Tensor x = zeros({2, 3});
  WICK_EXPECT_ERROR(x.sum(Dims{0, 0}), ShapeError, "sum: ", "twice", "[0, 0]", "[2, 3] f32", d());
  WICK_EXPECT_ERROR(x.sum(Dims{1, -1}), ShapeError, "sum: ", "twice", "[1, -1]", "[2, 3] f32", d());
  WICK_EXPECT_ERROR(x.max(Dims{0, -2}, true), ShapeError, "max: ", "twice", "[0, -2]", "[2, 3] f32", d());
}

// ---- views and writes past the end ------------------------------------------------------------

TEST_P(ErrorsTest, ViewsPastTheEnd) {
  Tensor x = zeros({2, 3});
  WICK_EXPECT_ERROR(x.narrow(0, 1, 5), IndexError, "narrow: ", "[1, 6)", "size 2", "[2, 3]", "f32", d());
  WICK_EXPECT_ERROR(x.narrow(1, -1, 1), IndexError, "narrow: ", "[-1, 0)", "[2, 3]", "f32", d());
  WICK_EXPECT_ERROR(x.narrow(1, 0, -1), IndexError, "narrow: ", "[2, 3]", "f32", d());
  WICK_EXPECT_ERROR(x.select(0, 2), IndexError, "select: ", "index 2", "size 2", "[2, 3]", "f32", d());
  WICK_EXPECT_ERROR(x.select(1, -4), IndexError, "select: ", "index -4", "size 3", "[2, 3]", "f32", d());
  WICK_EXPECT_ERROR(x.get(5), IndexError, "select: ", "index 5", "[2, 3]", "f32", d());

  Tensor dst = zeros({4, 3});
  WICK_EXPECT_ERROR(dst.slice_set(ones({2, 3}), 0, 3), IndexError, "slice_set: ", "[3, 5)", "[4, 3]", "f32", d());
  WICK_EXPECT_ERROR(dst.slice_set(ones({2, 3}), 0, -1), IndexError, "slice_set: ", "[-1, 1)", "[4, 3]", "f32", d());
  WICK_EXPECT_ERROR(dst.slice_set(ones({4, 4}), 1, 0), IndexError, "slice_set: ", "[0, 4)", "[4, 3]", "f32", d());
  EXPECT_EQ(dst.to_vector<float>(), std::vector<float>(12, 0));
}

TEST_P(ErrorsTest, ReshapeSplitChunk) {
  Tensor x = iota({2, 3});
  WICK_EXPECT_ERROR(x.reshape({4, 2}), ShapeError, "reshape: ", "[2, 3]", "[4, 2]", "f32", d());
  WICK_EXPECT_ERROR(x.reshape({4, -1}), ShapeError, "reshape: ", "[2, 3]", "[4, -1]", "f32", d());
  WICK_EXPECT_ERROR(x.reshape({-1, -1}), ShapeError, "reshape: ", "-1", "[-1, -1]", "[2, 3]", "f32", d());
  WICK_EXPECT_ERROR(x.reshape({-2, -3}), ShapeError, "reshape: ", "negative", "[-2, -3]", "[2, 3]", "f32", d());
  WICK_EXPECT_ERROR(x.t().reshape({5}), ShapeError, "reshape: ", "[3, 2]", "[5]", "f32", d());
  std::vector<int64_t> sizes = {1, 1};
  WICK_EXPECT_ERROR(x.split(sizes, 1), ShapeError, "split: ", "2", "size 3", "[2, 3]", "f32", d());
  sizes = {2, 2};
  WICK_EXPECT_ERROR(x.split(sizes, 1), ShapeError, "split: ", "4", "size 3", "[2, 3]", "f32", d());
  WICK_EXPECT_ERROR(x.chunk(0), ShapeError, "chunk: ", "0", "[2, 3]", "f32", d());
  WICK_EXPECT_ERROR(x.chunk(-2, 1), ShapeError, "chunk: ", "-2", "[2, 3]", "f32", d());
}

// ---- index values -----------------------------------------------------------------------------

TEST_P(ErrorsTest, IndexOutOfRange) {
  Tensor x = iota({3, 2});  // dim 0 has size 3
  WICK_EXPECT_ERROR(x.index_select(vec<uint32_t>({0, 5}, {2}), 0).to_vector<float>(), IndexError,
                    "index_select: ", "index 5", "size 3", "u32", d());
  WICK_EXPECT_ERROR(x.index_select(vec<int32_t>({-1, 0}, {2}), 0).to_vector<float>(), IndexError,
                    "index_select: ", "index -1", "size 3", "i32", d());
  WICK_EXPECT_ERROR(x.index_select(vec<int64_t>({2, 3}, {2}), 0).to_vector<float>(), IndexError,
                    "index_select: ", "index 3", "size 3", "i64", d());
  WICK_EXPECT_ERROR(x.gather(vec<uint32_t>({0, 1, 7, 0}, {2, 2}), 0).to_vector<float>(), IndexError,
                    "gather: ", "index 7", "size 3", "u32", d());
  WICK_EXPECT_ERROR(x.gather(vec<uint8_t>({0, 2}, {1, 2}), 1).to_vector<float>(), IndexError, "gather: ", "index 2",
                    "size 2", "u8", d());
  WICK_EXPECT_ERROR(x.index_add(vec<uint32_t>({0, 4}, {2}), ones({2, 2}), 0).to_vector<float>(), IndexError,
                    "index_add: ", "index 4", "size 3", "u32", d());
  WICK_EXPECT_ERROR(x.scatter(vec<uint32_t>({3, 0}, {1, 2}), ones({1, 2}), 0).to_vector<float>(), IndexError,
                    "scatter_set: ", "index 3", "size 3", "u32", d());  // the Backend op that found it
  WICK_EXPECT_ERROR(embedding(x, vec<uint32_t>({1, 9}, {2})).to_vector<float>(), IndexError,
                    "index_select: ", "index 9", "size 3", "u32", d());
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  // No element to read, yet the ids are still checked.
  Tensor empty = zeros({4, 0});
  WICK_EXPECT_ERROR(empty.index_select(vec<uint32_t>({4}, {1}), 0).to_vector<float>(), IndexError,
                    "index_select: ", "index 4", "size 4", "u32", d());
}

TEST_P(ErrorsTest, FailedInPlaceScatterLeavesTheDestinationUnchanged) {
  const std::vector<float> before = {0, 1, 2, 3, 4, 5};
  Tensor dst = iota({3, 2});
  // The bad index comes after good ones: nothing may have been written before the check fails.
  Tensor ids = vec<uint32_t>({1, 0, 2, 6}, {2, 2});
  Tensor src = vec<float>({10, 20, 30, 40}, {2, 2});
  WICK_EXPECT_ERROR(
      {
        dst.scatter_set(ids, src, 0);
        synchronize(dev());
      },
      IndexError, "scatter_set: ", "index 6", "size 3", "u32", d());
  EXPECT_EQ(dst.to_vector<float>(), before);
  WICK_EXPECT_ERROR(
      {
        dst.scatter_add_set(ids, src, 0);
        synchronize(dev());
      },
      IndexError, "scatter_add_set: ", "index 6", "size 3", "u32", d());
  EXPECT_EQ(dst.to_vector<float>(), before);
  Tensor neg = vec<int64_t>({0, -2}, {1, 2});
  WICK_EXPECT_ERROR(
      {
        dst.scatter_set(neg, ones({1, 2}), 1);
        synchronize(dev());
      },
      IndexError, "scatter_set: ", "index -2", "size 2", "i64", d());
  EXPECT_EQ(dst.to_vector<float>(), before);
}

// The index dtype's maximum value is a skip, not an error: gathers write 0, scatters write nothing.
TEST_P(ErrorsTest, MaximumIndexValueSkips) {
  Tensor x = iota({3, 2});
  EXPECT_EQ(x.index_select(vec<uint8_t>({kSkipU8, 1}, {2}), 0).to_vector<float>(), (std::vector<float>{0, 0, 2, 3}));
  EXPECT_EQ(x.index_select(vec<uint32_t>({2, kSkipU32}, {2}), 0).to_vector<float>(), (std::vector<float>{4, 5, 0, 0}));
  EXPECT_EQ(x.index_select(vec<int32_t>({kSkipI32}, {1}), 1).to_vector<float>(), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(x.gather(vec<uint32_t>({0, kSkipU32, 2, 1}, {2, 2}), 0).to_vector<float>(),
            (std::vector<float>{0, 0, 4, 3}));
  EXPECT_EQ(embedding(x, vec<uint32_t>({kSkipU32, 2}, {2})).to_vector<float>(), (std::vector<float>{0, 0, 4, 5}));

  Tensor dst = zeros({3, 2});
  dst.scatter_set(vec<uint8_t>({kSkipU8, 1}, {1, 2}), vec<float>({10, 20}, {1, 2}), 0);
  EXPECT_EQ(dst.to_vector<float>(), (std::vector<float>{0, 0, 0, 20, 0, 0}));
  dst.scatter_add_set(vec<uint32_t>({2, kSkipU32}, {1, 2}), vec<float>({5, 7}, {1, 2}), 0);
  EXPECT_EQ(dst.to_vector<float>(), (std::vector<float>{0, 0, 0, 20, 5, 0}));

  Tensor base = ones({2, 2});
  Tensor out = base.scatter(vec<uint32_t>({kSkipU32, 0}, {1, 2}), vec<float>({7, 8}, {1, 2}), 0);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{1, 8, 1, 1}));
  EXPECT_EQ(base.to_vector<float>(), std::vector<float>(4, 1));
  Tensor added = zeros({3, 2}).index_add(vec<uint8_t>({kSkipU8, 0}, {2}), vec<float>({1, 1, 2, 2}, {2, 2}), 0);
  EXPECT_EQ(added.to_vector<float>(), (std::vector<float>{2, 2, 0, 0, 0, 0}));
}

// ---- empty reductions -------------------------------------------------------------------------

TEST_P(ErrorsTest, EmptyReductions) {
  Tensor x = zeros({2, 0});
  WICK_EXPECT_ERROR(x.min(1), ShapeError, "min: ", "dim 1", "size 0", "[2, 0]", "f32", d());
  WICK_EXPECT_ERROR(x.max(1), ShapeError, "max: ", "dim 1", "size 0", "[2, 0]", "f32", d());
  WICK_EXPECT_ERROR(x.argmin(1), ShapeError, "argmin: ", "dim 1", "size 0", "[2, 0]", "f32", d());
  WICK_EXPECT_ERROR(x.argmax(-1), ShapeError, "argmax: ", "dim 1", "size 0", "[2, 0]", "f32", d());
  WICK_EXPECT_ERROR(x.max(), ShapeError, "max: ", "size 0", "[2, 0]", "f32", d());
  WICK_EXPECT_ERROR(zeros({0}, DType::I32).min(), ShapeError, "min: ", "size 0", "[0]", "i32", d());
  // A sum over nothing is 0.
  EXPECT_EQ(x.sum(1).to_vector<float>(), (std::vector<float>{0, 0}));
  EXPECT_EQ(x.sum(1, true).shape(), Shape({2, 1}));
  EXPECT_EQ(x.sum().item<float>(), 0.0f);
  EXPECT_EQ(zeros({0}, DType::I64).sum().item<int64_t>(), 0);
  EXPECT_EQ(x.max(0).shape(), Shape({0}));  // reducing a non-empty dim of an empty tensor is fine
}

// ---- in-place writes into broadcast views ------------------------------------------------------

TEST_P(ErrorsTest, WritesIntoBroadcastViews) {
  Tensor base = zeros({3});
  Tensor e = base.expand({2, 3});
  WICK_EXPECT_ERROR(e.const_set(1), ShapeError, "const_set: ", "broadcast", "[2, 3]", "f32", d());
  WICK_EXPECT_ERROR(e.fill(2), ShapeError, "broadcast", "[2, 3]", "f32", d());
  EXPECT_EQ(base.to_vector<float>(), std::vector<float>(3, 0));
  WICK_EXPECT_ERROR(e.zero(), ShapeError, "broadcast", "[2, 3]", "f32", d());
  base.zero();
  WICK_EXPECT_ERROR(e.copy_from(ones({2, 3})), ShapeError, "copy_from: ", "broadcast", "[2, 3]", "f32", d());
  Tensor ids = zeros({1, 3}, DType::U32);
  WICK_EXPECT_ERROR(e.scatter_set(ids, ones({1, 3}), 0), ShapeError, "scatter_set: ", "broadcast", "[2, 3]", "f32",
                    d());
  WICK_EXPECT_ERROR(e.scatter_add_set(ids, ones({1, 3}), 0), ShapeError, "scatter_add_set: ", "broadcast", "[2, 3]",
                    "f32", d());
  EXPECT_EQ(base.to_vector<float>(), std::vector<float>(3, 0));
}

// ---- undefined tensors -------------------------------------------------------------------------

TEST_P(ErrorsTest, UndefinedTensor) {
  Tensor u;
  Tensor x = zeros({2}), ids = zeros({2}, DType::U32), cond = ones({2}, DType::U8);
  // clang-format off
  std::vector<std::pair<std::string, std::function<void()>>> uses = {
      {"add", [&] { u.add(x); }},
      {"add", [&] { x.add(u); }},
      {"add", [&] { u + 1; }},
      {"sub", [&] { 1 - u; }},
      {"neg", [&] { -u; }},
      {"exp", [&] { u.exp(); }},
      {"affine", [&] { u.affine(2, 1); }},
      {"powf", [&] { u.powf(2); }},
      {"eq", [&] { x.eq(u); }},
      {"lt", [&] { u.lt(0); }},
      {"where_cond", [&] { where_cond(u, x, x); }},
      {"where_cond", [&] { where_cond(cond, x, u); }},
      {"sum", [&] { u.sum(); }},
      {"max", [&] { u.max(0); }},
      {"argmax", [&] { u.argmax(0); }},
      {"mean", [&] { u.mean(); }},
      {"var", [&] { u.var(0); }},
      {"cumsum", [&] { u.cumsum(0); }},
      {"argsort", [&] { u.argsort(); }},
      {"index_select", [&] { u.index_select(ids, 0); }},
      {"index_select", [&] { x.index_select(u, 0); }},
      {"gather", [&] { x.gather(u, 0); }},
      {"scatter", [&] { u.scatter(ids, x, 0); }},
      {"scatter_set", [&] { x.scatter_set(ids, u, 0); }},
      {"index_add", [&] { x.index_add(ids, u, 0); }},
      {"embedding", [&] { embedding(u, ids); }},
      {"cat", [&] { cat({x, u}, 0); }},
      {"cat", [&] { cat({u}, 0); }},
      {"stack", [&] { stack({x, u}, 0); }},
      {"slice_set", [&] { x.slice_set(u, 0, 0); }},
      {"copy_from", [&] { u.copy_from(x); }},
      {"const_set", [&] { u.fill(1); }},
      {"pad_with_zeros", [&] { u.pad_with_zeros(0, 1, 1); }},
      {"narrow", [&] { u.narrow(0, 0, 1); }},
      {"select", [&] { u.select(0, 0); }},
      {"reshape", [&] { u.reshape({1}); }},
      {"transpose", [&] { u.transpose(0, 0); }},
      {"broadcast_as", [&] { u.broadcast_as({2}); }},
      {"unsqueeze", [&] { u.unsqueeze(0); }},
      {"squeeze", [&] { u.squeeze(); }},
      {"flatten", [&] { u.flatten(); }},
      {"chunk", [&] { u.chunk(2); }},
      {"split", [&] { u.split(1); }},
      {"contiguous", [&] { u.contiguous(); }},
      {"copy", [&] { u.copy(); }},
      {"to_dtype", [&] { u.to_dtype(DType::F16); }},
      {"to_device", [&] { u.to_device(Device::cpu()); }},
      {"to_vector", [&] { u.to_vector<float>(); }},
      {"item", [&] { u.item<float>(); }},
      {"device", [&] { u.device(); }},
      {"full_like", [&] { u.zeros_like(); }},
      {"rand_uniform_like", [&] { u.rand_uniform_like(); }},
  };
  // clang-format on
  for (const auto& [op, use] : uses) {
    SCOPED_TRACE(op);
    WICK_EXPECT_ERROR(use(), Error, op + ": ", "undefined");
  }
  EXPECT_FALSE(u.defined());
}

// ---- ranks above kMaxRank ------------------------------------------------------------------------

TEST_P(ErrorsTest, RankAboveMax) {
  static_assert(kMaxRank == 8);
  WICK_EXPECT_ERROR(Shape({1, 1, 1, 1, 1, 1, 1, 1, 1}), ShapeError, "rank 9", "8");
  WICK_EXPECT_ERROR(Shape(std::vector<int64_t>(9, 1)), ShapeError, "rank 9", "8");
  Shape s = {1, 1, 1, 1, 1, 1, 1, 1};
  WICK_EXPECT_ERROR(s.push_back(1), ShapeError, "rank 9", "8");
  Tensor x = zeros(s);
  const std::string shape8 = s.to_string();
  WICK_EXPECT_ERROR(x.unsqueeze(0), ShapeError, "unsqueeze: ", "rank 9", shape8, "f32", d());
  WICK_EXPECT_ERROR(stack({x, x}, 0), ShapeError, "stack: ", "rank 9", shape8, "f32", d());
  WICK_EXPECT_ERROR(embedding(zeros({3, 2}), zeros(s, DType::U32)), ShapeError, "embedding: ", "rank 9", d());
}

// ---- creation arguments ------------------------------------------------------------------------

TEST_P(ErrorsTest, CreationArguments) {
  WICK_EXPECT_ERROR(Tensor::rand_uniform({2}, 2.5, 1.5, DType::F32, dev()), ShapeError, "rand_uniform: ", "2.5", "1.5");
  WICK_EXPECT_ERROR(Tensor::rand_normal({2}, 0.0, -1.5, DType::F32, dev()), ShapeError, "rand_normal: ", "-1.5");
  WICK_EXPECT_ERROR(Tensor::full({2, -3}, 1, DType::F32, dev()), ShapeError, "full: ", "negative", "[2, -3]");
  WICK_EXPECT_ERROR(Tensor::zeros({2, -3}, DType::F32, dev()), ShapeError, "negative", "[2, -3]");
  WICK_EXPECT_ERROR(Tensor::ones({-1}, DType::I32, dev()), ShapeError, "negative", "[-1]");
  WICK_EXPECT_ERROR(Tensor::rand_uniform({-2}, 0.0, 1.0, DType::F32, dev()), ShapeError, "rand_uniform: ", "[-2]");
  WICK_EXPECT_ERROR(Tensor::from_vector<float>({}, {-1, 0}, dev()), ShapeError, "from_vector: ", "[-1, 0]");
  WICK_EXPECT_ERROR(Tensor::from_vector<float>({1, 2, 3}, {2, 2}, dev()), ShapeError, "from_vector: ", "3", "[2, 2]");
  WICK_EXPECT_ERROR(Tensor::eye(-1, DType::F32, dev()), ShapeError, "eye: ", "-1");
  WICK_EXPECT_ERROR(Tensor::arange(0, 5, 0, DType::I64, dev()), ShapeError, "arange: ", "step");
  WICK_EXPECT_ERROR(Tensor::arange(0.0, 1.0, 0.0, DType::F32, dev()), ShapeError, "arange: ", "step");
  // 2^40 x 2^40 elements overflow int64: refused, not wrapped to an empty tensor.
  WICK_EXPECT_ERROR(Tensor::zeros({int64_t{1} << 40, int64_t{1} << 40}, DType::U8, dev()), Error, "[1099511627776");
}

INSTANTIATE_TEST_SUITE_P(Devices, ErrorsTest, ::testing::ValuesIn(test::devices()), test::device_name);

// ---- devices -----------------------------------------------------------------------------------

// Mixing devices, with a reference backend standing in for cuda:0 so that CPU-only builds run it.
class ErrorsCrossDevice : public ::testing::Test {
 protected:
  static constexpr Device kOther = Device::cuda(0);
  void SetUp() override { set_backend_override(kOther, &other_); }
  void TearDown() override { set_backend_override(kOther, nullptr); }
  reference::ReferenceBackend other_{kOther};
};

TEST_F(ErrorsCrossDevice, OperandsOnDifferentDevices) {
  Tensor g = Tensor::ones({2}, DType::F32, kOther), c = Tensor::ones({2});
  ASSERT_EQ(g.device(), kOther);
  WICK_EXPECT_ERROR(g.add(c), DeviceError, "add: ", "cuda:0", "cpu", "[2] f32");
  WICK_EXPECT_ERROR(c + g, DeviceError, "add: ", "[2] f32 on cpu", "[2] f32 on cuda:0");
  WICK_EXPECT_ERROR(c.eq(g), DeviceError, "eq: ", "cpu", "cuda:0");
  Tensor cond = Tensor::ones({2}, DType::U8);
  WICK_EXPECT_ERROR(where_cond(cond, g, g), DeviceError, "where_cond: ", "[2] u8 on cpu", "[2] f32 on cuda:0");
  WICK_EXPECT_ERROR(cat({c, g}, 0), DeviceError, "cat: ", "cpu", "cuda:0");
  WICK_EXPECT_ERROR(stack({g, c}, 0), DeviceError, "stack: ", "cpu", "cuda:0");
  Tensor gids = Tensor::zeros({2}, DType::U32, kOther);
  WICK_EXPECT_ERROR(c.index_select(gids, 0), DeviceError, "index_select: ", "[2] f32 on cpu", "[2] u32 on cuda:0");
  WICK_EXPECT_ERROR(c.gather(gids, 0), DeviceError, "gather: ", "cpu", "cuda:0");
  WICK_EXPECT_ERROR(embedding(Tensor::ones({3, 2}), gids), DeviceError, "embedding: ", "cpu", "cuda:0");
  Tensor cids = Tensor::zeros({2}, DType::U32);
  WICK_EXPECT_ERROR(c.scatter_set(cids, g, 0), DeviceError, "scatter_set: ", "cpu", "cuda:0");
  WICK_EXPECT_ERROR(c.index_add(cids, g, 0), DeviceError, "index_add: ", "cpu", "cuda:0");
  WICK_EXPECT_ERROR(c.slice_set(g, 0, 0), DeviceError, "slice_set: ", "cpu", "cuda:0");
  WICK_EXPECT_ERROR(c.copy_from(g), DeviceError, "copy_from: ", "cpu", "cuda:0");
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{1, 1}));
  // Moving first is the way.
  EXPECT_EQ(g.to_device(Device::cpu()).add(c).to_vector<float>(), (std::vector<float>{2, 2}));
}

TEST(ErrorsDevice, BackendNotBuiltIn) {
  struct Case {
    Device device;
    const char* label;
    const char* option;
  };
  const Case cases[] = {{Device::cuda(0), "CUDA", "-DWICK_CUDA=ON"}, {Device::rocm(0), "ROCm", "-DWICK_ROCM=ON"}};
  Tensor x = Tensor::ones({2});
  for (const Case& c : cases) {
    if (backend_built(c.device.type())) continue;
    const std::string dev = c.device.to_string();
    SCOPED_TRACE(dev);
    EXPECT_EQ(device_count(c.device.type()), 0);
    WICK_EXPECT_ERROR(Tensor::full({2}, 1, DType::F32, c.device), DeviceError, "full: ", "built without", c.label,
                      c.option, dev);
    WICK_EXPECT_ERROR(Tensor::zeros({2}, DType::F32, c.device), DeviceError, "built without", c.option, dev);
    WICK_EXPECT_ERROR(Tensor::ones({2}, DType::F32, c.device), DeviceError, "built without", c.option, dev);
    WICK_EXPECT_ERROR(Tensor::from_vector<float>({1, 2}, {2}, c.device), DeviceError, "from_vector: ", "built without",
                      c.option, dev);
    WICK_EXPECT_ERROR(Tensor::arange(0, 4, 1, DType::F32, c.device), DeviceError, "arange: ", "built without", c.option,
                      dev);
    WICK_EXPECT_ERROR(Tensor::eye(2, DType::F32, c.device), DeviceError, "eye: ", "built without", c.option, dev);
    WICK_EXPECT_ERROR(Tensor::rand_uniform({2}, 0.0, 1.0, DType::F32, c.device), DeviceError,
                      "rand_uniform: ", "built without", c.option, dev);
    WICK_EXPECT_ERROR(Tensor::rand_normal({2}, 0.0, 1.0, DType::F32, c.device), DeviceError,
                      "rand_normal: ", "built without", c.option, dev);
    WICK_EXPECT_ERROR(x.to_device(c.device), DeviceError, "to_device: ", "built without", c.option, dev);
    WICK_EXPECT_ERROR(manual_seed(1, c.device), DeviceError, "manual_seed: ", "built without", c.option, dev);
    WICK_EXPECT_ERROR(synchronize(c.device), DeviceError, "synchronize: ", "built without", c.option, dev);
    WICK_EXPECT_ERROR(describe_device(c.device), DeviceError, "describe_device: ", "built without", c.option, dev);
  }
}

// One past the last GPU of the backend built in (cuda:0 on a machine without a GPU).
TEST(ErrorsDevice, OrdinalThatDoesNotExist) {
  for (DeviceType type : {DeviceType::Cuda, DeviceType::Rocm}) {
    if (!backend_built(type)) continue;
    const int count = device_count(type);
    for (const Device d : {Device(type, count), Device(type, -1)}) {
      const std::string name = d.to_string();
      SCOPED_TRACE(name);
      const char* found = type == DeviceType::Cuda ? "CUDA devices found" : "ROCm devices found";
      WICK_EXPECT_ERROR(Tensor::zeros({2}, DType::F32, d), DeviceError, "zeros: ", name, "does not exist",
                        std::to_string(count), found);
      WICK_EXPECT_ERROR(Tensor::ones({2}).to_device(d), DeviceError, "to_device: ", name, "does not exist");
      WICK_EXPECT_ERROR(manual_seed(1, d), DeviceError, "manual_seed: ", name);
      WICK_EXPECT_ERROR(describe_device(d), DeviceError, "describe_device: ", name);
    }
  }
}

TEST(ErrorsDevice, OnlyOneCpu) {
  const Device cpu1(DeviceType::Cpu, 1);
  Tensor x = Tensor::ones({2});
  WICK_EXPECT_ERROR(Tensor::full({2}, 1, DType::F32, cpu1), DeviceError, "full: ", "one CPU", "cpu:1");
  WICK_EXPECT_ERROR(Tensor::from_vector<float>({1, 2}, {2}, cpu1), DeviceError, "from_vector: ", "cpu:1");
  WICK_EXPECT_ERROR(x.to_device(cpu1), DeviceError, "to_device: ", "one CPU", "cpu:1");
  WICK_EXPECT_ERROR(manual_seed(1, cpu1), DeviceError, "manual_seed: ", "cpu:1");
  WICK_EXPECT_ERROR(Tensor::zeros({2}, DType::F32, Device(DeviceType::Cpu, -1)), DeviceError, "one CPU");
}

// ---- nothing crashes ----------------------------------------------------------------------------

// One of each kind of bad input above, in one place: each throws a wick::Error (so a
// std::runtime_error) and the process goes on.
TEST(ErrorsNoCrash, EveryBadInputThrows) {
  Tensor x = Tensor::arange(6, DType::F32).reshape({3, 2}), u;
  Tensor ids = Tensor::from_vector<uint32_t>({0, 9}, {2});
  Tensor e = Tensor::zeros({3}).expand({2, 3});
  std::vector<int64_t> sizes = {1, 1};
  // clang-format off
  std::vector<std::pair<std::string, std::function<void()>>> bad = {
      {"add shapes", [&] { x + Tensor::zeros({4}); }},
      {"add dtypes", [&] { x + Tensor::zeros({3, 2}, DType::F16); }},
      {"where_cond float cond", [&] { where_cond(x, x, x); }},
      {"cat shapes", [&] { cat({x, Tensor::zeros({2, 3})}, 0); }},
      {"stack shapes", [&] { stack({x, x.t()}, 0); }},
      {"slice_set past end", [&] { x.slice_set(x, 0, 1); }},
      {"index_add src", [&] { x.index_add(ids, x, 0); }},
      {"scatter ids/src", [&] { x.scatter(ids.reshape({2, 1}), x, 0); }},
      {"copy_from shape", [&] { x.copy_from(Tensor::zeros({2, 3})); }},
      {"exp i32", [&] { Tensor::zeros({2}, DType::I32).exp(); }},
      {"powf u8", [&] { Tensor::zeros({2}, DType::U8).powf(2); }},
      {"mean i32", [&] { Tensor::zeros({2}, DType::I32).mean(); }},
      {"rand_uniform i32", [&] { Tensor::rand_uniform({2}, 0, 1, DType::I32); }},
      {"float ids", [&] { x.index_select(Tensor::zeros({1}), 0); }},
      {"to_vector type", [&] { x.to_vector<int64_t>(); }},
      {"u8 + 300", [&] { Tensor::zeros({2}, DType::U8) + 300; }},
      {"full u32 -1", [&] { Tensor::full({2}, -1, DType::U32); }},
      {"sum dim", [&] { x.sum(-3); }},
      {"sum dim twice", [&] { x.sum(Dims{0, 0}); }},
      {"narrow past end", [&] { x.narrow(0, 2, 2); }},
      {"select", [&] { x.select(0, 3); }},
      {"reshape", [&] { x.reshape({4}); }},
      {"reshape two -1", [&] { x.reshape({-1, -1}); }},
      {"split", [&] { x.split(sizes, 0); }},
      {"chunk 0", [&] { x.chunk(0); }},
      {"index_select range", [&] { x.index_select(ids, 0).to_vector<float>(); }},
      {"gather range", [&] { x.gather(ids.reshape({2, 1}), 0).to_vector<float>(); }},
      {"scatter_set range", [&] { x.scatter_set(ids.reshape({2, 1}), x.narrow(1, 0, 1), 0); }},
      {"embedding range", [&] { embedding(x, ids).to_vector<float>(); }},
      {"argmax empty", [&] { Tensor::zeros({0}).argmax(0); }},
      {"copy_from broadcast view", [&] { e.copy_from(Tensor::ones({3})); }},
      {"undefined", [&] { u.sum(); }},
      {"rank 9", [&] { Tensor::zeros({1, 1, 1, 1, 1, 1, 1, 1}).unsqueeze(0); }},
      {"rand_uniform bounds", [&] { Tensor::rand_uniform({2}, 1, 0); }},
      {"rand_normal std", [&] { Tensor::rand_normal({2}, 0, -1); }},
      {"zeros negative", [&] { Tensor::zeros({-1}); }},
      {"eye -1", [&] { Tensor::eye(-1); }},
      {"arange step 0", [&] { Tensor::arange(0, 1, 0, DType::I32); }},
      {"rocm", [&] { Tensor::zeros({2}, DType::F32, Device::rocm(0)); }},
      {"cpu:1", [&] { Tensor::zeros({2}, DType::F32, Device(DeviceType::Cpu, 1)); }},
  };
  // clang-format on
  for (const auto& [what, f] : bad) {
    SCOPED_TRACE(what);
    if (what == "rocm" && backend_built(DeviceType::Rocm)) continue;
    bool threw = false;
    try {
      f();
    } catch (const Error& err) {
      threw = true;
      const std::runtime_error& base = err;
      EXPECT_NE(std::string(base.what()), "");
    } catch (const std::exception& err) {
      ADD_FAILURE() << "threw a std::exception that is not a wick::Error: " << err.what();
      threw = true;
    }
    EXPECT_TRUE(threw) << "no error";
  }
}

// An error raised inside a parallel loop reaches the caller (an exception leaving an OpenMP
// region would end the process), whichever thread raised it.
TEST(ParallelFor, ForwardsAnExceptionToTheCaller) {
  for (int64_t bad : {int64_t(0), int64_t(1) << 19, (int64_t(1) << 20) - 1}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(cpu::parallel_for(int64_t(1) << 20, 1,
                                   [&](int64_t begin, int64_t end) {
                                     if (begin <= bad && bad < end) WICK_THROW(IndexError, "test", "element ", bad);
                                   }),
                 IndexError);
  }
  std::atomic<int64_t> seen{0};
  cpu::parallel_for(int64_t(1) << 20, 1, [&](int64_t begin, int64_t end) { seen += end - begin; });
  EXPECT_EQ(seen.load(), int64_t(1) << 20);
}

// The ranges cover [0, n) once, each at least `grain` long, and there are more of them than
// threads (handed out as threads come free), at most kRangesPerThread per thread.
TEST(ParallelFor, HandsOutSeveralRangesPerThread) {
  const int64_t threads = cpu::max_threads();
  for (const auto& [n, grain] : {std::pair<int64_t, int64_t>{int64_t(1) << 20, 1}, {1000, 100}, {7, 1}, {5, 100}}) {
    SCOPED_TRACE(testing::Message() << n << " by " << grain);
    std::mutex m;
    std::vector<std::pair<int64_t, int64_t>> ranges;
    cpu::parallel_for(n, grain, [&](int64_t begin, int64_t end) {
      const std::lock_guard lock(m);
      ranges.emplace_back(begin, end);
    });
    std::sort(ranges.begin(), ranges.end());
    int64_t next = 0;
    for (const auto& [begin, end] : ranges) {
      EXPECT_EQ(begin, next);
      EXPECT_TRUE(end - begin >= grain || ranges.size() == 1) << begin << ".." << end;
      next = end;
    }
    EXPECT_EQ(next, n);
    const int64_t most = std::clamp<int64_t>(n / grain, 1, threads * cpu::kRangesPerThread);
    EXPECT_EQ(static_cast<int64_t>(ranges.size()), threads > 1 ? most : 1);
    if (threads > 1 && n / grain > threads) {
      EXPECT_GT(static_cast<int64_t>(ranges.size()), threads);
    }
  }
}

}  // namespace
}  // namespace wick

