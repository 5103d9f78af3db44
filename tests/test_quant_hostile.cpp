// The block formats (include/wick/quant.h) against hostile arguments: QType values outside the
// enum, and weights too large for a format's f16 scales (test_quant.cpp has the formats' worked
// blocks and the ordinary bad arguments).
#include <algorithm>
#include <cfloat>
#include <charconv>
#include <cmath>
#include <sstream>

#include "quant/quant_ops.h"
#include "test_util.h"

namespace wick::test {
namespace {

namespace kq = kernels::quant;
using quant::QTensor;
using quant::QType;

// Each format's limit as docs/quantization.md lists it, and as quantize's message writes it.
struct Limit {
  QType q;
  float limit;
  const char* text;
};
const Limit kLimits[] = {
    {QType::Q4_0, 524160.f, "524160"}, {QType::Q4_1, 65520.f, "65520"},     {QType::Q5_0, 1048320.f, "1048320"},
    {QType::Q5_1, 65520.f, "65520"},   {QType::Q8_0, 8321040.f, "8321040"}, {QType::Q8_1, 2047.5f, "2047.5"},
    {QType::Q2_K, 2.58e5f, "258000"},  {QType::Q3_K, 2.09e6f, "2090000"},   {QType::Q4_K, 1.06e6f, "1060000"},
    {QType::Q5_K, 1.04e6f, "1040000"}, {QType::Q6_K, 1.73e8f, "1.73e+08"},  {QType::Q8_K, FLT_MAX, "3.4028235e+38"}};

std::string shortest(float v) {
  char buf[32];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

// Uniform in [-scale, scale), from a seed.
std::vector<float> random_values(int64_t n, uint64_t seed, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<float>((static_cast<double>(s >> 11) / 9007199254740992.0 * 2 - 1) * scale);
  }
  return v;
}

// The number of values of q's dequantization that are not finite.
int64_t non_finite(const QTensor& q) {
  int64_t n = 0;
  for (float v : quant::dequantize(q).reshape({q.rows() * q.cols()}).to_vector<float>()) n += !std::isfinite(v);
  return n;
}

TEST(QuantHostile, QTypesOutsideTheEnumAreRefused) {
  const Tensor bytes = Tensor::zeros({18}, DType::U8);
  const std::vector<uint8_t> host(18);
  for (int v : {12, 200, 255}) {
    const QType bad = static_cast<QType>(v);
    const std::string n = std::to_string(v);
    WICK_EXPECT_ERROR(quant::qtype_name(bad), DTypeError, "qtype_name", n);
    WICK_EXPECT_ERROR(quant::ggml_type(bad), DTypeError, "ggml_type", n);
    WICK_EXPECT_ERROR(quant::block_values(bad), DTypeError, "block_values", n);
    WICK_EXPECT_ERROR(quant::block_bytes(bad), DTypeError, "block_bytes", n);
    WICK_EXPECT_ERROR(quant::row_bytes(bad, 256), DTypeError, "row_bytes", n);
    std::ostringstream os;
    WICK_EXPECT_ERROR(os << bad, DTypeError, "operator<<", n);
    WICK_EXPECT_ERROR(QTensor(bad, 1, 32, bytes), DTypeError, "QTensor", n);
    WICK_EXPECT_ERROR(QTensor::from_blocks(bad, 1, 32, host.data(), 18), DTypeError, "QTensor::from_blocks", n);
    WICK_EXPECT_ERROR(quant::quantize(Tensor::zeros({1, 256}), bad), DTypeError, "quantize", n);
  }
}

// Blocks of values just below the limit come back finite; a value at the limit or past it is refused,
// the message naming the format, the limit, the element's row and block, and the value.
TEST(QuantHostile, EachFormatHoldsValuesBelowItsLimit) {
  for (const Limit& l : kLimits) {
    EXPECT_EQ(quant::max_magnitude(l.q), l.limit) << l.q;
    const int64_t bv = quant::block_values(l.q), cols = 2 * bv;
    const float a = std::nextafter(l.limit, 0.f);
    std::vector<float> x = random_values(4 * cols, 3, 1e-3f);
    for (int64_t j = 0; j < cols; ++j) {
      x[static_cast<size_t>(j)] = a;                               // all the largest value
      x[static_cast<size_t>(cols + j)] = -a;                       // all its negative
      x[static_cast<size_t>(2 * cols + j)] = j % 2 ? a : -a;       // both
      if (j % bv == 5) x[static_cast<size_t>(3 * cols + j)] = -a;  // one among small values
    }
    const QTensor q = quant::quantize(Tensor::from_vector(x, {4, cols}), l.q);
    EXPECT_EQ(non_finite(q), 0) << l.q;
    std::vector<float> past = {l.limit, -l.limit};
    if (std::isfinite(std::nextafter(l.limit, INFINITY))) past.push_back(std::nextafter(l.limit, INFINITY));
    for (float v : past) {
      std::vector<float> y = random_values(2 * cols, 5, 1.f);
      y[static_cast<size_t>(cols + bv + 7)] = v;
      WICK_EXPECT_ERROR(quant::quantize(Tensor::from_vector(y, {2, cols}), l.q), Error, "quantize",
                        std::string(quant::qtype_name(l.q)), std::string("below ") + l.text, "row 1, block 1",
                        "is " + shortest(v));
    }
  }
}

// The 32-value formats' limits and Q8_K's are exact: a block of values at the limit, quantized
// without the front end's check, gets a scale or a value that is not finite.
TEST(QuantHostile, LimitsOfTheFormatsWithoutASearchAreExact) {
  for (const Limit& l : kLimits) {
    if (quant::block_values(l.q) == 256 && l.q != QType::Q8_K) continue;
    kq::dispatch_qtype(l.q, [&]<QType Q>() {
      using F = kq::Format<Q>;
      for (float v : {std::nextafter(l.limit, 0.f), l.limit}) {
        const std::vector<float> x(F::kValues, v);
        typename F::Block b;
        const bool scales = quant::detail::quantize_block<Q>(x.data(), b);
        float out[F::kValues];
        for (int g = 0; g < F::kGroups; ++g) kq::dequantize_group<Q>(b, g, out + g * F::kGroup);
        const bool values = std::all_of(out, out + F::kValues, [](float o) { return std::isfinite(o); });
        EXPECT_EQ(scales && values, v < l.limit) << Q << " at " << v;
      }
    });
  }
}

// Rows holding 1e9, -1e9 or 3e38 among small values: refused past the format's limit, finite below it
// (Q8_K's f32 scale holds them all).
TEST(QuantHostile, HugeValuesAreRefusedOrComeBackFinite) {
  for (const Limit& l : kLimits) {
    const int64_t bv = quant::block_values(l.q), cols = 2 * bv;
    for (float v : {1e9f, -1e9f, 3e38f, -3e38f}) {
      std::vector<float> x = random_values(2 * cols, 7, 0.5f);
      x[static_cast<size_t>(cols + bv + 3)] = v;
      const Tensor w = Tensor::from_vector(x, {2, cols});
      if (std::fabs(v) < l.limit) {
        EXPECT_EQ(non_finite(quant::quantize(w, l.q)), 0) << l.q << " " << v;
      } else {
        WICK_EXPECT_ERROR(quant::quantize(w, l.q), Error, "quantize", std::string(quant::qtype_name(l.q)), l.text,
                          "row 1, block 1", "is " + shortest(v));
      }
    }
  }
}

// Rows of random magnitudes from 1e-6 to 10 times the limit, their blocks of mixed signs, all
// positive, or nearly equal: each is refused when it holds a value at the limit or past it, and
// comes back finite otherwise.
TEST(QuantHostile, RandomMagnitudesAreRefusedOrComeBackFinite) {
  for (const Limit& l : kLimits) {
    const int64_t bv = quant::block_values(l.q), cols = 4 * bv;
    int refused = 0, taken = 0;
    for (uint64_t seed = 0; seed < 48; ++seed) {
      const std::vector<float> u = random_values(cols + 2, 1000 + seed, 1.f);
      const double scale = std::min<double>(FLT_MAX, l.limit * std::pow(10.0, 3.5 * (u[0] + 1) - 6));
      std::vector<float> x = random_values(cols, seed, static_cast<float>(scale));
      const int kind = static_cast<int>(seed % 3);
      for (float& v : x) {
        if (kind == 1) v = std::fabs(v);
        if (kind == 2) v = static_cast<float>(scale) * (1 - 0.01f * std::fabs(v / static_cast<float>(scale)));
      }
      float amax = 0;
      for (float v : x) amax = std::max(amax, std::fabs(v));
      const Tensor w = Tensor::from_vector(x, {1, cols});
      if (amax < l.limit) {
        ++taken;
        EXPECT_EQ(non_finite(quant::quantize(w, l.q)), 0) << l.q << " seed " << seed << " amax " << amax;
      } else {
        ++refused;
        WICK_EXPECT_ERROR(quant::quantize(w, l.q), Error, "quantize", l.text);
      }
    }
    EXPECT_GT(taken, 10) << l.q;
    if (l.q != QType::Q8_K) {
      EXPECT_GT(refused, 5) << l.q;
    }
  }
}

// ggml's least-squares fit of a scale and a minimum degenerates on some groups of nearly equal
// values (its determinant rounds to a tiny positive number): this one gets a minimum 8.4 times its
// values. 2^20 times it stays below Q4_K's limit, but the minimum's f16 scale overflows: refused.
TEST(QuantHostile, DegenerateFitsPastF16AreRefused) {
  const float group[32] = {
      0.634617567f, 0.652845681f, 0.634617567f, 0.634617567f, 0.634617567f, 0.620695889f, 0.620695889f, 0.634617567f,
      0.634617567f, 0.634617567f, 0.620695889f, 0.619558156f, 0.634617567f, 0.634617567f, 0.634617567f, 0.634617567f,
      0.634617567f, 0.620695889f, 0.634617567f, 0.634617567f, 0.634617567f, 0.643165052f, 0.620695889f, 0.620695889f,
      0.634617567f, 0.620695889f, 0.620695889f, 0.634617567f, 0.620695889f, 0.620695889f, 0.634617567f, 0.620695889f};
  std::vector<float> x(2 * 256, 0.f);
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(256 + 64 + i)] = std::ldexp(group[i], 20);
  WICK_EXPECT_ERROR(quant::quantize(Tensor::from_vector(x, {1, 512}), QType::Q4_K), Error, "quantize", "row 0, block 1",
                    "q4_k", "degenerates");
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(256 + 64 + i)] = std::ldexp(group[i], 10);
  EXPECT_EQ(non_finite(quant::quantize(Tensor::from_vector(x, {1, 512}), QType::Q4_K)), 0);
}

}  // namespace
}  // namespace wick::test
