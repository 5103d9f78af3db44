// Rotary position embeddings (nn::rope, rope_i, rope_thd, rope_tables) on every device: turns by
// quarter and half turns worked out by hand, rotations computed here in f64 from the definition,
// the relations between the three layouts, the tables' known values, Llama 3.1's frequency
// scaling band by band, decoding offsets, strided views and bad arguments.
#include <cmath>
#include <limits>
#include <numbers>

#include "test_util.h"
#include "wick/nn.h"

namespace wick {
namespace {

constexpr DType kFloat[] = {DType::F64, DType::F32, DType::F16, DType::BF16};

class RopeTest : public ::testing::TestWithParam<Device> {
 protected:
  Device dev() const { return GetParam(); }
  Tensor make(const std::vector<double>& v, const Shape& s, DType dt = DType::F64) const {
    return Tensor::from_vector(v, s, dev()).to_dtype(dt);
  }
};

std::vector<double> values(const Tensor& t) { return t.to_dtype(DType::F64).to_vector<double>(); }

void expect_near(const Tensor& got, const std::vector<double>& want, double tol) {
  const std::vector<double> g = values(got);
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_NEAR(g[i], want[i], tol) << "element " << i << " (" << got.dtype() << ")";
}

// Bit for bit (NaN equal to NaN): every path computes the same products and sums in one order.
void expect_same(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.shape(), want.shape());
  ASSERT_EQ(got.dtype(), want.dtype());
  const std::vector<double> g = values(got), w = values(want);
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << "element " << i;
    } else {
      EXPECT_EQ(g[i], w[i]) << "element " << i << " (" << got.dtype() << ")";
    }
  }
}

// One head of 4 features at positions 0 and 1. Position 0 turns pair 0 by 0 and pair 1 by a half
// turn; position 1 turns pair 0 by a quarter turn and pair 1 by three quarters: (a, b) becomes
// (a, b), (-a, -b), (-b, a) and (b, -a). Exact in every dtype.
TEST_P(RopeTest, QuarterTurnsByHand) {
  for (DType dt : kFloat) {
    const Tensor x = make({1, 2, 3, 4, 5, 6, 7, 8}, {1, 1, 2, 4}, dt);
    const Tensor cos = make({1, -1, 0, 0}, {2, 2}, dt), sin = make({0, 0, 1, -1}, {2, 2}, dt);
    // rope: pairs (x0, x2) and (x1, x3).
    const Tensor r = nn::rope(x, cos, sin);
    EXPECT_EQ(r.dtype(), dt);
    EXPECT_EQ(r.shape(), Shape({1, 1, 2, 4}));
    EXPECT_EQ(values(r), (std::vector<double>{1, -2, 3, -4, -7, 8, 5, -6}));
    // rope_i: pairs (x0, x1) and (x2, x3).
    EXPECT_EQ(values(nn::rope_i(x, cos, sin)), (std::vector<double>{1, 2, -3, -4, -6, 5, 8, -7}));
    // rope_thd on (b, t, h, d) with one head: the same rows.
    EXPECT_EQ(values(nn::rope_thd(x.reshape({1, 2, 1, 4}), cos, sin)), values(r));
  }
}

// x (1, 2, 3, 4) turned by tables of theta 10000 at positions 7, 8, 9, against the definition in
// f64: pair i of position p turns by p * 10000^(-2i / 4).
TEST_P(RopeTest, MatchesTheDefinition) {
  const int64_t h = 2, t = 3, d = 4, offset = 7;
  std::vector<double> xs(static_cast<size_t>(h * t * d));
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(1.7 * static_cast<double>(i) + 0.3) * 2;
  for (bool interleaved : {false, true}) {
    std::vector<double> want(xs.size());
    for (int64_t row = 0; row < h * t; ++row) {
      const double p = static_cast<double>(offset + row % t);
      for (int64_t i = 0; i < d / 2; ++i) {
        const double angle = p * std::pow(10000.0, -2.0 * static_cast<double>(i) / d);
        const int64_t j = interleaved ? 2 * i : i, k = interleaved ? 2 * i + 1 : i + d / 2;
        const double a = xs[static_cast<size_t>(row * d + j)], b = xs[static_cast<size_t>(row * d + k)];
        want[static_cast<size_t>(row * d + j)] = a * std::cos(angle) - b * std::sin(angle);
        want[static_cast<size_t>(row * d + k)] = a * std::sin(angle) + b * std::cos(angle);
      }
    }
    for (DType dt : kFloat) {
      const nn::RopeTables tables = nn::rope_tables(d, t, 10000, offset, dt, dev());
      const Tensor x = make(xs, {1, h, t, d}, dt);
      const Tensor got = interleaved ? nn::rope_i(x, tables.cos, tables.sin) : nn::rope(x, tables.cos, tables.sin);
      const double tol = dt == DType::BF16 ? 8e-2 : dt == DType::F16 ? 1e-2 : dt == DType::F32 ? 1e-5 : 1e-12;
      expect_near(got, want, tol);
    }
  }
}

