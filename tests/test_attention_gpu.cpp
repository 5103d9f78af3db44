// The GPU attention kernel (src/gpu/nn/attention*.cu), called through the backend's nn kernels as
// the front end calls it, against a reference computed here on the host in f64 from the very
// values the device holds: every float dtype, the head dims with tiles of their own and odd ones,
// causal and sliding-window queries, additive masks with hidden keys and fully hidden rows, GQA,
// decoding against short and long caches (split keys), strided views, t_kv = 0 and large
// magnitudes.
// Outputs are poisoned and guarded by the backend's testing aid. Skipped without a GPU.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <gtest/gtest.h>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/nn_kernels.h"
#include "backend/registry.h"
#include "core/checks.h"
#include "wick/wick.h"

namespace wick {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

enum class MaskKind { None, Full, Rows, PerBatch };  // (b,h,tq,tkv); (tq,tkv) and (b,1,tq,tkv) broadcast

enum class Strides { Dense, Thd, FeatureStrided };  // (b,h,t,d); from (b,t,h,d); from (b,h,d,t)

struct Case {
  DType dtype = DType::F32;
  int64_t b = 1, h = 1, h_kv = 1, t_q = 1, t_kv = 1, d = 64;
  bool causal = false;
  int64_t window = 0;
  MaskKind mask = MaskKind::None;
  Strides strides = Strides::Dense;
  double magnitude = 1;  // q and k uniform in (-magnitude, magnitude); v in (-1, 1)

