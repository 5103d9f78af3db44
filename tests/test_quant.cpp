// The GGUF block formats (include/wick/quant.h): the format table, known blocks, QTensor, and
// quantize / dequantize / qmatmul on every device. The bytes-for-bytes comparison with ggml's own
// tools is tests/quant/check_gguf.py (scripts/quant-check); parity compares every backend with
// the host fallback.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "backend/registry.h"
#include "cpu/cpu_backend.h"
#include "cpu/quant/amx.h"
#include "cpu/quant/qdot.h"
#include "cpu/quant/superblock.h"
#include "kernels/quant.h"
#include "test_util.h"

namespace wick::test {
namespace {

using quant::QTensor;
using quant::QType;

class QuantTest : public ::testing::TestWithParam<Device> {};

std::vector<float> random_values(int64_t n, uint64_t seed, float scale = 1.f) {
  std::vector<float> v(static_cast<size_t>(n));
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const double u = static_cast<double>(s >> 11) / 9007199254740992.0;  // [0, 1)
    x = static_cast<float>((u * 2 - 1) * scale);
  }
  return v;
}

double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  return err / norm;
}

// relative_error of two tensors of any dtype and device.
double relative_error(const Tensor& got, const Tensor& want) {
  auto host = [](const Tensor& t) {
    return t.to_dtype(DType::F32).to_device(Device::cpu()).contiguous().reshape({t.numel()}).to_vector<float>();
  };
  return relative_error(host(got), host(want));
}

// The bits of a tensor's values as f32, for exact comparison; every NaN as one pattern (a GPU's
// arithmetic does not keep NaN payloads as the host's does).
std::vector<uint32_t> bits_of(const Tensor& t) {
  const std::vector<float> v = t.to_device(Device::cpu()).to_dtype(DType::F32).contiguous().reshape({t.numel()}).to_vector<float>();
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  for (size_t i = 0; i < v.size(); ++i)
    if (std::isnan(v[i])) b[i] = 0x7fc00000u;
  return b;
}

TEST(QuantFormats, MatchGgml) {
  struct Row {
    QType q;
    const char* name;
    int ggml;
    int64_t values, bytes;
  };
  const Row rows[] = {{QType::Q4_0, "q4_0", 2, 32, 18},   {QType::Q4_1, "q4_1", 3, 32, 20},
                      {QType::Q5_0, "q5_0", 6, 32, 22},   {QType::Q5_1, "q5_1", 7, 32, 24},
                      {QType::Q8_0, "q8_0", 8, 32, 34},   {QType::Q8_1, "q8_1", 9, 32, 36},
                      {QType::Q2_K, "q2_k", 10, 256, 84}, {QType::Q3_K, "q3_k", 11, 256, 110},
                      {QType::Q4_K, "q4_k", 12, 256, 144}, {QType::Q5_K, "q5_k", 13, 256, 176},
                      {QType::Q6_K, "q6_k", 14, 256, 210}, {QType::Q8_K, "q8_k", 15, 256, 292}};
  for (const Row& r : rows) {
    EXPECT_EQ(quant::qtype_name(r.q), r.name);
    EXPECT_EQ(quant::parse_qtype(r.name), r.q);
    EXPECT_EQ(quant::ggml_type(r.q), r.ggml);
    EXPECT_EQ(quant::from_ggml_type(r.ggml), r.q);
    EXPECT_EQ(quant::block_values(r.q), r.values);
    EXPECT_EQ(quant::block_bytes(r.q), r.bytes);
    EXPECT_EQ(quant::row_bytes(r.q, 4 * r.values), 4 * r.bytes);
  }
  EXPECT_EQ(quant::parse_qtype("Q4_K"), QType::Q4_K);
  EXPECT_EQ(quant::parse_qtype("q4_k_m"), std::nullopt);
  EXPECT_EQ(quant::from_ggml_type(0), std::nullopt);  // f32 is a dtype, not a block format
  WICK_EXPECT_ERROR(quant::row_bytes(QType::Q4_K, 100), ShapeError, "q4_k", "256", "100");
}

// One Q4_0 block worked by hand: the value of largest magnitude is -8 d exactly, d = max / -8.
TEST(QuantFormats, Q4_0BlockByHand) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i - 16) * 0.5f;  // -8 .. 7.5
  const QTensor q = quant::quantize(Tensor::from_vector(x, {1, 32}), QType::Q4_0);
  const std::vector<uint8_t> b = q.bytes().reshape({18}).to_vector<uint8_t>();
  // d = -8 / -8 = 1: f16 0x3c00; value v maps to trunc(v + 8.5), capped at 15.
  EXPECT_EQ(b[0], 0x00);
  EXPECT_EQ(b[1], 0x3c);
  for (int j = 0; j < 16; ++j) {
    const int lo = std::min(15, static_cast<int>(x[static_cast<size_t>(j)] + 8.5f));
    const int hi = std::min(15, static_cast<int>(x[static_cast<size_t>(j + 16)] + 8.5f));
    EXPECT_EQ(b[static_cast<size_t>(2 + j)], lo | hi << 4) << "byte " << j;
  }
  const std::vector<float> back = quant::dequantize(q).reshape({32}).to_vector<float>();
  for (int j = 0; j < 32; ++j) {
    const int level = std::min(15, static_cast<int>(x[static_cast<size_t>(j)] + 8.5f));
    EXPECT_EQ(back[static_cast<size_t>(j)], static_cast<float>(level - 8)) << j;
  }
}

// Q8_0 of a block holding 127 and its negatives: d = 1, the values come back exactly.
TEST(QuantFormats, Q8_0BlockByHand) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i % 2 ? 127 - i : i - 127);
  const QTensor q = quant::quantize(Tensor::from_vector(x, {1, 32}), QType::Q8_0);
  const std::vector<uint8_t> b = q.bytes().reshape({34}).to_vector<uint8_t>();
  EXPECT_EQ(b[0] | b[1] << 8, 0x3c00);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(static_cast<int8_t>(b[static_cast<size_t>(2 + i)]), x[static_cast<size_t>(i)]);
  EXPECT_EQ(quant::dequantize(q).reshape({32}).to_vector<float>(), x);
}

