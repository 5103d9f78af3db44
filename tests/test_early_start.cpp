// Kernels that start early (GpuBackend::launch_early: on NVIDIA GPUs from sm_90, a kernel of a
// recorded graph placed on the device while the kernel before it still runs) against the same ops
// run eagerly with early start off: each op reads what the kernel just before it wrote, with fresh
// inputs before every replay, and must give the same bits. And recordings share their working
// memory (an arena) correctly. Skipped without a GPU.
#include <cstdint>
#include <gtest/gtest.h>
#include <random>
#include <vector>

#include "backend/registry.h"
#include "wick/graph.h"
#include "wick/nn.h"
#include "wick/quant.h"
#include "wick/wick.h"

namespace wick {
namespace {

Device gpu_device() {
  for (const Device& d : available_devices())
    if (d.type() != DeviceType::Cpu) return d;
  return Device::cpu();
}

std::vector<float> normal(size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

class EarlyStartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu_device().type() == DeviceType::Cpu) GTEST_SKIP() << "no GPU";
    backend_ = &backend_for(gpu_device());
    backend_->set_alloc_check({.poison = true, .guard_bytes = 256});
  }
  void TearDown() override {
    if (!backend_) return;
    backend_->synchronize();
    backend_->set_alloc_check({});
    backend_->set_option("early_start", "on");
  }
  Backend* backend_ = nullptr;
};

TEST_F(EarlyStartTest, TheOptionTakesOnAndOff) {
  EXPECT_TRUE(backend_->set_option("early_start", "off"));
  EXPECT_TRUE(backend_->set_option("early_start", "on"));
  EXPECT_FALSE(backend_->set_option("early_start", "soon"));
}

// Inputs of a decode step's widths (rows of 4096 values); the kernel before each op writes all
// `rows` rows, of which the op may read only the first.
struct Inputs {
  Tensor x, residual, weight, table, ids;
  quant::QTensor w4;
};

Inputs inputs(Device dev, int64_t rows) {
  std::mt19937_64 rng(20261201);
  constexpr int64_t kWidth = 4096, kVocab = 512;
  Inputs in;
  in.x =
      Tensor::from_vector(normal(static_cast<size_t>(rows * kWidth), rng), {rows, kWidth}, dev).to_dtype(DType::BF16);
  in.residual =
      Tensor::from_vector(normal(static_cast<size_t>(rows * kWidth), rng), {rows, kWidth}, dev).to_dtype(DType::BF16);
  in.weight = Tensor::from_vector(normal(kWidth, rng), {kWidth}, dev).to_dtype(DType::BF16);
  in.table = Tensor::from_vector(normal(static_cast<size_t>(kVocab * kWidth), rng), {kVocab, kWidth}, dev)
                 .to_dtype(DType::BF16);
  std::vector<int64_t> ids(static_cast<size_t>(rows));
  for (int64_t& id : ids) id = static_cast<int64_t>(rng() % kVocab);
  in.ids = Tensor::from_vector(ids, {rows}, dev);
  in.w4 = quant::quantize(Tensor::from_vector(normal(size_t{1024} * kWidth, rng), {1024, kWidth}, Device::cpu()),
                          quant::QType::Q4_K)
              .to_device(dev);
  return in;
}

// Each op after a kernel that writes its input: rms_norm, add_rms_norm, silu_mul (the dense
// elementwise kernel), a gather of rows, and products of 1 and 8 rows by Q4_K weights.
std::vector<Tensor> chain(const Inputs& in) {
  std::vector<Tensor> out;
  const Tensor doubled = in.x * 2.0;
  out.push_back(nn::rms_norm(doubled, in.weight, 1e-5));
  const nn::AddRmsNorm added = nn::add_rms_norm(in.x + 1.0, in.residual, in.weight, 1e-5);
  out.push_back(added.sum);
  out.push_back(added.normed);
  out.push_back(nn::silu_mul(in.x * 3.0, in.residual));
  out.push_back((in.table * 1.5).index_select(in.ids, 0));
  for (int64_t m : {int64_t{1}, int64_t{8}}) {
    const Tensor scaled = in.x * 0.5;
    out.push_back(quant::qmatmul(scaled.narrow(0, 0, m), in.w4));
  }
  return out;
}

