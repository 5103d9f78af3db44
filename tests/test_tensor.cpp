// Tensor creation, inspection, data transfer, views, joins and in-place writes, on every device.
#include <cmath>

#include "backend/registry.h"
#include "reference/reference.h"
#include "test_util.h"
#include "wick/graph.h"

namespace wick {
namespace {

class TensorTest : public ::testing::TestWithParam<Device> {
 protected:
  Device dev() const { return GetParam(); }
  Tensor f32(std::vector<float> v, const Shape& s) const { return Tensor::from_vector(v, s, dev()); }
  Tensor i64(std::vector<int64_t> v, const Shape& s) const { return Tensor::from_vector(v, s, dev()); }
};

TEST_P(TensorTest, CreationAndInspection) {
  Tensor t = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}, dev());
  EXPECT_EQ(t.shape(), Shape({2, 3}));
  EXPECT_EQ(t.rank(), 2);
  EXPECT_EQ(t.dim(-1), 3);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.dtype(), DType::F32);
  EXPECT_EQ(t.device(), dev());
  EXPECT_EQ(t.strides(), Strides({3, 1}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));

  EXPECT_EQ(Tensor::zeros({2, 2}, DType::I32, dev()).to_vector<int32_t>(), (std::vector<int32_t>(4, 0)));
  EXPECT_EQ(Tensor::ones({3}, DType::U8, dev()).to_vector<uint8_t>(), (std::vector<uint8_t>(3, 1)));
  EXPECT_EQ(Tensor::full({2}, 2.5, DType::F64, dev()).to_vector<double>(), (std::vector<double>{2.5, 2.5}));
  EXPECT_EQ(Tensor::scalar(7, DType::I64, dev()).item<int64_t>(), 7);
  EXPECT_EQ(Tensor::full({2}, -1.5, DType::BF16, dev()).to_dtype(DType::F32).to_vector<float>(),
            (std::vector<float>{-1.5f, -1.5f}));
  Tensor like = t.full_like(9);
  EXPECT_EQ(like.shape(), t.shape());
  EXPECT_EQ(like.to_vector<float>(), std::vector<float>(6, 9));
  EXPECT_EQ(t.zeros_like().to_vector<float>(), std::vector<float>(6, 0));
}

// memory_use counts the bytes tensors hold on a device, and the most at once since the last reset.
TEST_P(TensorTest, MemoryUseCountsTensorsAndThePeak) {
  const Device d = dev();
  synchronize(d);
  reset_peak_memory(d);
  const MemoryUse before = memory_use(d);
  EXPECT_EQ(before.peak, before.in_use);
  {
    const Tensor a = Tensor::ones({1 << 18}, DType::F32, d);  // 1 MiB
    const Tensor b = Tensor::ones({1 << 17}, DType::F64, d);  // 1 MiB
    const MemoryUse held = memory_use(d);
    EXPECT_EQ(held.in_use - before.in_use, int64_t{2} << 20);
    EXPECT_GE(held.peak, held.in_use);
    const Tensor view = a.narrow(0, 0, 4);  // a view holds no new memory
    EXPECT_EQ(memory_use(d).in_use, held.in_use);
  }
  const MemoryUse after = memory_use(d);
  EXPECT_EQ(after.in_use, before.in_use);
  EXPECT_GE(after.peak - before.in_use, int64_t{2} << 20);
  reset_peak_memory(d);
  EXPECT_EQ(memory_use(d).peak, memory_use(d).in_use);
}