// Reconstruction error of each format on uniform values: a bound per bit width, which a wrong
// unpacking (a swapped nibble, a misplaced scale) exceeds by orders of magnitude.
TEST_P(QuantTest, RoundTripErrorFitsTheBitWidth) {
  const int64_t rows = 6, cols = 512;
  const std::vector<float> x = random_values(rows * cols, 7, 3.f);
  const Tensor w = Tensor::from_vector(x, {rows, cols}, GetParam());
  const std::pair<QType, double> bounds[] = {{QType::Q2_K, 8e-2}, {QType::Q3_K, 2.5e-2}, {QType::Q4_0, 6e-3},
                                             {QType::Q4_1, 4e-3}, {QType::Q4_K, 3e-3},   {QType::Q5_0, 1.5e-3},
                                             {QType::Q5_1, 1e-3}, {QType::Q5_K, 8e-4},   {QType::Q6_K, 2e-4},
                                             {QType::Q8_0, 2e-5}, {QType::Q8_1, 2e-5},   {QType::Q8_K, 2e-5}};
  for (auto [q, bound] : bounds) {
    const QTensor qt = quant::quantize(w, q);
    EXPECT_EQ(qt.device(), GetParam());
    EXPECT_EQ(qt.nbytes(), quant::row_bytes(q, cols) * rows);
    const Tensor back = quant::dequantize(qt);
    EXPECT_EQ(back.shape(), Shape({rows, cols}));
    const double err = relative_error(back.to_device(Device::cpu()).reshape({rows * cols}).to_vector<float>(), x);
    EXPECT_LT(err, bound) << q;
    EXPECT_GT(err, 0) << q;
  }
}

// Every device dequantizes the same blocks to the same bits, in f32 and rounded to the halves; the
// blocks are random bytes, so every bit pattern of the scales (inf and NaN too) is met.
TEST_P(QuantTest, DequantizeIsBitExactAcrossDevicesAndDtypes) {
  for (QType q : quant::kAllQTypes) {
    const int64_t rows = 3, cols = 512;
    const int64_t n = quant::row_bytes(q, cols) * rows;
    std::vector<uint8_t> bytes(static_cast<size_t>(n));
    const std::vector<float> r = random_values(n, 11 + static_cast<int>(q), 128.f);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(static_cast<int>(r[i] + 128.f) & 0xff);
    const QTensor on_cpu = QTensor::from_blocks(q, rows, cols, bytes.data(), n);
    const QTensor here = on_cpu.to_device(GetParam());
    const Tensor want = quant::dequantize(on_cpu);
    EXPECT_EQ(bits_of(quant::dequantize(here)), bits_of(want)) << q;
    for (DType dt : {DType::F16, DType::BF16}) {
      const Tensor got = quant::dequantize(here, dt);
      EXPECT_EQ(got.dtype(), dt);
      EXPECT_EQ(bits_of(got), bits_of(want.to_dtype(dt))) << q << " " << dt;
    }
  }
}

// qmatmul against the product of the exact dequantized weight: x's rounding to 8 bits per 32
// values bounds the difference on the backends that round it.
TEST_P(QuantTest, QmatmulMatchesTheDequantizedProduct) {
  const Device dev = GetParam();
  const int64_t n = 40, k = 512;
  const Tensor w = Tensor::from_vector(random_values(n * k, 3), {n, k}, dev);
  for (QType q : {QType::Q4_0, QType::Q5_1, QType::Q8_0, QType::Q2_K, QType::Q3_K, QType::Q4_K, QType::Q6_K}) {
    const QTensor qw = quant::quantize(w, q);
    const Tensor wf = quant::dequantize(qw);
    for (int64_t m : {1, 5, 16, 17, 70}) {
      for (DType dt : {DType::F32, DType::BF16}) {
        const Tensor x = Tensor::from_vector(random_values(m * k, 100 + m), {m, k}, dev).to_dtype(dt);
        const Tensor got = quant::qmatmul(x, qw);
        ASSERT_EQ(got.shape(), Shape({m, n}));
        EXPECT_EQ(got.dtype(), dt);
        const Tensor want = x.to_dtype(DType::F32).matmul(wf.t());
        const double err = relative_error(got, want);
        EXPECT_LT(err, dt == DType::BF16 ? 2e-4 : 1e-4) << q << " m " << m << " " << dt;
      }
    }
  }
}

// Q4_K's rows at every length the GPU's one-row kernel steps through (8 blocks a step: one block,
// a step and a part, past 4096 values, where x is rounded once for all blocks), with a few or many
// rows per group of lanes and every instantiated count of x's rows. Over so few values the error of
// x's rounding does not average out as in the test above (up to 6e-4 here on the CPU), and a bf16
// result holds each value only to 2^-9 of itself; a wrong group or scale errs by far more.
TEST_P(QuantTest, Q4KProductsOfEveryRowLength) {
  const Device dev = GetParam();
  for (int64_t k : {256, 2816, 4352}) {
    for (int64_t n : {1, 33, 517}) {
      const Tensor w = Tensor::from_vector(random_values(n * k, 11 + n + k), {n, k}, dev);
      const QTensor qw = quant::quantize(w, QType::Q4_K);
      const Tensor wf = quant::dequantize(qw);
      for (int64_t m : {1, 2, 3, 16}) {
        for (DType dt : {DType::F32, DType::BF16}) {
          const Tensor x = Tensor::from_vector(random_values(m * k, 200 + m), {m, k}, dev).to_dtype(dt);
          const Tensor got = quant::qmatmul(x, qw);
          const Tensor want = x.to_dtype(DType::F32).matmul(wf.t());
          const double err = relative_error(got, want);
          EXPECT_LT(err, dt == DType::BF16 ? 4e-3 : 2e-3) << "k " << k << " n " << n << " m " << m << " " << dt;
        }
      }
    }
  }
}