  std::string name() const {
    std::ostringstream s;
    s << dtype << " b" << b << " h" << h << "/" << h_kv << " t_q" << t_q << " t_kv" << t_kv << " d" << d
      << (causal ? " causal" : "") << (window ? " window" + std::to_string(window) : "")
      << (mask != MaskKind::None ? " mask" + std::to_string(static_cast<int>(mask)) : "")
      << (strides != Strides::Dense ? " strides" + std::to_string(static_cast<int>(strides)) : "")
      << (magnitude != 1 ? " magnitude" + std::to_string(magnitude) : "");
    return s.str();
  }
};

Device gpu_device() {
  for (const Device& d : available_devices())
    if (d.type() != DeviceType::Cpu) return d;
  return Device::cpu();
}

std::vector<double> uniform(size_t n, double lo, double hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = u(rng);
  return v;
}

// A (b, heads, t, d) tensor of `dt` on `dev` laid out as `strides` says, and its values.
Tensor make_qkv(int64_t b, int64_t heads, int64_t t, int64_t d, Strides strides, DType dt, Device dev,
                const std::vector<double>& values) {
  switch (strides) {
    case Strides::Thd: {
      // values are given in (b, heads, t, d) order: lay them out as (b, t, heads, d).
      std::vector<double> phys(values.size());
      for (int64_t i0 = 0; i0 < b; ++i0)
        for (int64_t i1 = 0; i1 < heads; ++i1)
          for (int64_t i2 = 0; i2 < t; ++i2)
            for (int64_t i3 = 0; i3 < d; ++i3)
              phys[static_cast<size_t>(((i0 * t + i2) * heads + i1) * d + i3)] =
                  values[static_cast<size_t>(((i0 * heads + i1) * t + i2) * d + i3)];
      return Tensor::from_vector(phys, {b, t, heads, d}, dev).to_dtype(dt).transpose(1, 2);
    }
    case Strides::FeatureStrided: {
      std::vector<double> phys(values.size());
      for (int64_t i0 = 0; i0 < b * heads; ++i0)
        for (int64_t i2 = 0; i2 < t; ++i2)
          for (int64_t i3 = 0; i3 < d; ++i3)
            phys[static_cast<size_t>((i0 * d + i3) * t + i2)] = values[static_cast<size_t>((i0 * t + i2) * d + i3)];
      return Tensor::from_vector(phys, {b, heads, d, t}, dev).to_dtype(dt).transpose(2, 3);
    }
    default: return Tensor::from_vector(values, {b, heads, t, d}, dev).to_dtype(dt);
  }
}

// The values a tensor holds, in logical order, as f64.
std::vector<double> held(const Tensor& t) { return t.to_dtype(DType::F64).to_vector<double>(); }

double tolerance(DType dt) {
  switch (dt) {
    case DType::F64: return 1e-12;
    case DType::F32: return 2e-5;
    case DType::F16: return 2e-3;
    default: return 1e-2;  // bf16: the output's rounding and P rounded to bf16 for the matrix units
  }
}

// Unit roundoff of the accumulation (f32 for halves).
double accumulation_eps(DType dt) { return dt == DType::F64 ? 0x1p-53 : 0x1p-24; }

struct Result {
  int64_t checked = 0, failed = 0;
};

Result run_case(const Case& c, uint64_t seed) {
  Result res;
  const Device dev = gpu_device();
  std::mt19937_64 rng(seed);
  const size_t nq = static_cast<size_t>(c.b * c.h * c.t_q * c.d), nk = static_cast<size_t>(c.b * c.h_kv * c.t_kv * c.d);
  const Tensor q = make_qkv(c.b, c.h, c.t_q, c.d, c.strides, c.dtype, dev, uniform(nq, -c.magnitude, c.magnitude, rng));
  const Tensor k =
      make_qkv(c.b, c.h_kv, c.t_kv, c.d, c.strides, c.dtype, dev, uniform(nk, -c.magnitude, c.magnitude, rng));
  const Tensor v = make_qkv(c.b, c.h_kv, c.t_kv, c.d, c.strides, c.dtype, dev, uniform(nk, -1, 1, rng));
  // The mask: uniform in (-2, 2) with about one key in five hidden (-inf), and every key of query
  // row 1 hidden (its output must be zeros).
  Tensor mask;
  const Shape full{c.b, c.h, c.t_q, c.t_kv};
  if (c.mask != MaskKind::None) {
    const int64_t mb = c.mask == MaskKind::Rows ? 1 : c.b, mh = c.mask == MaskKind::Full ? c.h : 1;
    std::vector<double> mv = uniform(static_cast<size_t>(mb * mh * c.t_q * c.t_kv), -2, 2, rng);
    std::bernoulli_distribution hide(0.2);
    for (size_t i = 0; i < mv.size(); ++i) {
      const int64_t row = static_cast<int64_t>(i) / c.t_kv % c.t_q;
      if (hide(rng) || row == 1) mv[i] = -kInf;
    }
    mask = Tensor::from_vector(mv, {mb, mh, c.t_q, c.t_kv}, dev).to_dtype(c.dtype).broadcast_as(full);
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));

  Backend& backend = ops::backend_of(q);
  const NnKernels* nn = backend.nn();
  EXPECT_TRUE(nn && nn->supports(NnOp::Attention, c.dtype)) << c.name();
  if (!nn) return res;
  const View vq = ops::view_of(q), vk = ops::view_of(k), vv = ops::view_of(v);
  const View vm = mask.defined() ? ops::view_of(mask) : vq;
  const Tensor out = ops::wrap(nn->attention(vq, vk, vv, mask.defined() ? &vm : nullptr, {scale, c.causal, c.window}),
                               {c.b, c.h, c.t_q, c.d}, c.dtype);
  const std::vector<double> got = held(out), hq = held(q), hk = held(k), hv = held(v);
  const std::vector<double> hm = mask.defined() ? held(mask) : std::vector<double>{};