TEST_P(TensorTest, ArangeAndEye) {
  EXPECT_EQ(Tensor::arange(5, DType::I64, dev()).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(Tensor::arange(10, 0, -3, DType::I32, dev()).to_vector<int32_t>(), (std::vector<int32_t>{10, 7, 4, 1}));
  EXPECT_EQ(Tensor::arange(0.0, 1.0, 0.25, DType::F32, dev()).to_vector<float>(),
            (std::vector<float>{0, 0.25f, 0.5f, 0.75f}));
  EXPECT_EQ(Tensor::arange(3, 3, 1, DType::I64, dev()).numel(), 0);
  EXPECT_EQ(Tensor::eye(3, DType::F32, dev()).to_vector<float>(), (std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(Tensor::eye(0, DType::F32, dev()).numel(), 0);
  // 2^40 elements (8 TB): wick's own OutOfMemoryError before the allocator is asked.
  WICK_EXPECT_ERROR(Tensor::arange(int64_t{1} << 40, DType::I64, dev()), OutOfMemoryError, "arange", "1099511627776");
  WICK_EXPECT_ERROR(Tensor::zeros({int64_t{1} << 40}, DType::F64, Device::cpu()), OutOfMemoryError, "alloc");
}

TEST_P(TensorTest, RandomNumbersAreReproducible) {
  manual_seed(42, dev());
  Tensor a = Tensor::rand_uniform({1000}, -2, 3, DType::F32, dev());
  Tensor b = Tensor::rand_uniform({1000}, -2, 3, DType::F32, dev());
  manual_seed(42, dev());
  Tensor a2 = Tensor::rand_uniform({1000}, -2, 3, DType::F32, dev());
  EXPECT_EQ(a.to_vector<float>(), a2.to_vector<float>());
  EXPECT_NE(a.to_vector<float>(), b.to_vector<float>());
  for (float v : a.to_vector<float>()) {
    EXPECT_GE(v, -2.f);
    EXPECT_LT(v, 3.f);
  }
  manual_seed(7, dev());
  Tensor n = Tensor::rand_normal({100000}, 1.0, 2.0, DType::F64, dev());
  double mean = n.mean().item<double>(), var = n.var(0).item<double>();
  EXPECT_NEAR(mean, 1.0, 0.03);
  EXPECT_NEAR(var, 4.0, 0.1);
  // The same seed gives the same numbers on the CPU (every backend shares one generator).
  if (!dev().is_cpu()) {
    manual_seed(5, dev());
    manual_seed(5, Device::cpu());
    Tensor g = Tensor::rand_uniform({257}, 0, 1, DType::F32, dev());
    Tensor c = Tensor::rand_uniform({257}, 0, 1, DType::F32, Device::cpu());
    EXPECT_EQ(g.to_vector<float>(), c.to_vector<float>());
  }
}

TEST_P(TensorTest, LikeConstructorsFollowTheSource) {
  // A transposed source: the result takes its shape, dtype and device, and is contiguous.
  Tensor src = Tensor::zeros({3, 4}, DType::BF16, dev()).t();
  Tensor ones = src.ones_like();
  EXPECT_EQ(ones.shape(), Shape({4, 3}));
  EXPECT_EQ(ones.dtype(), DType::BF16);
  EXPECT_EQ(ones.device(), dev());
  EXPECT_TRUE(ones.is_contiguous());
  EXPECT_EQ(ones.to_dtype(DType::F32).to_vector<float>(), std::vector<float>(12, 1));
  EXPECT_EQ(src.to_dtype(DType::F32).sum().item<float>(), 0.f);  // the source is untouched
  EXPECT_EQ(i64({-3, 5}, {2}).ones_like().to_vector<int64_t>(), (std::vector<int64_t>{1, 1}));
  Tensor one = Tensor::scalar(9, DType::U8, dev()).ones_like();
  EXPECT_EQ(one.shape(), Shape{});
  EXPECT_EQ(one.item<uint8_t>(), 1);

  // With a seed, rand_*_like gives the numbers rand_* gives with that seed.
  for (DType dt : {DType::F32, DType::F16, DType::F64}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = Tensor::zeros({5, 7}, dt, dev()).t();
    auto values = [](const Tensor& t) { return t.to_dtype(DType::F64).to_vector<double>(); };
    auto check = [&](const Tensor& got, const Tensor& want) {
      EXPECT_EQ(got.shape(), Shape({7, 5}));
      EXPECT_EQ(got.dtype(), dt);
      EXPECT_EQ(got.device(), dev());
      EXPECT_EQ(values(got), values(want));
    };
    manual_seed(11, dev());
    Tensor u = x.rand_uniform_like(-1, 2);
    manual_seed(11, dev());
    check(u, Tensor::rand_uniform({7, 5}, -1, 2, dt, dev()));
    for (double v : values(u)) {
      EXPECT_GE(v, -1);
      EXPECT_LE(v, 2);  // a value just below 2 may round up to it in f16
    }
    manual_seed(12, dev());
    Tensor n = x.rand_normal_like(3, 0.5);
    manual_seed(12, dev());
    check(n, Tensor::rand_normal({7, 5}, 3, 0.5, dt, dev()));
    // The defaults are rand_*'s: uniform in [0, 1), standard normal.
    manual_seed(13, dev());
    Tensor ud = x.rand_uniform_like();
    Tensor nd = x.rand_normal_like();
    manual_seed(13, dev());
    check(ud, Tensor::rand_uniform({7, 5}, 0, 1, dt, dev()));
    check(nd, Tensor::rand_normal({7, 5}, 0, 1, dt, dev()));
  }
}

TEST_P(TensorTest, ViewsShareStorage) {
  Tensor t = Tensor::arange(24, DType::I64, dev()).reshape({2, 3, 4});
  EXPECT_EQ(t.narrow(2, 1, 2).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22}));
  EXPECT_EQ(t.select(1, -1).to_vector<int64_t>(), (std::vector<int64_t>{8, 9, 10, 11, 20, 21, 22, 23}));
  EXPECT_EQ(t.get(1).shape(), Shape({3, 4}));
  EXPECT_EQ(t.slice(2, 0, 4, 3).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 3, 4, 7, 8, 11, 12, 15, 16, 19, 20, 23}));
  Tensor tt = t.transpose(0, 2);
  EXPECT_EQ(tt.shape(), Shape({4, 3, 2}));
  EXPECT_FALSE(tt.is_contiguous());
  EXPECT_EQ(tt.to_vector<int64_t>()[1], 12);
  EXPECT_EQ(t.permute({2, 0, 1}).contiguous().shape(), Shape({4, 2, 3}));
  EXPECT_EQ(t.get(0).t().to_vector<int64_t>(), (std::vector<int64_t>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  Tensor b = i64({1, 2}, {2, 1}).broadcast_as({2, 3});
  EXPECT_EQ(b.to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1, 2, 2, 2}));
  EXPECT_EQ(t.unsqueeze(0).shape(), Shape({1, 2, 3, 4}));
  EXPECT_EQ(t.unsqueeze(0).unsqueeze(-1).squeeze().shape(), Shape({2, 3, 4}));

  // Writes through a view reach the base tensor.
  Tensor base = Tensor::zeros({3, 4}, DType::F32, dev());
  Tensor col = base.narrow(1, 2, 1);
  col.fill(5);
  EXPECT_EQ(base.to_vector<float>(), (std::vector<float>{0, 0, 5, 0, 0, 0, 5, 0, 0, 0, 5, 0}));
  Tensor copy = base.copy();
  base.zero();
  EXPECT_EQ(copy.sum().item<float>(), 15.f);  // the copy is independent
}