// Q4_K products of 4 to 32 rows over several hundred 128-row tiles (the last one partial). On a GPU
// with the 8-bit matrix units, 4 rows are streamed: each block of the grid takes an equal run of the
// tiles' steps, most tiles are shared by two blocks, some lie whole inside one, and a second kernel
// adds the shared tiles' partial sums; more rows take tiles whole. Each product against the exact
// dequantized one. A GPU's case: the CPU takes the paths of the tests above.
TEST_P(QuantTest, Q4KProductsOfManyTiles) {
  const Device dev = GetParam();
  if (dev == Device::cpu()) GTEST_SKIP() << "the CPU's products of these rows are tested above";
  const int64_t n = 128 * 420 - 17, k = 1024;
  const Tensor w = Tensor::from_vector(random_values(n * k, 21), {n, k}, dev);
  const QTensor qw = quant::quantize(w, QType::Q4_K);
  const Tensor wf = quant::dequantize(qw);
  for (int64_t m : {4, 13, 32}) {
    for (DType dt : {DType::F32, DType::BF16}) {
      const Tensor x = Tensor::from_vector(random_values(m * k, 300 + m), {m, k}, dev).to_dtype(dt);
      const Tensor got = quant::qmatmul(x, qw);
      const Tensor want = x.to_dtype(DType::F32).matmul(wf.t());
      const double err = relative_error(got, want);
      EXPECT_LT(err, dt == DType::BF16 ? 2e-4 : 1e-4) << "m " << m << " " << dt;
    }
  }
}

// A product's bits do not depend on where x starts in memory: x at offsets of 0 to 7 values (on a
// GPU, x is rounded with 16-byte loads where it is aligned and value by value where not), rounded by
// each block (k 2816) or once for all blocks (k 4352), through Q4_K's kernel and the staged one
// (Q8_0).
TEST_P(QuantTest, ProductsDoNotDependOnXAlignment) {
  const Device dev = GetParam();
  const int64_t n = 33;
  for (QType q : {QType::Q4_K, QType::Q8_0}) {
    for (int64_t k : {2816, 4352}) {
      const QTensor qw = quant::quantize(Tensor::from_vector(random_values(n * k, 40 + k), {n, k}, dev), q);
      for (int64_t m : {1, 2}) {
        const std::vector<float> values = random_values(m * k, 500 + m);
        for (DType dt : {DType::F32, DType::BF16}) {
          std::vector<uint32_t> aligned;
          for (int64_t at = 0; at < 8; ++at) {
            std::vector<float> v(static_cast<size_t>(at), 7.f);
            v.insert(v.end(), values.begin(), values.end());
            const Tensor x =
                Tensor::from_vector(v, {at + m * k}, dev).to_dtype(dt).narrow(0, at, m * k).reshape({m, k});
            const std::vector<uint32_t> got = bits_of(quant::qmatmul(x, qw));
            if (at == 0)
              aligned = got;
            else
              EXPECT_EQ(got, aligned) << quant::qtype_name(q) << " k " << k << " m " << m << " " << dt << " at " << at;
          }
        }
      }
    }
  }
}

// k4_pair_scale_min gives k4_scale_min's integers for both groups of every pair, on random bytes.
TEST(QuantFormats, PairScalesAreK4Scales) {
  namespace kq = kernels::quant;
  for (uint64_t seed = 0; seed < 256; ++seed) {
    const std::vector<float> r = random_values(12, seed + 3);
    uint8_t s[12];
    for (int i = 0; i < 12; ++i) s[i] = static_cast<uint8_t>(std::fabs(r[static_cast<size_t>(i)]) * 255.f);
    uint32_t words[3];
    std::memcpy(words, s, sizeof words);
    for (int p = 0; p < 4; ++p) {
      int sc[2], m[2];
      kq::k4_pair_scale_min(words, p, sc, m);
      for (int i = 0; i < 2; ++i) {
        int want_sc, want_m;
        kq::k4_scale_min(s, 2 * p + i, want_sc, want_m);
        EXPECT_EQ(sc[i], want_sc) << "group " << 2 * p + i << " seed " << seed;
        EXPECT_EQ(m[i], want_m) << "group " << 2 * p + i << " seed " << seed;
      }
    }
  }
}

// block_scales gives group_scale's values bit for bit, on random bytes as blocks of every format.
TEST(QuantFormats, BlockScalesAreGroupScales) {
  namespace kq = kernels::quant;
  for (QType q : quant::kAllQTypes) {
    kq::dispatch_qtype(q, [&]<QType Q>() {
      using F = kq::Format<Q>;
      for (uint64_t seed = 0; seed < 64; ++seed) {
        typename F::Block b;
        const std::vector<float> r = random_values(sizeof b, seed + 7);
        auto* bytes = reinterpret_cast<uint8_t*>(&b);
        for (size_t i = 0; i < sizeof b; ++i) bytes[i] = static_cast<uint8_t>(std::fabs(r[i]) * 255.f);
        kq::GroupScale all[F::kGroups];
        kq::block_scales<Q>(b, all);
        for (int g = 0; g < F::kGroups; ++g) {
          const kq::GroupScale one = kq::group_scale<Q>(b, g);
          EXPECT_EQ(std::memcmp(&one, &all[g], sizeof one), 0) << q << " group " << g << " seed " << seed;
        }
      }
    });
  }
}

// Random Q4_K, Q5_K or Q6_K blocks (every bit of the packed values, scales, minimums and high bits
// reached), their f16 d (and dmin) set to 1/16: n rows of k values.
QTensor random_k_blocks(QType q, int64_t n, int64_t k, uint64_t seed) {
  const int64_t nbytes = n * quant::row_bytes(q, k), block = quant::row_bytes(q, 256);
  std::vector<uint8_t> bytes(static_cast<size_t>(nbytes));
  const std::vector<float> r = random_values(nbytes, seed);
  for (int64_t i = 0; i < nbytes; ++i)
    bytes[static_cast<size_t>(i)] = static_cast<uint8_t>(std::fabs(r[static_cast<size_t>(i)]) * 255.f);
  // Q6_K's d is its last two bytes; Q4_K's and Q5_K's d and dmin its first four.
  const std::vector<int64_t> halves = q == QType::Q6_K ? std::vector<int64_t>{block - 2} : std::vector<int64_t>{0, 2};
  for (int64_t b = 0; b < nbytes / block; ++b)
    for (int64_t at : halves) {
      bytes[static_cast<size_t>(b * block + at)] = 0;
      bytes[static_cast<size_t>(b * block + at + 1)] = 0x2c;
    }
  return QTensor(q, n, k, Tensor::from_vector(bytes, {nbytes}));
}