  const int64_t group = c.h / c.h_kv;
  std::vector<double> score(static_cast<size_t>(c.t_kv)), cond(static_cast<size_t>(c.t_kv));
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.h; ++h)
      for (int64_t i = 0; i < c.t_q; ++i) {
        const int64_t pos = c.t_kv - c.t_q + i, kvh = h / group;
        const double* qr = &hq[static_cast<size_t>(((b * c.h + h) * c.t_q + i) * c.d)];
        double mx = -kInf, worst_cond = 0;
        for (int64_t j = 0; j < c.t_kv; ++j) {
          const double* kr = &hk[static_cast<size_t>(((b * c.h_kv + kvh) * c.t_kv + j) * c.d)];
          double dot = 0, abs_dot = 0;
          for (int64_t f = 0; f < c.d; ++f) {
            dot += qr[f] * kr[f];
            abs_dot += std::abs(qr[f] * kr[f]);
          }
          double s = dot * scale;
          if (mask.defined()) s += hm[static_cast<size_t>(((b * c.h + h) * c.t_q + i) * c.t_kv + j)];
          const bool sees = (!c.causal || j <= pos) && (c.window <= 0 || j > pos - c.window);
          score[static_cast<size_t>(j)] = sees ? s : -kInf;
          cond[static_cast<size_t>(j)] = abs_dot * scale;
          if (score[static_cast<size_t>(j)] > mx) mx = score[static_cast<size_t>(j)];
        }
        std::vector<double> want(static_cast<size_t>(c.d), 0.0);
        double sum = 0;
        if (mx > -kInf) {
          for (int64_t j = 0; j < c.t_kv; ++j) {
            const double s = score[static_cast<size_t>(j)];
            if (s == -kInf) continue;
            worst_cond = std::max(worst_cond, cond[static_cast<size_t>(j)]);
            const double w = std::exp(s - mx);
            sum += w;
            const double* vr = &hv[static_cast<size_t>(((b * c.h_kv + kvh) * c.t_kv + j) * c.d)];
            for (int64_t f = 0; f < c.d; ++f) want[static_cast<size_t>(f)] += w * vr[f];
          }
          for (double& x : want) x /= sum;
        }
        // The output's own tolerance, and the error a score of this condition carries into it.
        const double allowed = tolerance(c.dtype) + 16 * accumulation_eps(c.dtype) * worst_cond;
        for (int64_t f = 0; f < c.d; ++f) {
          const double g = got[static_cast<size_t>(((b * c.h + h) * c.t_q + i) * c.d + f)];
          const double w = want[static_cast<size_t>(f)];
          ++res.checked;
          const bool ok = mx == -kInf ? g == 0.0 : std::abs(g - w) <= allowed * std::max(1.0, std::abs(w));
          if (!ok && ++res.failed <= 5)
            ADD_FAILURE() << c.name() << " seed " << seed << ": out[" << b << "," << h << "," << i << "," << f
                          << "] = " << g << ", want " << w << " (allowed " << allowed << ")";
        }
      }
  return res;
}

class AttentionGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu_device().type() == DeviceType::Cpu) GTEST_SKIP() << "no GPU";
    backend_ = &backend_for(gpu_device());
    guards_ = backend_->guard_violations();
    backend_->set_alloc_check({.poison = true, .guard_bytes = 256});
  }
  void TearDown() override {
    if (!backend_) return;
    backend_->synchronize();
    backend_->set_alloc_check({});
    EXPECT_EQ(backend_->guard_violations(), guards_) << "a kernel wrote past the end of an allocation";
  }
  void check(const Case& c) {
    const uint64_t seed = std::hash<std::string>{}(c.name());
    const Result r = run_case(c, seed);
    EXPECT_GT(r.checked, 0) << c.name();
    EXPECT_EQ(r.failed, 0) << c.name() << ": " << r.failed << " of " << r.checked << " elements off";
    checked_ += r.checked;
  }
  ~AttentionGpuTest() override {
    if (checked_) std::printf("[ attention ] %lld elements checked\n", static_cast<long long>(checked_));
  }

  Backend* backend_ = nullptr;
  int64_t guards_ = 0;
  int64_t checked_ = 0;
};

constexpr DType kDtypes[] = {DType::F64, DType::F32, DType::F16, DType::BF16};