TEST_P(TensorTest, ReshapeFlattenSplit) {
  Tensor t = Tensor::arange(12, DType::I32, dev());
  Tensor r = t.reshape({3, -1});
  EXPECT_EQ(r.shape(), Shape({3, 4}));
  EXPECT_EQ(r.storage(), t.storage());  // a view
  Tensor tr = r.t();
  Tensor flat = tr.reshape({12});  // not expressible as a view: a copy in row-major order of tr
  EXPECT_NE(flat.storage(), t.storage());
  EXPECT_EQ(flat.to_vector<int32_t>(), (std::vector<int32_t>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_EQ(r.reshape({2, 2, 3}).flatten(1).shape(), Shape({2, 6}));
  EXPECT_EQ(r.flatten_all().shape(), Shape({12}));
  EXPECT_EQ(Tensor::scalar(1, DType::I32, dev()).flatten_all().shape(), Shape({1}));

  auto chunks = t.chunk(5);
  ASSERT_EQ(chunks.size(), 4u);  // pieces of ceil(12 / 5) = 3
  EXPECT_EQ(chunks[3].to_vector<int32_t>(), (std::vector<int32_t>{9, 10, 11}));
  auto pieces = r.split(std::vector<int64_t>{1, 3}, 1);
  EXPECT_EQ(pieces[1].shape(), Shape({3, 3}));
  EXPECT_EQ(pieces[0].to_vector<int32_t>(), (std::vector<int32_t>{0, 4, 8}));
  EXPECT_EQ(t.split(5).size(), 3u);
}

TEST_P(TensorTest, CatStackPad) {
  Tensor a = f32({1, 2, 3, 4}, {2, 2}), b = f32({5, 6}, {2, 1});
  EXPECT_EQ(cat({a, b}, 1).to_vector<float>(), (std::vector<float>{1, 2, 5, 3, 4, 6}));
  EXPECT_EQ(cat({a, a.t()}, 0).to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 1, 3, 2, 4}));
  EXPECT_EQ(cat({a.narrow(1, 1, 1), b}, 1).to_vector<float>(), (std::vector<float>{2, 5, 4, 6}));
  EXPECT_EQ(cat({a, Tensor::zeros({0, 2}, DType::F32, dev())}, 0).shape(), Shape({2, 2}));
  Tensor s = stack({a, a}, 1);
  EXPECT_EQ(s.shape(), Shape({2, 2, 2}));
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{1, 2, 1, 2, 3, 4, 3, 4}));
  EXPECT_EQ(a.pad_with_zeros(0, 1, 2).to_vector<float>(), (std::vector<float>{0, 0, 1, 2, 3, 4, 0, 0, 0, 0}));
}