// Each of the CPU's SIMD kernels that this machine runs takes the same integer dot products as the
// portable loop; only the order of the float sums differs. Every format, every row count of one
// call (more rows go through them in tiles, or through the GEMM without them).
TEST(QuantCpu, SimdAndPortableLoopsAgree) {
  namespace qdot = cpu::qdot;
  const int64_t n = 19, k = 512 + 32;  // an odd count of 32-value blocks per row
  const Tensor w = Tensor::from_vector(random_values(n * k, 5), {n, k});
  auto product = [&](const Tensor& x, const QTensor& qw, qdot::Isa isa) {
    const qdot::Isa was = qdot::set_isa_limit(isa);
    std::vector<float> y = quant::qmatmul(x, qw).reshape({x.shape()[0] * n}).to_vector<float>();
    qdot::set_isa_limit(was);
    return y;
  };
  // Each SIMD kernel this machine runs against the portable loop, for each count of rows of x.
  auto agree = [&](const QTensor& qw, const std::vector<int64_t>& rows, uint64_t seed, const char* what) {
    const int64_t k = qw.cols();
    for (int64_t m : rows) {
      const Tensor x = Tensor::from_vector(random_values(m * k, seed + static_cast<uint64_t>(m)), {m, k});
      const std::vector<float> portable = product(x, qw, qdot::Isa::None);
      for (qdot::Isa isa : {qdot::Isa::Neon, qdot::Isa::Avx2, qdot::Isa::Avx512Vnni}) {
        // The kernels of this machine's architecture up to its best (aarch64's are checked under
        // emulation by scripts/arm-check).
        const qdot::Isa was = qdot::set_isa_limit(isa);
        const bool runs = qdot::active_isa() == isa;
        qdot::set_isa_limit(was);
        if (!runs) continue;
        EXPECT_LT(relative_error(product(x, qw, isa), portable), 1e-10)
            << qw.qtype() << what << " m " << m << " isa " << static_cast<int>(isa);
      }
    }
  };
  for (QType q : quant::kAllQTypes)
    if (k % quant::block_values(q) == 0) agree(quant::quantize(w, q), {1, 2, 3, 5, 8}, 200, "");
  // Rows of a multiple of 16 blocks of 32 values, which Q4_0's and Q8_0's several-blocks-per-vector
  // kernel takes.
  const int64_t k16 = 1024;
  const Tensor w16 = Tensor::from_vector(random_values(n * k16, 7), {n, k16});
  for (QType q : {QType::Q4_0, QType::Q8_0}) agree(quant::quantize(w16, q), {1, 2, 3, 4, 5, 6, 7, 8}, 250, "");
  // Q4_K, Q5_K and Q6_K blocks of random bytes.
  for (QType q : {QType::Q4_K, QType::Q5_K, QType::Q6_K})
    agree(random_k_blocks(q, n, 512, 9), {1, 3, 8}, 350, " random blocks");
  // The K-quants, whose rows here hold 256-value blocks.
  const int64_t kk = 512;
  const Tensor wk = Tensor::from_vector(random_values(n * kk, 6), {n, kk});
  for (QType q : {QType::Q2_K, QType::Q3_K, QType::Q4_K, QType::Q5_K, QType::Q6_K, QType::Q8_K})
    agree(quant::quantize(wk, q), {1, 4, 7, 8}, 300, "");
}

// The CPU's rounding of x (in vectors where the machine has AVX-512) gives quantize_act's bits, and its offset
// bytes in either order: random units of many scales, units of exact halves (x * (1 / d) = n + 0.5 with d = 1,
// where roundf goes away from zero), zeros.
TEST(QuantCpu, RoundRowIsQuantizeAct) {
  namespace kq = kernels::quant;
  const int64_t units = 64;
  std::vector<float> x = random_values(units * kq::kUnit, 21, 4.f);
  for (int64_t u = 0; u < units; ++u) {
    float* unit = x.data() + u * kq::kUnit;
    if (u % 4 == 1) {
      for (int i = 0; i < kq::kUnit; ++i) unit[i] = std::round(unit[i] * 30.f) + 0.5f;  // halves
      unit[u % kq::kUnit] = u % 8 == 1 ? 127.f : -127.f;                                // d = 1
    } else if (u % 4 == 2) {
      for (int i = 0; i < kq::kUnit; ++i) unit[i] *= std::ldexp(1.f, static_cast<int>(u % 40) - 20);
    } else if (u == 3) {
      std::fill(unit, unit + kq::kUnit, 0.f);
    }
  }
  for (cpu::qdot::Isa isa : {cpu::qdot::Isa::None, cpu::qdot::Isa::Avx512Vnni}) {
    if (isa > cpu::qdot::best_isa()) continue;
    cpu::qdot::RoundedX r(1, units * kq::kUnit);
    std::fill(r.q.begin(), r.q.end(), 99);
    std::fill(r.qsum.begin(), r.qsum.end(), -1);
    const cpu::qdot::Isa was = cpu::qdot::set_isa_limit(isa);
    cpu::qdot::round_row(x.data(), units * kq::kUnit, r, 0);
    cpu::qdot::set_isa_limit(was);
    const std::vector<int8_t>& q = r.q;
    const std::vector<float>&d = r.d, &s = r.s, &sum = r.sum;
    int halves = 0;
    for (int64_t u = 0; u < units; ++u) {
      int8_t want_q[kq::kUnit];
      const kq::ActScale a = kq::quantize_act(x.data() + u * kq::kUnit, want_q);
      const std::string at = "isa " + std::to_string(static_cast<int>(isa)) + " unit " + std::to_string(u);
      EXPECT_EQ(std::memcmp(want_q, q.data() + u * kq::kUnit, kq::kUnit), 0) << at;
      EXPECT_EQ(std::bit_cast<uint32_t>(a.d), std::bit_cast<uint32_t>(d[u])) << at;
      EXPECT_EQ(std::bit_cast<uint32_t>(a.s0), std::bit_cast<uint32_t>(s[2 * u])) << at;
      EXPECT_EQ(std::bit_cast<uint32_t>(a.s1), std::bit_cast<uint32_t>(s[2 * u + 1])) << at;
      EXPECT_EQ(std::bit_cast<uint32_t>(a.s0 + a.s1), std::bit_cast<uint32_t>(sum[u])) << at;
      int qsum[2] = {0, 0};
      for (int i = 0; i < kq::kUnit; ++i) qsum[i / 16] += want_q[i];
      EXPECT_EQ(qsum[0], r.qsum[2 * u]) << at;
      EXPECT_EQ(qsum[1], r.qsum[2 * u + 1]) << at;
      for (int i = 0; i < kq::kUnit; ++i)
        halves += a.d == 1.f && x[u * kq::kUnit + i] != std::round(x[u * kq::kUnit + i]);
    }
    EXPECT_GT(halves, 100);  // the halves were reached
    // The offset bytes, q + 128, in each order the row kernels read.
    for (cpu::qdot::Offset order : {cpu::qdot::Offset::Natural, cpu::qdot::Offset::Halves}) {
      cpu::qdot::RoundedX o(1, units * kq::kUnit, order);
      std::fill(o.u.begin(), o.u.end(), 7);
      cpu::qdot::set_isa_limit(isa);
      cpu::qdot::round_row(x.data(), units * kq::kUnit, o, 0);
      cpu::qdot::set_isa_limit(was);
      ASSERT_EQ(o.u.size(), q.size());
      for (size_t i = 0; i < q.size(); ++i) {
        // Halves: byte i of a 128-byte group is byte 16 * h + e of unit j, for i = 64 * h + 16 * j + e.
        const size_t group = i / 128 * 128, h = i % 128 / 64, j = i % 64 / 16, e = i % 16;
        const size_t from = order == cpu::qdot::Offset::Natural ? i : group + 32 * j + 16 * h + e;
        ASSERT_EQ(o.u[i], static_cast<uint8_t>(q[from] + 128)) << "isa " << static_cast<int>(isa) << " byte " << i;
      }
    }
  }
}