// rope_i on x is rope on x with each head's features de-interleaved (evens, then odds), its result
// interleaved back.
TEST_P(RopeTest, InterleavedIsHalvesOfTheDeinterleavedHead) {
  for (DType dt : kFloat) {
    const Tensor x = Tensor::rand_normal({2, 3, 5, 8}, 0, 2, DType::F32, dev()).to_dtype(dt);
    const Tensor cos = Tensor::rand_uniform({5, 4}, -1, 1, DType::F32, dev()).to_dtype(dt);
    const Tensor sin = Tensor::rand_uniform({5, 4}, -1, 1, DType::F32, dev()).to_dtype(dt);
    const Tensor halves = cat({x.slice(3, 0, 8, 2), x.slice(3, 1, 8, 2)}, 3);
    const Tensor r = nn::rope(halves, cos, sin);
    const Tensor back = stack({r.narrow(3, 0, 4), r.narrow(3, 4, 4)}, 4).reshape({2, 3, 5, 8});
    expect_same(nn::rope_i(x, cos, sin), back);
  }
}

// rope_thd on (b, t, h, d) is rope on its (b, h, t, d) transpose.
TEST_P(RopeTest, ThdIsRopeOfTheTranspose) {
  for (DType dt : kFloat) {
    const Tensor x = Tensor::rand_normal({2, 7, 3, 16}, 0, 2, DType::F32, dev()).to_dtype(dt);
    const nn::RopeTables tables = nn::rope_tables(16, 7, 10000, 0, dt, dev());
    const Tensor want = nn::rope(x.transpose(1, 2), tables.cos, tables.sin).transpose(1, 2).contiguous();
    expect_same(nn::rope_thd(x, tables.cos, tables.sin), want);
    expect_same(nn::rope_thd(x.transpose(1, 2).contiguous().transpose(1, 2), tables.cos, tables.sin), want);
  }
}

// Any view gives the bits of its contiguous copy (on a GPU: the 16-byte pack path and the thread
// per pair agree).
TEST_P(RopeTest, StridedViewsGiveTheContiguousResult) {
  for (DType dt : kFloat) {
    const Tensor base = Tensor::rand_normal({2, 9, 4, 130}, 0, 2, DType::F32, dev()).to_dtype(dt);
    const nn::RopeTables tables = nn::rope_tables(64, 9, 10000, 0, dt, dev());
    const nn::RopeTables longer = nn::rope_tables(64, 12, 10000, 0, dt, dev());
    const Tensor cos_view = longer.cos.narrow(0, 3, 9), sin_view = longer.sin.narrow(0, 3, 9);
    for (const Tensor& view : {base.narrow(3, 0, 128).transpose(1, 2), base.narrow(3, 2, 128).transpose(1, 2),
                               base.slice(3, 1, 129, 2).narrow(3, 0, 64).transpose(1, 2),
                               base.narrow(3, 0, 128).permute({0, 2, 1, 3}).narrow(1, 1, 3)}) {
      const Tensor x = view.narrow(3, 0, 64);
      const int64_t t = x.dim(2);
      const Tensor c = tables.cos.narrow(0, 0, t), s = tables.sin.narrow(0, 0, t);
      expect_same(nn::rope(x, c, s), nn::rope(x.contiguous(), c.contiguous(), s.contiguous()));
      expect_same(nn::rope_i(x, c, s), nn::rope_i(x.contiguous(), c, s));
      expect_same(
          nn::rope(x, cos_view.narrow(0, 0, t), sin_view.narrow(0, 0, t)),
          nn::rope(x.contiguous(), cos_view.narrow(0, 0, t).contiguous(), sin_view.narrow(0, 0, t).contiguous()));
    }
    // Tables broadcast over t (one angle for every position) and transposed.
    const Tensor x = base.narrow(3, 0, 16).contiguous();
    const Tensor c = tables.cos.narrow(0, 4, 1).narrow(1, 0, 8).broadcast_as({9, 8});
    const Tensor s = tables.sin.narrow(0, 4, 1).narrow(1, 0, 8).broadcast_as({9, 8});
    expect_same(nn::rope_thd(x, c, s), nn::rope_thd(x, c.contiguous(), s.contiguous()));
    const Tensor ct = c.contiguous().t().contiguous().t(), st = s.contiguous().t().contiguous().t();
    expect_same(nn::rope_i(x.transpose(1, 2), ct, st), nn::rope_i(x.transpose(1, 2), c.contiguous(), s.contiguous()));
  }
}