TEST_P(TensorTest, InPlaceWrites) {
  Tensor t = Tensor::zeros({3, 4}, DType::I64, dev());
  t.slice_set(i64({1, 2, 3, 4, 5, 6}, {3, 2}), 1, 1);
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 0, 0, 3, 4, 0, 0, 5, 6, 0}));
  t.narrow(0, 0, 1).copy_from(i64({9}, {1}));  // broadcast source
  EXPECT_EQ(t.get(0).to_vector<int64_t>(), (std::vector<int64_t>{9, 9, 9, 9}));
  // Overlapping source and destination: the source is read before it is overwritten.
  t.narrow(1, 1, 3).copy_from(t.narrow(1, 0, 3));
  EXPECT_EQ(t.get(1).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 3, 4}));
  t.t().narrow(0, 3, 1).const_set(-2);
  EXPECT_EQ(t.narrow(1, 3, 1).to_vector<int64_t>(), (std::vector<int64_t>{-2, -2, -2}));
}

TEST_P(TensorTest, DtypeConversionsKeepTheRules) {
  Tensor f = f32({-1.7f, 2.9f, 300.0f, NAN, -1e10f}, {5});
  EXPECT_EQ(f.to_dtype(DType::U8).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 2, 255, 0, 0}));
  EXPECT_EQ(f.to_dtype(DType::I16).to_vector<int16_t>(), (std::vector<int16_t>{-1, 2, 300, 0, -32768}));
  EXPECT_EQ(i64({300, -1}, {2}).to_dtype(DType::U8).to_vector<uint8_t>(), (std::vector<uint8_t>{44, 255}));
  Tensor h = f32({1.0f, 65520.0f, 1.0f + 1.0f / 2048}, {3}).to_dtype(DType::F16);
  std::vector<float> back = h.to_dtype(DType::F32).to_vector<float>();
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_TRUE(std::isinf(back[1]));
  EXPECT_EQ(back[2], 1.0f);  // a tie rounds to even
  EXPECT_TRUE(std::isnan(f32({500.f}, {1}).to_dtype(DType::F8E4M3).to_dtype(DType::F32).item<float>()));
  EXPECT_EQ(f.to_dtype(DType::F32).storage(), f.storage());  // same dtype: the tensor itself
}

TEST_P(TensorTest, OutOfMemoryLeavesTheDeviceUsable) {
  // 1 PiB: beyond the address space of any host (an overcommitting kernel would grant less and
  // kill the process on first touch) and the memory of any device. The allocator gives back what
  // it caches, tries once more, and raises; the next allocation works.
  WICK_EXPECT_ERROR(Tensor::zeros({int64_t(1) << 50}, DType::U8, dev()), OutOfMemoryError, "alloc", dev().to_string());
  EXPECT_EQ(Tensor::ones({3}, DType::F32, dev()).sum().item<float>(), 3.f);
}

// A recording runs nothing; each replay runs the recorded ops again on the inputs' current values,
// temporaries included (on a GPU, their memory belongs to the graph).
TEST_P(TensorTest, GraphsReplayTheRecordedOps) {
  Tensor x = f32({1, 2, 3, 4}, {2, 2});
  Tensor y = Tensor::zeros({2, 2}, DType::F32, dev());
  Tensor count = Tensor::zeros({1}, DType::F32, dev());
  const Graph g = Graph::record(dev(), [&] {
    y.copy_from((x * 2.0 + 1.0).matmul(x.t()));  // temporaries made and dropped inside
    count.copy_from(count + 1.0);
  });
  EXPECT_TRUE(g.defined());
  EXPECT_EQ(g.device(), dev());
  EXPECT_EQ(y.to_vector<float>(), std::vector<float>(4, 0.f));
  g.replay();
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{13, 29, 25, 57}));
  x.copy_from(f32({0, 1, 1, 0}, {2, 2}));
  g.replay();
  g.replay();
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{3, 1, 1, 3}));
  EXPECT_EQ(count.item<float>(), 3.f);
  WICK_EXPECT_ERROR(Graph().replay(), Error, "Graph::replay: ", "undefined");
  WICK_EXPECT_ERROR(Graph::record(dev(), {}), Error, "Graph::record: ", "no function");
}