// More rows of x than one tile go through panels of 16 weight rows (AVX-512 VNNI), the rows past the
// last whole panel through the row kernels: each row of the result equals that row of x alone
// through the portable loop, up to the order of the float sums. Every format; tiles of x of every
// size from 1 to 8 rows.
TEST(QuantCpu, PanelsAgreeWithThePortableLoop) {
  namespace qdot = cpu::qdot;
  if (qdot::best_isa() < qdot::Isa::Avx512Vnni) GTEST_SKIP() << "no AVX-512 VNNI here: the panel kernel does not run";
  const int64_t n = 2 * qdot::kPanelRows + 5;
  for (QType q : quant::kAllQTypes) {
    const int64_t k = quant::block_values(q) == 32 ? 512 + 32 : 512;
    const Tensor w = Tensor::from_vector(random_values(n * k, 15), {n, k});
    const QTensor qw = quant::quantize(w, q);
    for (int64_t m : {9, 16, 23}) {
      const Tensor x = Tensor::from_vector(random_values(m * k, 500 + m), {m, k});
      const std::vector<float> got = quant::qmatmul(x, qw).reshape({m * n}).to_vector<float>();
      std::vector<float> want;
      const qdot::Isa was = qdot::set_isa_limit(qdot::Isa::None);
      for (int64_t t = 0; t < m; ++t) {
        const std::vector<float> row = quant::qmatmul(x.narrow(0, t, 1), qw).reshape({n}).to_vector<float>();
        want.insert(want.end(), row.begin(), row.end());
      }
      qdot::set_isa_limit(was);
      EXPECT_LT(relative_error(got, want), 1e-10) << q << " m " << m;
    }
  }
}

// Without SIMD kernels the CPU takes up to 8 rows in its portable loop and more through dequantize
// and the GEMM: both within the rounding tolerance of the exact product.
TEST(QuantCpu, PortablePathsMatchTheDequantizedProduct) {
  const int64_t n = 24, k = 512;
  const Tensor w = Tensor::from_vector(random_values(n * k, 8), {n, k});
  const cpu::qdot::Isa was = cpu::qdot::set_isa_limit(cpu::qdot::Isa::None);
  for (QType q : {QType::Q4_0, QType::Q8_0, QType::Q4_K, QType::Q6_K}) {
    const QTensor qw = quant::quantize(w, q);
    const Tensor wf = quant::dequantize(qw);
    for (int64_t m : {3, 13}) {
      const Tensor x = Tensor::from_vector(random_values(m * k, 400 + m), {m, k});
      const std::vector<float> got = quant::qmatmul(x, qw).reshape({m * n}).to_vector<float>();
      EXPECT_LT(relative_error(got, x.matmul(wf.t()).reshape({m * n}).to_vector<float>()), 1e-4) << q << " m " << m;
      if (m > cpu::qdot::kMaxRows && was != cpu::qdot::Isa::None && cpu::qdot::best_isa() != cpu::qdot::Isa::None) {
        // The limit took effect: the GEMM path leaves x unrounded, unlike the kernels.
        cpu::qdot::set_isa_limit(was);
        const std::vector<float> simd = quant::qmatmul(x, qw).reshape({m * n}).to_vector<float>();
        cpu::qdot::set_isa_limit(cpu::qdot::Isa::None);
        EXPECT_GT(relative_error(simd, got), 1e-9) << q;
      }
    }
  }
  cpu::qdot::set_isa_limit(was);
}

// With AVX2's kernels (no AVX-512 VNNI), from CpuQuantKernels::kAvx2GemmFromRows rows of x on the
// product of a format other than Q4_K, Q5_K and Q6_K is the dequantized weight's GEMM (x unrounded: the exact product's
// bits up to the GEMM's order), and below it the panels' (x rounded to 8 bits: visibly apart from it).
TEST(QuantCpu, Avx2TakesTheGemmFromManyRows) {
  if (cpu::qdot::best_isa() < cpu::qdot::Isa::Avx2) GTEST_SKIP() << "no AVX2 here";
  const int64_t n = 40, k = 256, from = cpu::CpuQuantKernels::kAvx2GemmFromRows;
  const Tensor w = Tensor::from_vector(random_values(n * k, 11), {n, k});
  const cpu::qdot::Isa was = cpu::qdot::set_isa_limit(cpu::qdot::Isa::Avx2);
  for (QType q : {QType::Q4_0, QType::Q8_0, QType::Q3_K}) {
    const QTensor qw = quant::quantize(w, q);
    const Tensor wf = quant::dequantize(qw);
    for (int64_t m : {from - 1, from, from + 37}) {
      const Tensor x = Tensor::from_vector(random_values(m * k, 500 + m), {m, k});
      const std::vector<float> got = quant::qmatmul(x, qw).reshape({m * n}).to_vector<float>();
      const double apart = relative_error(got, x.matmul(wf.t()).reshape({m * n}).to_vector<float>());
      if (m < from)
        EXPECT_GT(apart, 1e-7) << q << " m " << m;
      else
        EXPECT_LT(apart, 1e-6) << q << " m " << m;
    }
  }
  cpu::qdot::set_isa_limit(was);
}