TEST_P(RopeTest, TablesKnownValues) {
  // theta 10000, head_dim 4: inverse frequencies 1 and 10000^(-1/2) = 0.01.
  const nn::RopeTables t = nn::rope_tables(4, 3, 10000, 0, DType::F64, dev());
  EXPECT_EQ(t.cos.shape(), Shape({3, 2}));
  EXPECT_EQ(t.sin.shape(), Shape({3, 2}));
  EXPECT_EQ(t.cos.dtype(), DType::F64);
  EXPECT_EQ(t.cos.device(), dev());
  expect_near(t.cos, {1, 1, std::cos(1.0), std::cos(0.01), std::cos(2.0), std::cos(0.02)}, 1e-15);
  expect_near(t.sin, {0, 0, std::sin(1.0), std::sin(0.01), std::sin(2.0), std::sin(0.02)}, 1e-15);
  // Position 0 is exact in every dtype; the dtype is the one asked for.
  for (DType dt : kFloat) {
    const nn::RopeTables z = nn::rope_tables(8, 1, 500000, 0, dt, dev());
    EXPECT_EQ(z.cos.dtype(), dt);
    EXPECT_EQ(values(z.cos), std::vector<double>(4, 1.0));
    EXPECT_EQ(values(z.sin), std::vector<double>(4, 0.0));
  }
  // Computed in f64 and rounded once: f32 tables are the f64 ones rounded.
  const nn::RopeTables f = nn::rope_tables(128, 50, 500000, 100000, DType::F32, dev());
  const nn::RopeTables g = nn::rope_tables(128, 50, 500000, 100000, DType::F64, dev());
  expect_same(f.cos, g.cos.to_dtype(DType::F32));
  expect_same(f.sin, g.sin.to_dtype(DType::F32));
}

// head_dim 6, theta 100: inverse frequencies 1, 100^(-1/3) and 100^(-2/3), wavelengths 2 pi / f
// of 6.28, 29.2 and 135.4. With original_max_position 64, low_freq_factor 1 and high_freq_factor
// 4 the bands are below 64 / 4 = 16 (kept), above 64 / 1 = 64 (divided by the factor 8), and
// between (blended): one frequency in each.
TEST_P(RopeTest, Llama3ScalingBandByBand) {
  const nn::RopeScaling s{.factor = 8, .low_freq_factor = 1, .high_freq_factor = 4, .original_max_position = 64};
  const double f0 = 1, f1 = std::pow(100.0, -1.0 / 3), f2 = std::pow(100.0, -2.0 / 3);
  // The middle one: smooth = (64 / wavelength - 1) / (4 - 1), the blend (1 - smooth) f / 8 + smooth f.
  const double smooth = (64 / (2 * std::numbers::pi / f1) - 1) / 3;
  const double want[3] = {f0, (1 - smooth) * f1 / 8 + smooth * f1, f2 / 8};
  // The same numbers worked out on paper: f1 = 0.21544, smooth = 0.39816, blend 0.10199; f2 / 8 = 0.0058020.
  EXPECT_NEAR(smooth, 0.398163, 1e-6);
  EXPECT_NEAR(want[1], 0.1019894, 1e-7);
  EXPECT_NEAR(want[2], 0.0058020, 1e-7);
  const int64_t p = 1000;  // a far position, so that a wrong frequency shows
  const nn::RopeTables t = nn::rope_tables(6, 1, 100, p, DType::F64, dev(), s);
  std::vector<double> c, sn;
  for (double f : want) {
    c.push_back(std::cos(static_cast<double>(p) * f));
    sn.push_back(std::sin(static_cast<double>(p) * f));
  }
  expect_near(t.cos, c, 1e-9);
  expect_near(t.sin, sn, 1e-9);
  // Llama 3.1 8B's own settings: the highest frequency is kept, the lowest divided by 8.
  const nn::RopeTables l = nn::rope_tables(128, 2, 500000, 0, DType::F64, dev(), nn::RopeScaling{});
  const std::vector<double> ls = values(l.sin);
  EXPECT_NEAR(ls[64], std::sin(1.0), 1e-15);
  EXPECT_NEAR(ls[127], std::sin(std::pow(500000.0, -126.0 / 128) / 8), 1e-18);
}