// On a GPU a recording refuses what a graph cannot hold, names it, and leaves the device usable.
TEST_P(TensorTest, GraphsRefuseHostCopiesAndEscapingTensors) {
  if (dev().is_cpu()) GTEST_SKIP() << "the CPU's recording is the function itself";
  const Tensor x = f32({1, 2, 3}, {3});
  WICK_EXPECT_ERROR(Graph::record(dev(), [&] { (void)(x * 2.0).to_vector<float>(); }), Error, "to_host",
                    "recording a graph");
  WICK_EXPECT_ERROR(Graph::record(dev(), [&] { (void)f32({1}, {1}); }), Error, "from_host");
  WICK_EXPECT_ERROR(Graph::record(dev(), [&] { synchronize(dev()); }), Error, "synchronize");
  Tensor kept;
  WICK_EXPECT_ERROR(Graph::record(dev(), [&] { kept = x + 1.0; }), Error, "Graph::record: ", "outlive it (1 buffers)");
  kept = Tensor();  // its release frees nothing: the recording that owned it is gone
  WICK_EXPECT_ERROR(Graph::record(dev(), [&] { throw ShapeError("inside"); }), ShapeError, "inside");
  // A tensor made before the recording and dropped inside it is freed once, after it.
  Tensor before = x * 3.0;
  const Graph g = Graph::record(dev(), [&] { before = Tensor(); });
  g.replay();
  EXPECT_EQ((x + 1.0).to_vector<float>(), (std::vector<float>{2, 3, 4}));
}

INSTANTIATE_TEST_SUITE_P(Devices, TensorTest, ::testing::ValuesIn(test::devices()), test::device_name);

// Moving tensors between devices, with the reference backend standing in for a second device so
// that the path runs in CPU-only builds too.
class CrossDevice : public ::testing::Test {
 protected:
  static constexpr Device kOther = Device::rocm(7);
  void SetUp() override { set_backend_override(kOther, &other_); }
  void TearDown() override { set_backend_override(kOther, nullptr); }
  reference::ReferenceBackend other_{kOther};
};

TEST_F(CrossDevice, ToDeviceAndBack) {
  Tensor t = Tensor::arange(12, DType::F32).reshape({3, 4}).t();
  Tensor o = t.to_device(kOther);
  EXPECT_EQ(o.device(), kOther);
  EXPECT_TRUE(o.is_contiguous());
  EXPECT_EQ(o.to_vector<float>(), t.to_vector<float>());
  EXPECT_EQ(o.to_device(Device::cpu()).to_vector<float>(), t.to_vector<float>());
  EXPECT_THROW(t + o, DeviceError);
}

// Several GPUs in one process: each device keeps its own memory, stream and generator.
TEST(MultiGpu, TensorsMoveBetweenDevicesAndComputeOnEach) {
  std::vector<Device> gpus;
  for (Device d : available_devices())
    if (d.is_gpu()) gpus.push_back(d);
  if (gpus.size() < 2) GTEST_SKIP() << "needs two GPUs";
  manual_seed(9, gpus[0]);
  Tensor a = Tensor::rand_normal({64, 33}, 0, 1, DType::F32, gpus[0]);
  Tensor b = a.to_device(gpus[1]);
  EXPECT_EQ(b.device(), gpus[1]);
  Tensor on0 = (a * 2).sum(1), on1 = (b * 2).sum(1);
  EXPECT_EQ(on0.to_vector<float>(), on1.to_vector<float>());
  EXPECT_EQ(on1.to_device(gpus[0]).to_vector<float>(), on0.to_vector<float>());
  EXPECT_THROW(a + b, DeviceError);
  manual_seed(9, gpus[1]);
  EXPECT_EQ(Tensor::rand_normal({64, 33}, 0, 1, DType::F32, gpus[1]).to_vector<float>(), a.to_vector<float>());
}

}  // namespace
}  // namespace wick