// On CUDA (whose GPUs wick runs have the 8-bit matrix units), Q4_K products on the matrix units
// round x per super-block as the CPU's super-block kernel does, and sum each super-block's groups in
// integers: cpu/quant/superblock.h's plain loop over the same rounding, up to the order of the float
// sums (a normalised squared error of 1e-9; the CPU's portable loop, which rounds x per 32 values,
// is 1.3e-5 to 2.1e-5 away on these values). Random blocks (every scale and minimum), rows of a
// partial tile and several: 4 rows are streamed, up to 64 take one launch's tiles of 8 rows, more
// come in chunks of 64 (the backend's "qmatmul" option set to "tiles" takes every m to that kernel,
// whatever the rows its automatic choice gives it).
TEST_P(QuantTest, Q4KProductsOfFewRowsRoundXPerSuperBlock) {
  namespace sb = cpu::superblock;
  const Device dev = GetParam();
  if (dev.type() != DeviceType::Cuda) GTEST_SKIP() << "the matrix units' kernel is CUDA's";
  Backend& backend = backend_for(dev);
  ASSERT_TRUE(backend.set_option("qmatmul", "tiles"));
  for (int64_t k : {int64_t{256}, int64_t{2048}}) {
    const int64_t n = 128 * 40 + 77;
    const QTensor qw = random_k_blocks(QType::Q4_K, n, k, 90 + static_cast<uint64_t>(k));
    const std::vector<uint8_t> bytes = qw.bytes().reshape({qw.nbytes()}).to_vector<uint8_t>();
    const QTensor here = qw.to_device(dev);
    for (int64_t m : {4, 13, 16, 32, 47, 64, 150}) {
      const std::vector<float> xv = random_values(m * k, 800 + static_cast<uint64_t>(m), 2.f);
      sb::RoundedX rx(m, k);
      for (int64_t t = 0; t < m; ++t) sb::round_row(xv.data() + t * k, k, rx, t);
      std::vector<float> want(static_cast<size_t>(m * n));
      sb::rows_portable(QType::Q4_K, bytes.data(), 0, n, k, rx, m, want.data(), n);
      const Tensor got = quant::qmatmul(Tensor::from_vector(xv, {m, k}, dev), here);
      EXPECT_LT(relative_error(got.reshape({m * n}).to_device(Device::cpu()).to_vector<float>(), want), 1e-9)
          << "k " << k << " m " << m;
    }
  }
  EXPECT_TRUE(backend.set_option("qmatmul", "library"));
}

// x rounded per super-block (cpu/quant/superblock.h), in AVX2 vectors where the machine has them and
// in the plain loop, as the rule says: d = max |x| / 127 over 256 values, q = x * (1 / d) rounded
// halves away from zero, s = d times each 32 q's sum, sum16 each 16 q's. Random super-blocks of many scales,
// super-blocks of exact halves (d = 1), and zeros.
TEST(QuantCpu, SuperblockRoundingIsTheRule) {
  namespace sb = cpu::superblock;
  const int64_t blocks = 24, k = blocks * sb::kValues;
  std::vector<float> x = random_values(k, 31, 3.f);
  for (int64_t b = 0; b < blocks; ++b) {
    float* v = x.data() + b * sb::kValues;
    if (b % 3 == 1) {
      for (int64_t i = 0; i < sb::kValues; ++i) v[i] = std::round(v[i] * 40.f) + 0.5f;  // halves
      v[b % sb::kValues] = b % 2 ? 127.f : -127.f;                                      // d = 1
    } else if (b % 3 == 2) {
      for (int64_t i = 0; i < sb::kValues; ++i) v[i] *= std::ldexp(1.f, static_cast<int>(b) - 12);
    } else if (b == 3) {
      std::fill(v, v + sb::kValues, 0.f);
    }
  }
  for (cpu::qdot::Isa isa : {cpu::qdot::Isa::None, cpu::qdot::Isa::Avx2}) {
    if (isa > cpu::qdot::best_isa()) continue;
    sb::RoundedX r(2, k);
    std::fill(r.q.begin(), r.q.end(), 99);
    std::fill(r.s.begin(), r.s.end(), -1.f);
    std::fill(r.sum16.begin(), r.sum16.end(), int16_t{-1});
    const cpu::qdot::Isa was = cpu::qdot::set_isa_limit(isa);
    sb::round_row(x.data(), k, r, 1);
    cpu::qdot::set_isa_limit(was);
    int halves = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      const float* v = x.data() + b * sb::kValues;
      float amax = 0.f;
      for (int64_t i = 0; i < sb::kValues; ++i) amax = std::max(amax, std::fabs(v[i]));
      const float d = amax / 127.f, id = d == 0.f ? 0.f : 1.f / d;
      const std::string at = "isa " + std::to_string(static_cast<int>(isa)) + " block " + std::to_string(b);
      ASSERT_EQ(std::bit_cast<uint32_t>(d), std::bit_cast<uint32_t>(r.d[static_cast<size_t>(blocks + b)])) << at;
      for (int64_t g = 0; g < sb::kValues / sb::kGroup; ++g) {
        int sum = 0, sum16[2] = {0, 0};
        for (int64_t i = g * sb::kGroup; i < (g + 1) * sb::kGroup; ++i) {
          const float scaled = v[i] * id;
          const int want = static_cast<int>(scaled < 0 ? -std::floor(-scaled + 0.5f) : std::floor(scaled + 0.5f));
          halves += d == 1.f && scaled != std::round(scaled) && scaled - std::trunc(scaled) != 0.f &&
                    std::fabs(scaled - std::trunc(scaled)) == 0.5f;
          ASSERT_EQ(want, r.q[static_cast<size_t>(k + b * sb::kValues + i)]) << at << " value " << i;
          sum += want;
          sum16[(i / 16) % 2] += want;
        }
        for (int64_t h = 0; h < 2; ++h)
          EXPECT_EQ(sum16[h], r.sum16[static_cast<size_t>((k + b * sb::kValues) / 16 + 2 * g + h)]) << at;
        EXPECT_EQ(std::bit_cast<uint32_t>(d * static_cast<float>(sum)),
                  std::bit_cast<uint32_t>(r.s[static_cast<size_t>((k + b * sb::kValues) / sb::kGroup + g)]))
            << at;
      }
    }
    EXPECT_GT(halves, 100);  // the halves were reached
    EXPECT_TRUE(std::all_of(r.q.begin(), r.q.begin() + k, [](int8_t q) { return q == 99; }));  // row 0 untouched
    EXPECT_TRUE(std::all_of(r.sum16.begin(), r.sum16.begin() + k / 16, [](int16_t v) { return v == -1; }));
  }
}