TEST_F(AttentionGpuTest, HeadDims) {
  // 150 rows: two blocks of the matrix-unit kernel and three key tiles, the last one partial.
  for (DType dt : kDtypes)
    for (int64_t d : {64, 80, 96, 128, 256, 40, 72})
      for (bool causal : {false, true})
        check({.dtype = dt, .b = 2, .h = 2, .h_kv = 2, .t_q = 150, .t_kv = 150, .d = d, .causal = causal});
}

TEST_F(AttentionGpuTest, QueriesAndKeysOfDifferentLengths) {
  for (DType dt : kDtypes)
    for (bool causal : {false, true}) {
      check({.dtype = dt, .b = 1, .h = 2, .h_kv = 2, .t_q = 37, .t_kv = 200, .d = 64, .causal = causal});
      // More queries than keys: under causal the first rows see nothing (zeros).
      check({.dtype = dt, .b = 1, .h = 2, .h_kv = 2, .t_q = 200, .t_kv = 37, .d = 64, .causal = causal});
      check({.dtype = dt, .b = 1, .h = 1, .h_kv = 1, .t_q = 1, .t_kv = 1, .d = 128, .causal = causal});
    }
}

TEST_F(AttentionGpuTest, SlidingWindow) {
  for (DType dt : kDtypes)
    for (bool causal : {false, true}) {
      check({.dtype = dt, .b = 1, .h = 2, .h_kv = 2, .t_q = 150, .t_kv = 150, .d = 64, .causal = causal, .window = 16});
      check(
          {.dtype = dt, .b = 1, .h = 2, .h_kv = 1, .t_q = 40, .t_kv = 300, .d = 128, .causal = causal, .window = 100});
      check({.dtype = dt, .b = 1, .h = 8, .h_kv = 2, .t_q = 1, .t_kv = 700, .d = 128, .causal = causal, .window = 300});
    }
}

TEST_F(AttentionGpuTest, MaskWithHiddenKeysAndHiddenRows) {
  for (DType dt : kDtypes)
    for (MaskKind m : {MaskKind::Full, MaskKind::Rows, MaskKind::PerBatch})
      for (bool causal : {false, true}) {
        check({.dtype = dt, .b = 2, .h = 2, .h_kv = 2, .t_q = 70, .t_kv = 90, .d = 64, .causal = causal, .mask = m});
        check({.dtype = dt, .b = 2, .h = 8, .h_kv = 2, .t_q = 2, .t_kv = 600, .d = 128, .causal = causal, .mask = m});
      }
}

TEST_F(AttentionGpuTest, GroupedQueryHeads) {
  for (DType dt : kDtypes)
    for (int64_t h_kv : {8, 2, 1}) {
      check({.dtype = dt, .b = 2, .h = 8, .h_kv = h_kv, .t_q = 100, .t_kv = 100, .d = 128, .causal = true});
      check({.dtype = dt, .b = 2, .h = 8, .h_kv = h_kv, .t_q = 3, .t_kv = 300, .d = 64, .causal = true});
    }
}

TEST_F(AttentionGpuTest, DecodeAgainstALongCache) {
  // One query row per head against 1000+ keys: the keys split across blocks, then combined.
  for (DType dt : kDtypes)
    for (bool causal : {false, true}) {
      check({.dtype = dt, .b = 2, .h = 32, .h_kv = 8, .t_q = 1, .t_kv = 1500, .d = 128, .causal = causal});
      check({.dtype = dt, .b = 1, .h = 4, .h_kv = 4, .t_q = 1, .t_kv = 4100, .d = 64, .causal = causal});
      check({.dtype = dt, .b = 1, .h = 8, .h_kv = 2, .t_q = 2, .t_kv = 1100, .d = 96, .causal = causal});
      check({.dtype = dt, .b = 1, .h = 2, .h_kv = 1, .t_q = 1, .t_kv = 2000, .d = 256, .causal = causal});
    }
}