// Decoding: the tables of t positions from offset k are rows k.. of a longer table, bit for bit.
TEST_P(RopeTest, DecodeOffsetIsRowsOfTheLongerTable) {
  for (DType dt : kFloat) {
    const nn::RopeTables all = nn::rope_tables(64, 20, 10000, 0, dt, dev());
    for (int64_t k : {0, 1, 13, 19}) {
      const nn::RopeTables part = nn::rope_tables(64, 20 - k, 10000, k, dt, dev());
      expect_same(part.cos, all.cos.narrow(0, k, 20 - k));
      expect_same(part.sin, all.sin.narrow(0, k, 20 - k));
    }
    const nn::RopeTables one = nn::rope_tables(64, 1, 10000, 19, dt, dev(), nn::RopeScaling{});
    const nn::RopeTables scaled = nn::rope_tables(64, 20, 10000, 0, dt, dev(), nn::RopeScaling{});
    expect_same(one.cos, scaled.cos.narrow(0, 19, 1));
  }
}

TEST_P(RopeTest, EmptyTensors) {
  const nn::RopeTables t = nn::rope_tables(8, 0, 10000, 0, DType::F32, dev());
  EXPECT_EQ(t.cos.shape(), Shape({0, 4}));
  EXPECT_EQ(nn::rope(Tensor::zeros({2, 3, 0, 8}, DType::F32, dev()), t.cos, t.sin).shape(), Shape({2, 3, 0, 8}));
  EXPECT_EQ(nn::rope_thd(Tensor::zeros({2, 0, 3, 8}, DType::F32, dev()), t.cos, t.sin).shape(), Shape({2, 0, 3, 8}));
  const nn::RopeTables u = nn::rope_tables(8, 5, 10000, 0, DType::BF16, dev());
  EXPECT_EQ(nn::rope_i(Tensor::zeros({0, 3, 5, 8}, DType::BF16, dev()), u.cos, u.sin).shape(), Shape({0, 3, 5, 8}));
  const Tensor none = Tensor::zeros({5, 0}, DType::F32, dev());
  EXPECT_EQ(nn::rope(Tensor::zeros({1, 2, 5, 0}, DType::F32, dev()), none, none).shape(), Shape({1, 2, 5, 0}));
}