// The super-block kernel (AVX2) equals its plain loop up to the order of the float sums, for every
// tile of 1 to 4 rows of x, an odd row at the end of a pair, and runs of rows; and the plain loop
// is the product of the dequantized weight with x within the rounding of x to 8 bits per 256.
TEST(QuantCpu, SuperblockKernelAgreesWithItsLoop) {
  namespace sb = cpu::superblock;
  for (QType q : {QType::Q4_K, QType::Q5_K, QType::Q6_K}) {
    for (int64_t k : {int64_t{512}, int64_t{2048}}) {
      const int64_t n = 2 * 123 + 1;  // a run of 128 KiB is 113 rows of 2048 Q4_K values
      const QTensor qw = random_k_blocks(q, n, k, 40 + static_cast<uint64_t>(k));
      const Tensor wf = quant::dequantize(qw);
      const std::vector<uint8_t> bytes = qw.bytes().reshape({qw.nbytes()}).to_vector<uint8_t>();
      const uint8_t* w = bytes.data();
      for (int64_t m : {1, 2, 3, 4, 5, 7, 9, 13}) {
        const std::vector<float> xv = random_values(m * k, 600 + static_cast<uint64_t>(m));
        sb::RoundedX rx(m, k);
        for (int64_t t = 0; t < m; ++t) sb::round_row(xv.data() + t * k, k, rx, t);
        std::vector<float> want(static_cast<size_t>(m * n), std::nanf("")), got = want;
        sb::rows_portable(q, w, 0, n, k, rx, m, want.data(), n);
        const Tensor x = Tensor::from_vector(xv, {m, k});
        EXPECT_LT(relative_error(want, x.matmul(wf.t()).reshape({m * n}).to_vector<float>()), 1e-4)
            << q << " k " << k << " m " << m;
        if (cpu::qdot::best_isa() < cpu::qdot::Isa::Avx2) continue;
        sb::rows(q, w, 0, n, k, rx, m, got.data(), n);
        EXPECT_LT(relative_error(got, want), 1e-12) << q << " k " << k << " m " << m;
        // A range of rows leaves the others as they were.
        std::vector<float> part(static_cast<size_t>(m * n), 7.f);
        sb::rows(q, w, 5, 21, k, rx, m, part.data(), n);
        for (int64_t t = 0; t < m; ++t)
          for (int64_t r = 0; r < n; ++r) {
            const float v = part[static_cast<size_t>(t * n + r)];
            if (r < 5 || r >= 21)
              ASSERT_EQ(v, 7.f) << "row " << r;
            else
              ASSERT_EQ(v, got[static_cast<size_t>(t * n + r)]) << "row " << r;
          }
      }
    }
  }
}

// With AVX2's kernels (no AVX-512 VNNI), more rows of x than a decode tile times Q4_K, Q5_K or Q6_K go
// through the super-block kernel, whatever their count: the plain loop's sums over x rounded per
// 256 values; in batch-invariant mode, the per-32 rounding's tiles instead.
TEST(QuantCpu, Avx2TakesTheSuperblockKernelFromManyRows) {
  namespace sb = cpu::superblock;
  if (cpu::qdot::best_isa() < cpu::qdot::Isa::Avx2) GTEST_SKIP() << "no AVX2 here";
  const int64_t n = 40, k = 512;
  const cpu::qdot::Isa was = cpu::qdot::set_isa_limit(cpu::qdot::Isa::Avx2);
  for (QType q : {QType::Q4_K, QType::Q5_K, QType::Q6_K}) {
    const QTensor qw = random_k_blocks(q, n, k, 77);
    const std::vector<uint8_t> bytes = qw.bytes().reshape({qw.nbytes()}).to_vector<uint8_t>();
    const uint8_t* w = bytes.data();
    for (int64_t m : {cpu::qdot::kMaxRows, cpu::qdot::kMaxRows + 1, int64_t{300}}) {
      const std::vector<float> xv = random_values(m * k, 700 + static_cast<uint64_t>(m));
      const Tensor x = Tensor::from_vector(xv, {m, k});
      sb::RoundedX rx(m, k);
      for (int64_t t = 0; t < m; ++t) sb::round_row(xv.data() + t * k, k, rx, t);
      std::vector<float> want(static_cast<size_t>(m * n));
      sb::rows_portable(q, w, 0, n, k, rx, m, want.data(), n);
      const double apart = relative_error(quant::qmatmul(x, qw).reshape({m * n}).to_vector<float>(), want);
      if (m > cpu::qdot::kMaxRows)
        EXPECT_LT(apart, 1e-12) << q << " m " << m;
      else
        EXPECT_GT(apart, 1e-9) << q << " m " << m;  // a decode tile: x rounded per 32
      const bool invariant = set_batch_invariant(true);
      EXPECT_GT(relative_error(quant::qmatmul(x, qw).reshape({m * n}).to_vector<float>(), want), 1e-9) << q;
      set_batch_invariant(invariant);
    }
  }
  cpu::qdot::set_isa_limit(was);
}