void expect_same_bits(const std::vector<Tensor>& got, const std::vector<Tensor>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    // bf16 to f32 is exact: equal floats are equal bits (a NaN, which none should be, differs).
    const std::vector<float> g = got[i].to_dtype(DType::F32).to_vector<float>();
    const std::vector<float> w = want[i].to_dtype(DType::F32).to_vector<float>();
    ASSERT_EQ(g.size(), w.size());
    size_t differ = 0;
    for (size_t j = 0; j < g.size(); ++j) differ += g[j] != w[j];
    EXPECT_EQ(differ, 0u) << what << ": result " << i << " differs in " << differ << " of " << g.size() << " values";
  }
}

// Recorded, each op starts early; eagerly, none does. Before each replay the inputs change, so an
// op that read its input before the kernel writing it ended would read the last replay's values
// (the recording's temporaries live in its arena, not poisoned: a poisoning memset between two
// kernels would keep the second from starting early).
TEST_F(EarlyStartTest, EachOpReadsWhatTheKernelBeforeItWrote) {
  Inputs in = inputs(gpu_device(), 2048);
  backend_->set_alloc_check({});
  std::vector<Tensor> recorded;
  for (const Tensor& t : chain(in)) recorded.push_back(Tensor::zeros(t.shape(), t.dtype(), gpu_device()));
  const Graph g = Graph::record(gpu_device(), [&] {
    const std::vector<Tensor> r = chain(in);
    for (size_t i = 0; i < r.size(); ++i) recorded[i].copy_from(r[i]);
  });
  std::mt19937_64 rng(11);
  for (int round = 0; round < 4; ++round) {
    for (Tensor* t : {&in.x, &in.residual, &in.table})
      t->copy_from(Tensor::from_vector(normal(static_cast<size_t>(t->numel()), rng), t->shape(), gpu_device())
                       .to_dtype(t->dtype()));
    g.replay();
    ASSERT_TRUE(backend_->set_option("early_start", "off"));
    const std::vector<Tensor> want = chain(in);
    ASSERT_TRUE(backend_->set_option("early_start", "on"));
    expect_same_bits(recorded, want, "recorded");
  }
}

// A recording's allocations come from an arena every recording shares (GpuBackend::RecordArena):
// graphs whose temporaries overlap in that arena, replayed in turn with fresh inputs, each give what
// the same ops give eagerly; so does one larger than the first arena (its temporaries from the pool),
// and the one recorded after it (in an arena grown to hold it).
TEST_F(EarlyStartTest, RecordingsShareTheirWorkingMemory) {
  backend_->set_alloc_check({});
  const Device dev = gpu_device();
  std::mt19937_64 rng(7);
  auto fresh = [&](int64_t n) { return Tensor::from_vector(normal(static_cast<size_t>(n), rng), {n}, dev); };
  auto first = [](const Tensor& x) { return ((x * 2.0 + 1.0).exp() * x).sum(0, true); };
  auto second = [](const Tensor& x) { return ((x - 0.5).abs().sqrt() + x * x).max(0, true); };
  for (const int64_t n : {int64_t{1} << 16, int64_t{40} << 20}) {  // 40 Mi f32 values: 160 MiB a temporary
    Tensor x = fresh(n), y = fresh(n);
    Tensor out1 = Tensor::zeros({1}, DType::F32, dev), out2 = Tensor::zeros({1}, DType::F32, dev);
    const Graph g1 = Graph::record(dev, [&] { out1.copy_from(first(x)); });
    const Graph g2 = Graph::record(dev, [&] { out2.copy_from(second(y)); });
    for (int round = 0; round < 3; ++round) {
      x.copy_from(fresh(n));
      y.copy_from(fresh(n));
      g1.replay();
      g2.replay();
      EXPECT_EQ(out1.to_vector<float>(), first(x).to_vector<float>()) << n << " values, round " << round;
      EXPECT_EQ(out2.to_vector<float>(), second(y).to_vector<float>()) << n << " values, round " << round;
    }
  }
}

}  // namespace
}  // namespace wick