TEST_P(RopeTest, BadArguments) {
  const Tensor x = Tensor::ones({2, 3, 5, 8}, DType::F32, dev());
  const Tensor c = Tensor::ones({5, 4}, DType::F32, dev());
  WICK_EXPECT_ERROR(nn::rope(Tensor::ones({3, 5, 8}, DType::F32, dev()), c, c), ShapeError, "rope: ", "rank 4",
                    "[3, 5, 8]");
  WICK_EXPECT_ERROR(nn::rope(Tensor::ones({2, 3, 5, 7}, DType::F32, dev()), c, c), ShapeError, "rope: ", "even",
                    "[2, 3, 5, 7]");
  WICK_EXPECT_ERROR(nn::rope(x, Tensor::ones({4, 4}, DType::F32, dev()), c), ShapeError, "rope: ", "cos", "[4, 4]",
                    "[5, 4]");
  WICK_EXPECT_ERROR(nn::rope_i(x, c, Tensor::ones({5, 8}, DType::F32, dev())), ShapeError, "rope_i: ", "sin", "[5, 8]");
  WICK_EXPECT_ERROR(nn::rope(x, Tensor::ones({20}, DType::F32, dev()), c), ShapeError, "rope: ", "cos", "[20]");
  // rope_thd reads t from dim 1 of (b, t, h, d).
  WICK_EXPECT_ERROR(nn::rope_thd(x, c, c), ShapeError, "rope_thd: ", "[3, 4]", "[5, 4]");
  WICK_EXPECT_ERROR(nn::rope(x, c.to_dtype(DType::BF16), c), DTypeError, "rope: ", "cos", "bf16", "f32");
  WICK_EXPECT_ERROR(nn::rope(x.to_dtype(DType::I32), c, c), DTypeError, "rope: ", "i32");
  WICK_EXPECT_ERROR(nn::rope_i(x.to_dtype(DType::F8E4M3), c, c), DTypeError, "rope_i: ", "f8e4m3");
  WICK_EXPECT_ERROR(nn::rope(Tensor(), c, c), Error, "rope: ");
  WICK_EXPECT_ERROR(nn::rope(x, c, Tensor()), Error, "rope: ");
  if (!dev().is_cpu()) {
    WICK_EXPECT_ERROR(nn::rope(x, Tensor::ones({5, 4}), c), DeviceError, "rope: ");
  }

  const auto tables = [&](int64_t head_dim, int64_t t, double theta, int64_t offset = 0) {
    return nn::rope_tables(head_dim, t, theta, offset, DType::F32, dev());
  };
  WICK_EXPECT_ERROR(tables(7, 4, 1e4), ShapeError, "rope_tables: ", "head_dim", "7");
  WICK_EXPECT_ERROR(tables(0, 4, 1e4), ShapeError, "rope_tables: ", "head_dim", "0");
  WICK_EXPECT_ERROR(tables(-2, 4, 1e4), ShapeError, "rope_tables: ", "head_dim", "-2");
  WICK_EXPECT_ERROR(tables(8, -1, 1e4), ShapeError, "rope_tables: ", "t ", "-1");
  WICK_EXPECT_ERROR(tables(8, 4, 0), ShapeError, "rope_tables: ", "theta", "0");
  WICK_EXPECT_ERROR(tables(8, 4, -1e4), ShapeError, "rope_tables: ", "theta");
  WICK_EXPECT_ERROR(tables(8, 4, std::nan("")), ShapeError, "rope_tables: ", "theta");
  WICK_EXPECT_ERROR(tables(8, 4, std::numeric_limits<double>::infinity()), ShapeError, "rope_tables: ", "theta");
  WICK_EXPECT_ERROR(tables(8, 4, 1e4, -3), ShapeError, "rope_tables: ", "offset", "-3");
  WICK_EXPECT_ERROR(tables(8, 4, 1e4, std::numeric_limits<int64_t>::max() - 2), ShapeError,
                    "rope_tables: ", "positions");
  WICK_EXPECT_ERROR(tables(8, std::numeric_limits<int64_t>::max() / 2, 1e4), ShapeError, "rope_tables: ", "bytes");
  // Terabytes of tables: wick's own OutOfMemoryError before any is asked for, not the allocator's.
  WICK_EXPECT_ERROR(tables(8, int64_t{1} << 40, 1e4), OutOfMemoryError, "rope_tables: ", "[1099511627776, 4]");
  WICK_EXPECT_ERROR(nn::rope_tables(8, 4, 1e4, 0, DType::I64, dev()), DTypeError, "rope_tables: ", "i64");
  WICK_EXPECT_ERROR(nn::rope_tables(8, 4, 1e4, 0, DType::F8E4M3, dev()), DTypeError, "rope_tables: ", "f8e4m3");
  const auto scaled = [&](nn::RopeScaling s) { return nn::rope_tables(8, 4, 1e4, 0, DType::F32, dev(), s); };
  WICK_EXPECT_ERROR(scaled({.factor = 0}), ShapeError, "rope_tables: ", "factor", "0");
  WICK_EXPECT_ERROR(scaled({.factor = std::nan("")}), ShapeError, "rope_tables: ", "factor");
  WICK_EXPECT_ERROR(scaled({.low_freq_factor = 4, .high_freq_factor = 4}), ShapeError,
                    "rope_tables: ", "low_freq_factor", "4");
  WICK_EXPECT_ERROR(scaled({.low_freq_factor = 0}), ShapeError, "rope_tables: ", "low_freq_factor");
  WICK_EXPECT_ERROR(scaled({.original_max_position = 0}), ShapeError, "rope_tables: ", "original_max_position");
}

INSTANTIATE_TEST_SUITE_P(Devices, RopeTest, ::testing::ValuesIn(test::devices()), test::device_name);

}  // namespace
}  // namespace wick