// The CPU backend's "isa" option limits wick's own kernels by name (what `wick info` shows, and AMX
// only at the top), refusing other names and keys; a WICK_CPU_ISA that names no limit is refused
// by name where a CPU backend is made.
TEST(QuantCpu, TheIsaOptionLimitsTheKernelsByName) {
  namespace qdot = cpu::qdot;
  Backend& backend = backend_for(Device::cpu());
  const qdot::Isa was = qdot::set_isa_limit(qdot::Isa::Avx512Vnni);
  for (const qdot::Isa isa : {qdot::Isa::None, qdot::Isa::Neon, qdot::Isa::Avx2, qdot::Isa::Avx512Vnni}) {
    ASSERT_TRUE(backend.set_option("isa", qdot::isa_name(isa))) << qdot::isa_name(isa);
    // The limit's set, or the best below it; None where that is another architecture's.
    const qdot::Isa below = std::min(isa, qdot::best_isa());
    const qdot::Isa active =
        (below == qdot::Isa::Neon) == (qdot::best_isa() == qdot::Isa::Neon) ? below : qdot::Isa::None;
    EXPECT_EQ(qdot::active_isa(), active);
    EXPECT_NE(describe_device(Device::cpu()).find(std::string("own kernels up to ") + qdot::isa_name(active)),
              std::string::npos)
        << describe_device(Device::cpu());
    if (isa != qdot::Isa::Avx512Vnni) {
      EXPECT_FALSE(cpu::amx::active());
    }
  }
  EXPECT_FALSE(backend.set_option("isa", "avx512"));
  EXPECT_FALSE(backend.set_option("isa", ""));
  EXPECT_FALSE(backend.set_option("instruction_set", "avx2"));
  EXPECT_EQ(qdot::active_isa(), qdot::best_isa());  // the refused calls changed nothing
  qdot::set_isa_limit(was);
  ASSERT_EQ(setenv("WICK_CPU_ISA", "avx9", 1), 0);
  WICK_EXPECT_ERROR(cpu::CpuBackend{}, Error, "WICK_CPU_ISA", "avx9", "avx512_vnni, avx2, neon or none");
  ASSERT_EQ(setenv("WICK_CPU_ISA", "avx2", 1), 0);
  EXPECT_NO_THROW(cpu::CpuBackend{});
  unsetenv("WICK_CPU_ISA");
}

// Batch dims and strided views of x, as a model's activations come.
TEST_P(QuantTest, QmatmulTakesBatchesAndViews) {
  const Device dev = GetParam();
  const int64_t n = 24, k = 256;
  const QTensor qw = quant::quantize(Tensor::from_vector(random_values(n * k, 5), {n, k}, dev), QType::Q4_K);
  const Tensor base = Tensor::from_vector(random_values(k * 6, 9), {k, 2, 3}, dev);
  const Tensor x = base.permute({1, 2, 0});  // (2, 3, k), not contiguous
  const Tensor got = quant::qmatmul(x, qw);
  EXPECT_EQ(got.shape(), Shape({2, 3, n}));
  const Tensor flat = quant::qmatmul(x.contiguous().reshape({6, k}), qw);
  EXPECT_EQ(bits_of(got.reshape({6, n})), bits_of(flat));
  EXPECT_EQ(quant::qmatmul(Tensor::zeros({0, k}, DType::F32, dev), qw).shape(), Shape({0, n}));
}

TEST_P(QuantTest, QTensorMovesBytesUnchanged) {
  const Device dev = GetParam();
  const QTensor q = quant::quantize(Tensor::from_vector(random_values(4 * 256, 1), {4, 256}), QType::Q6_K);
  const QTensor moved = q.to_device(dev);
  EXPECT_EQ(moved.device(), dev);
  EXPECT_EQ(moved.qtype(), QType::Q6_K);
  EXPECT_EQ(moved.rows(), 4);
  EXPECT_EQ(moved.cols(), 256);
  EXPECT_EQ(moved.bytes().to_device(Device::cpu()).reshape({moved.nbytes()}).to_vector<uint8_t>(),
            q.bytes().reshape({q.nbytes()}).to_vector<uint8_t>());
  // A view of bytes is taken as the blocks it shows.
  const Tensor bigger = Tensor::zeros({q.nbytes() + 5}, DType::U8, dev);
  Tensor window = bigger.narrow(0, 5, q.nbytes());
  window.copy_from(q.bytes().reshape({q.nbytes()}).to_device(dev));
  EXPECT_EQ(bits_of(quant::dequantize(QTensor(QType::Q6_K, 4, 256, window))), bits_of(quant::dequantize(q)));
}

TEST_P(QuantTest, BadArgumentsAreClearErrors) {
  const Device dev = GetParam();
  const Tensor w = Tensor::from_vector(random_values(2 * 64, 2), {2, 64}, dev);
  WICK_EXPECT_ERROR(quant::quantize(w, QType::Q4_K), ShapeError, "quantize", "q4_k", "256");
  WICK_EXPECT_ERROR(quant::quantize(w.reshape({128}), QType::Q4_0), ShapeError, "quantize", "2-D");
  WICK_EXPECT_ERROR(quant::quantize(w.to_dtype(DType::I32), QType::Q4_0), DTypeError, "quantize", "i32");
  std::vector<float> bad = random_values(64, 4);
  bad[40] = std::numeric_limits<float>::quiet_NaN();
  WICK_EXPECT_ERROR(quant::quantize(Tensor::from_vector(bad, {2, 32}), QType::Q8_0), Error, "quantize", "finite", "1, 8");
  const QTensor q = quant::quantize(w, QType::Q4_0);
  WICK_EXPECT_ERROR(quant::qmatmul(Tensor::zeros({3, 32}, DType::F32, dev), q), ShapeError, "qmatmul", "64");
  WICK_EXPECT_ERROR(quant::qmatmul(Tensor::zeros({3, 64}, DType::F64, dev), q), DTypeError, "qmatmul", "f64");
  WICK_EXPECT_ERROR(quant::dequantize(q, DType::I64), DTypeError, "dequantize", "i64");
  WICK_EXPECT_ERROR(quant::qmatmul(Tensor::zeros({3, 64}), QTensor()), Error, "qmatmul", "undefined");
  if (!dev.is_cpu())
    WICK_EXPECT_ERROR(quant::qmatmul(Tensor::zeros({3, 64}), q), DeviceError, "qmatmul", "different devices");
  const Tensor bytes = Tensor::zeros({35}, DType::U8, dev);
  WICK_EXPECT_ERROR(QTensor(QType::Q4_0, 2, 32, bytes), ShapeError, "QTensor", "36 bytes");
  WICK_EXPECT_ERROR(QTensor(QType::Q4_0, 1, 32, bytes.to_dtype(DType::F32)), DTypeError, "QTensor", "u8");
  WICK_EXPECT_ERROR(QTensor::from_blocks(QType::Q4_0, 1, 32, nullptr, 18), Error, "from_blocks", "null");
  WICK_EXPECT_ERROR(QTensor::from_blocks(QType::Q4_0, int64_t{1} << 62, 32, nullptr, 0), ShapeError, "overflows");
}

INSTANTIATE_TEST_SUITE_P(Devices, QuantTest, ::testing::ValuesIn(devices()), device_name);

}  // namespace
}  // namespace wick::test