TEST_F(AttentionGpuTest, DecodeAgainstAShortCache) {
  // 2 to 15 key ranges (64 to 480 keys), as a decode step of a short context splits them: each
  // range's part staged through shared memory, then merged; with masks, a window and an odd head
  // dim.
  for (DType dt : {DType::F16, DType::BF16}) {
    for (int64_t t_kv : {64, 100, 256, 480}) {
      const MaskKind m = t_kv == 100 ? MaskKind::PerBatch : MaskKind::None;
      check({.dtype = dt, .b = 2, .h = 32, .h_kv = 8, .t_q = 1, .t_kv = t_kv, .d = 128, .causal = true, .mask = m});
    }
    check({.dtype = dt, .b = 1, .h = 8, .h_kv = 2, .t_q = 1, .t_kv = 300, .d = 64, .causal = true, .window = 100});
    check({.dtype = dt, .b = 3, .h = 4, .h_kv = 1, .t_q = 1, .t_kv = 200, .d = 80, .mask = MaskKind::Full});
  }
}

TEST_F(AttentionGpuTest, StridedViews) {
  for (DType dt : kDtypes)
    for (Strides s : {Strides::Thd, Strides::FeatureStrided}) {
      check({.dtype = dt, .b = 2, .h = 4, .h_kv = 2, .t_q = 130, .t_kv = 130, .d = 128, .causal = true, .strides = s});
      check({.dtype = dt, .b = 2, .h = 2, .h_kv = 2, .t_q = 70, .t_kv = 70, .d = 80, .strides = s});
      check({.dtype = dt, .b = 2, .h = 8, .h_kv = 2, .t_q = 1, .t_kv = 900, .d = 128, .causal = true, .strides = s});
      check({.dtype = dt, .b = 1, .h = 2, .h_kv = 2, .t_q = 20, .t_kv = 50, .d = 72, .causal = true, .strides = s});
    }
}

TEST_F(AttentionGpuTest, NoKeysGiveZeros) {
  for (DType dt : kDtypes) {
    check({.dtype = dt, .b = 2, .h = 4, .h_kv = 2, .t_q = 5, .t_kv = 0, .d = 64});
    check({.dtype = dt, .b = 1, .h = 2, .h_kv = 2, .t_q = 130, .t_kv = 0, .d = 128, .causal = true});
  }
}

TEST_F(AttentionGpuTest, LargeMagnitudes) {
  // Scores in the hundreds: exp overflows anywhere the running maximum is not subtracted.
  for (DType dt : kDtypes)
    for (int64_t d : {64, 128}) {
      check({.dtype = dt, .b = 1, .h = 2, .h_kv = 1, .t_q = 150, .t_kv = 150, .d = d, .causal = true, .magnitude = 30});
      check({.dtype = dt, .b = 1, .h = 4, .h_kv = 1, .t_q = 1, .t_kv = 1200, .d = d, .magnitude = 30});
    }
}

TEST_F(AttentionGpuTest, HeadDimsPastTheTiles) {
  // Past 256 (halves) the rows kernel; past 128 packs of 16 bytes the generic kernel.
  for (DType dt : kDtypes) {
    check({.dtype = dt, .b = 1, .h = 2, .h_kv = 1, .t_q = 20, .t_kv = 40, .d = 300, .causal = true});
    check({.dtype = dt, .b = 1, .h = 2, .h_kv = 2, .t_q = 1, .t_kv = 600, .d = 300});
  }
  check({.dtype = DType::F32, .b = 1, .h = 2, .h_kv = 1, .t_q = 9, .t_kv = 30, .d = 520, .causal = true});
  check({.dtype = DType::BF16, .b = 1, .h = 1, .h_kv = 1, .t_q = 9, .t_kv = 30, .d = 1030, .causal = true});
}

}  // namespace
}  // namespace wick
