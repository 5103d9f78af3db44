// The element types: f16/bf16/f8e4m3 conversions against an oracle written from the format definitions,
// kernels::cast's rules, the Philox known-answer vectors, and the dtype tables.
#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <gtest/gtest.h>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cpu/nn/rows.h"
#include "kernels/cast.h"
#include "kernels/philox.h"
#include "wick/dtype.h"
#include "wick/float_types.h"

namespace wick {
namespace {

constexpr float kInfF = std::numeric_limits<float>::infinity();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// A binary floating-point format described by its fields only.
struct Format {
  const char* name;
  int bits;
  int exp_bits;
  int mant_bits;
  int bias;
  bool ieee;  // all-ones exponent holds inf and NaN; otherwise (e4m3fn) only S.1111.111 is NaN, no inf

  uint32_t sign() const { return 1u << (bits - 1); }
  uint32_t exp_all_ones() const { return ((1u << exp_bits) - 1) << mant_bits; }
  uint32_t max_finite() const { return ieee ? exp_all_ones() - 1 : sign() - 2; }
  // The pattern after the largest finite one: inf for IEEE formats, NaN for e4m3fn. Rounding past the
  // largest finite value lands exactly there.
  uint32_t overflow() const { return max_finite() + 1; }
  uint32_t nan() const { return ieee ? exp_all_ones() | (1u << (mant_bits - 1)) : sign() - 1; }
  bool is_nan(uint32_t b) const {
    uint32_t mag = b & (sign() - 1);
    return ieee ? mag > exp_all_ones() : mag == sign() - 1;
  }
  // Value of a pattern that is not NaN.
  double decode(uint32_t b) const {
    uint32_t e = (b >> mant_bits) & ((1u << exp_bits) - 1);
    uint32_t m = b & ((1u << mant_bits) - 1);
    double s = (b & sign()) ? -1.0 : 1.0;
    if (ieee && e == (1u << exp_bits) - 1) return s * kInf;
    if (e == 0) return s * std::ldexp(static_cast<double>(m), 1 - bias - mant_bits);
    return s * std::ldexp(static_cast<double>(m | (1u << mant_bits)), static_cast<int>(e) - bias - mant_bits);
  }
};

constexpr Format kF16Format{"f16", 16, 5, 10, 15, true};
constexpr Format kBF16Format{"bf16", 16, 8, 7, 127, true};
constexpr Format kF8E4M3Format{"f8e4m3", 8, 4, 3, 7, false};

// Round to nearest, ties to even, by search in the list of representable magnitudes.
class Oracle {
 public:
  explicit Oracle(const Format& f) : format(f) {
    for (uint32_t b = 0; b <= f.max_finite(); ++b) mag.push_back(f.decode(b));
    // The value the next pattern would have with an unbounded exponent: max + one ulp of the top binade.
    int top_exp = static_cast<int>(f.max_finite() >> f.mant_bits) - f.bias - f.mant_bits;
    mag.push_back(mag.back() + std::ldexp(1.0, top_exp));
  }

  uint32_t round(double x) const {
    uint32_t s = std::signbit(x) ? format.sign() : 0;
    if (std::isnan(x)) return s | format.nan();
    double a = std::fabs(x);
    if (a >= mag.back()) return s | format.overflow();
    uint32_t hi = static_cast<uint32_t>(std::upper_bound(mag.begin(), mag.end(), a) - mag.begin());
    uint32_t lo = hi - 1;
    if (mag[lo] == a) return s | lo;
    double mid = (mag[lo] + mag[hi]) / 2;  // exact: the values have few significant bits
    if (a < mid) return s | lo;
    if (a > mid) return s | hi;
    return s | (lo % 2 == 0 ? lo : hi);  // the pattern's lowest bit is the mantissa's lowest bit
  }

  Format format;
  std::vector<double> mag;  // mag[b] for b in [0, overflow()]: sorted, as patterns order magnitudes
};

template <typename T>
const Oracle& oracle();
template <>
const Oracle& oracle<f16>() {
  static const Oracle o(kF16Format);
  return o;
}
template <>
const Oracle& oracle<bf16>() {
  static const Oracle o(kBF16Format);
  return o;
}
template <>
const Oracle& oracle<f8e4m3>() {
  static const Oracle o(kF8E4M3Format);
  return o;
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}
std::string describe(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a (%.17g)", x, x);
  return buf;
}

bool same_result(const Format& f, uint32_t want, uint32_t got) {
  if (f.is_nan(want)) return f.is_nan(got) && (want & f.sign()) == (got & f.sign());
  return want == got;
}

// Gathers the mismatches of one check, so that a broken conversion reports a count and a few
// examples rather than thousands of lines.
class Mismatches {
 public:
  explicit Mismatches(std::string what) : what_(std::move(what)) {}
  Mismatches(const Mismatches&) = delete;
  Mismatches& operator=(const Mismatches&) = delete;
  ~Mismatches() {
    if (count_ > 0) ADD_FAILURE() << what_ << ": " << count_ << " of " << checked_ << " wrong, e.g." << examples_;
  }
  void check(bool ok, const std::string& detail) {
    ++checked_;
    if (ok) return;
    if (count_++ < 8) examples_ += "\n  " + detail;
  }
  int64_t checked() const { return checked_; }

 private:
  std::string what_;
  std::string examples_;
  int64_t count_ = 0;
  int64_t checked_ = 0;
};

// Checks T(x) (x a float or a double) against the expected pattern.
template <typename T, typename X>
void expect_converts(Mismatches& m, X x, uint32_t want) {
  const Format& f = oracle<T>().format;
  uint32_t got = T(x).bits;
  m.check(same_result(f, want, got), std::string(f.name) + "(" + (std::is_same_v<X, float> ? "float " : "double ") +
                                         describe(x) + ") = " + hex(got) + ", want " + hex(want));
}

template <typename T, typename X>
void expect_correctly_rounded(Mismatches& m, X x) {
  expect_converts<T>(m, x, oracle<T>().round(static_cast<double>(x)));
}

// Binades that cover the format's subnormals to a few beyond its largest value (unbiased exponents).
template <typename T>
std::pair<int, int> exponent_span() {
  const Format& f = oracle<T>().format;
  int lo = 1 - f.bias - f.mant_bits - 4;
  int hi = static_cast<int>(f.max_finite() >> f.mant_bits) - f.bias + 4;
  return {lo, hi};
}

template <typename T>
class LowFloat : public ::testing::Test {};
using LowFloatTypes = ::testing::Types<f16, bf16, f8e4m3>;
struct LowFloatNames {
  template <typename T>
  static std::string GetName(int) {
    return oracle<T>().format.name;
  }
};
TYPED_TEST_SUITE(LowFloat, LowFloatTypes, LowFloatNames);

TYPED_TEST(LowFloat, EveryPatternDecodesAndRoundTrips) {
  using T = TypeParam;
  using Bits = decltype(T::bits);
  const Format& f = oracle<T>().format;
  Mismatches m(std::string(f.name) + " pattern -> f32/f64 -> pattern");
  for (uint32_t b = 0; b < (1u << f.bits); ++b) {
    T v = T::from_bits(static_cast<Bits>(b));
    float x = static_cast<float>(v);
    double xd = static_cast<double>(v);
    bool neg = (b & f.sign()) != 0;
    if (f.is_nan(b)) {
      uint32_t back = T(x).bits, back_d = T(xd).bits;
      bool ok = std::isnan(x) && std::isnan(xd) && std::signbit(x) == neg && std::signbit(xd) == neg &&
                f.is_nan(back) && f.is_nan(back_d) && (back & f.sign()) == (b & f.sign()) &&
                (back_d & f.sign()) == (b & f.sign());
      m.check(ok, "NaN " + hex(b) + " -> " + describe(x) + " -> " + hex(back) + " / " + hex(back_d));
    } else {
      double want = f.decode(b);
      bool ok = static_cast<double>(x) == want && xd == want && std::signbit(x) == neg && std::signbit(xd) == neg;
      m.check(ok, hex(b) + " decodes to " + describe(x) + ", want " + describe(want));
      uint32_t back = T(x).bits, back_d = T(xd).bits;
      m.check(back == b && back_d == b, hex(b) + " round trips to " + hex(back) + " / " + hex(back_d));
    }
  }
}

TYPED_TEST(LowFloat, NanPatternsAreExactlyTheFormatsNans) {
  using T = TypeParam;
  const Format& f = oracle<T>().format;
  int nans = 0;
  for (uint32_t b = 0; b < (1u << f.bits); ++b) nans += f.is_nan(b);
  // IEEE: all-ones exponent with a nonzero mantissa; e4m3fn: only 0x7f and 0xff.
  EXPECT_EQ(nans, f.ieee ? 2 * ((1 << f.mant_bits) - 1) : 2);
  if (!f.ieee) {
    EXPECT_TRUE(std::isnan(static_cast<float>(f8e4m3::from_bits(0x7f))));
    EXPECT_TRUE(std::isnan(static_cast<float>(f8e4m3::from_bits(0xff))));
    EXPECT_EQ(static_cast<float>(f8e4m3::from_bits(0x7e)), 448.0f);
    EXPECT_EQ(static_cast<float>(f8e4m3::from_bits(0x78)), 256.0f);  // e=15 is an ordinary binade, not inf
  }
}

TYPED_TEST(LowFloat, FromFloatRandomInputsRoundToNearestEven) {
  using T = TypeParam;
  const Format& f = oracle<T>().format;
  auto [lo, hi] = exponent_span<T>();
  uint32_t elo = static_cast<uint32_t>(std::max(lo + 127, 0)), ehi = static_cast<uint32_t>(std::min(hi + 127, 254));
  std::mt19937 rng(12345u + static_cast<uint32_t>(f.bits * 7 + f.mant_bits));
  Mismatches m(std::string(f.name) + "(float) on random inputs");
  for (int i = 0; i < 70000; ++i) {
    uint32_t r = rng();
    uint32_t bits = r;  // every fourth one arbitrary: f32 subnormals, huge values, inf and NaN too
    if (i % 4 != 3) bits = (r & 0x807fffffu) | ((elo + rng() % (ehi - elo + 1)) << 23);
    expect_correctly_rounded<T>(m, std::bit_cast<float>(bits));
  }
}

// Every midpoint between neighbouring values (f32 holds each exactly) and the f32 values one ulp either
// side: the tie goes to the even pattern, the neighbours to the nearer value. The pair above the largest
// finite value overflows to inf (f16, bf16) or NaN (f8e4m3).
TYPED_TEST(LowFloat, FromFloatMidpointsTieToEven) {
  using T = TypeParam;
  const Oracle& o = oracle<T>();
  const Format& f = o.format;
  Mismatches m(std::string(f.name) + "(float) at and beside midpoints");
  for (uint32_t i = 0; i < f.overflow(); ++i) {
    double mid = (o.mag[i] + o.mag[i + 1]) / 2;
    float fm = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(fm), mid) << "midpoint above " << hex(i) << " is not an f32";
    uint32_t even = i % 2 == 0 ? i : i + 1;
    for (uint32_t s : {0u, f.sign()}) {
      float x = s ? -fm : fm;
      expect_converts<T>(m, x, s | even);
      expect_converts<T>(m, std::nextafter(x, 0.0f), s | i);
      expect_converts<T>(m, std::nextafter(x, s ? -kInfF : kInfF), s | (i + 1));
    }
  }
}

TYPED_TEST(LowFloat, FromDoubleRandomInputsRoundToNearestEven) {
  using T = TypeParam;
  const Format& f = oracle<T>().format;
  auto [lo, hi] = exponent_span<T>();
  std::mt19937_64 rng(777u + static_cast<uint64_t>(f.bits * 7 + f.mant_bits));
  Mismatches m(std::string(f.name) + "(double) on random inputs");
  for (int i = 0; i < 30000; ++i) {
    uint64_t r = rng();
    uint64_t bits = r;  // every fourth one arbitrary: far outside f32's range, subnormal, inf and NaN too
    if (i % 4 != 3)
      bits = (r & 0x800fffffffffffffull) | (static_cast<uint64_t>(lo + 1023 + rng() % (hi - lo + 1)) << 52);
    expect_correctly_rounded<T>(m, std::bit_cast<double>(bits));
  }
}

// Doubles just off a midpoint by far less than f32's precision must round away from it: going through
// f32 with round-to-nearest would land on the midpoint and then round to even.
TYPED_TEST(LowFloat, FromDoubleRoundsOnceNotThroughF32) {
  using T = TypeParam;
  const Oracle& o = oracle<T>();
  const Format& f = o.format;
  const double eps = std::ldexp(1.0, -40);
  Mismatches m(std::string(f.name) + "(double) beside midpoints");
  int naive_wrong = 0;
  for (uint32_t i = 0; i < f.overflow(); ++i) {
    double mid = (o.mag[i] + o.mag[i + 1]) / 2;
    double up = mid * (1 + eps), down = mid * (1 - eps);  // both exact: mid has at most 12 significant bits
    ASSERT_EQ(static_cast<double>(static_cast<float>(up)), mid);
    ASSERT_EQ(static_cast<double>(static_cast<float>(down)), mid);
    uint32_t even = i % 2 == 0 ? i : i + 1;
    naive_wrong += T(static_cast<float>(up)).bits != i + 1;
    for (uint32_t s : {0u, f.sign()}) {
      double sg = s ? -1.0 : 1.0;
      expect_converts<T>(m, sg * mid, s | even);
      expect_converts<T>(m, sg * up, s | (i + 1));
      expect_converts<T>(m, sg * down, s | i);
    }
  }
  EXPECT_GT(naive_wrong, 0) << "the inputs do not tell a single rounding from a double one";
}

// Payloads only in the low bits (which the narrow formats drop) must not turn a NaN into inf or zero.
TYPED_TEST(LowFloat, NanInputsGiveNanOfTheSameSign) {
  using T = TypeParam;
  const Format& f = oracle<T>().format;
  Mismatches m(std::string(f.name) + " from NaN");
  for (uint32_t b : {0x7f800001u, 0x7f801fffu, 0x7f800100u, 0x7f80ffffu, 0x7fc00000u, 0x7fffffffu, 0x7fa00000u}) {
    for (uint32_t s : {0u, 0x80000000u})
      expect_converts<T>(m, std::bit_cast<float>(b | s), (s ? f.sign() : 0) | f.nan());
  }
  for (uint64_t b : {0x7ff0000000000001ull, 0x7ff0000000001fffull, 0x7ff8000000000000ull, 0x7fffffffffffffffull}) {
    for (uint64_t s : {0ull, 0x8000000000000000ull})
      expect_converts<T>(m, std::bit_cast<double>(b | s), (s ? f.sign() : 0) | f.nan());
  }
}

// Edge cases written out by hand, for one type of float input.
struct EdgeCase {
  double x;
  uint32_t want;
};

template <typename T, typename X>
void expect_edge_cases(const std::vector<EdgeCase>& cases) {
  Mismatches m(std::string(oracle<T>().format.name) + (std::is_same_v<X, float> ? "(float)" : "(double)") +
               " edge cases");
  for (const EdgeCase& c : cases) {
    X x = static_cast<X>(c.x);
    ASSERT_TRUE(std::isnan(c.x) || static_cast<double>(x) == c.x) << describe(c.x) << " is not exact";
    expect_converts<T>(m, x, c.want);
    // The oracle must agree with the hand-written answer, or the random and midpoint tests prove nothing.
    m.check(same_result(oracle<T>().format, c.want, oracle<T>().round(c.x)), "oracle disagrees on " + describe(c.x));
  }
}

TEST(F16, FromFloatEdgeCases) {
  expect_edge_cases<f16, float>({
      {0.0, 0x0000},
      {-0.0, 0x8000},
      {1.0, 0x3c00},
      {-2.0, 0xc000},
      {1 + 0x1p-11, 0x3c00},  // tie, to even
      {1 + 0x3p-11, 0x3c02},  // tie, to even
      {1 + 0x1p-11 + 0x1p-23, 0x3c01},
      {65504.0, 0x7bff},  // max finite
      {65519.0, 0x7bff},
      {std::nextafter(65520.0f, 0.0f), 0x7bff},
      {65520.0, 0x7c00},  // halfway to 2^16: the tie goes to the even pattern, inf
      {-65520.0, 0xfc00},
      {65536.0, 0x7c00},
      {FLT_MAX, 0x7c00},
      {kInf, 0x7c00},
      {-kInf, 0xfc00},
      {0x1p-14, 0x0400},      // min normal
      {0x1.ff8p-15, 0x03ff},  // max subnormal
      {0x1p-24, 0x0001},      // min subnormal
      {0x1.8p-24, 0x0002},    // tie, to even
      {0x1p-25, 0x0000},      // tie with zero
      {-0x1p-25, 0x8000},
      {std::nextafter(0x1p-25f, 1.0f), 0x0001},
      {0x1p-149, 0x0000},  // f32 subnormals
      {-0x1p-149, 0x8000},
      {0x1p-127, 0x0000},
      {kNan, 0x7e00},
      {-kNan, 0xfe00},
  });
}

TEST(BF16, FromFloatEdgeCases) {
  expect_edge_cases<bf16, float>({
      {0.0, 0x0000},
      {-0.0, 0x8000},
      {1.0, 0x3f80},
      {1 + 0x1p-8, 0x3f80},  // tie, to even
      {1 + 0x3p-8, 0x3f82},  // tie, to even
      {std::nextafter(1 + 0x1p-8f, 2.0f), 0x3f81},
      {0x1.fep127, 0x7f7f},  // max finite
      {0x1.ffp127, 0x7f80},  // halfway to 2^128: to the even pattern, inf
      {std::nextafter(0x1.ffp127f, 0.0f), 0x7f7f},
      {-0x1.ffp127, 0xff80},
      {FLT_MAX, 0x7f80},
      {kInf, 0x7f80},
      {-kInf, 0xff80},
      {0x1p-126, 0x0080},    // min normal (also f32's)
      {0x1p-133, 0x0001},    // min subnormal
      {0x1.8p-133, 0x0002},  // tie, to even
      {0x1p-134, 0x0000},    // tie with zero
      {std::nextafter(0x1p-134f, 1.0f), 0x0001},
      {0x1p-149, 0x0000},
      {-0x1p-149, 0x8000},
      {0x1.8p-127, 0x0060},
      {kNan, 0x7fc0},
      {-kNan, 0xffc0},
  });
}

TEST(F8E4M3, FromFloatEdgeCases) {
  expect_edge_cases<f8e4m3, float>({
      {0.0, 0x00},
      {-0.0, 0x80},
      {1.0, 0x38},
      {-1.0, 0xb8},
      {1.0625, 0x38},  // tie, to even
      {1.1875, 0x3a},  // tie, to even
      {240.0, 0x77},
      {256.0, 0x78},  // exponent field 15 is an ordinary binade
      {416.0, 0x7d},
      {432.0, 0x7e},  // tie, to even
      {448.0, 0x7e},  // max finite
      {464.0, 0x7e},  // halfway to 480: to the even pattern, 448
      {-464.0, 0xfe},
      {std::nextafter(464.0f, 1000.0f), 0x7f},  // would round to 480: NaN
      {-std::nextafter(464.0f, 1000.0f), 0xff},
      {480.0, 0x7f},
      {1e6, 0x7f},
      {FLT_MAX, 0x7f},
      {kInf, 0x7f},  // no infinity
      {-kInf, 0xff},
      {kNan, 0x7f},
      {-kNan, 0xff},
      {0x1p-6, 0x08},    // min normal
      {0x1.cp-7, 0x07},  // max subnormal
      {0x1p-9, 0x01},    // min subnormal
      {0x1.8p-9, 0x02},  // tie, to even
      {0x1p-10, 0x00},   // tie with zero
      {-0x1p-10, 0x80},
      {std::nextafter(0x1p-10f, 1.0f), 0x01},
      {0x1p-149, 0x00},
  });
}

TEST(F16, FromDoubleEdgeCases) {
  expect_edge_cases<f16, double>({
      {1 + 0x1p-11 + 0x1p-45, 0x3c01},
      {1 + 0x1p-11 - 0x1p-45, 0x3c00},
      {65520.0 - 0x1p-30, 0x7bff},
      {65520.0, 0x7c00},
      {1e300, 0x7c00},
      {-1e300, 0xfc00},
      {DBL_MAX, 0x7c00},
      {0x1p-25 + 0x1p-70, 0x0001},
      {1e-300, 0x0000},
      {-1e-300, 0x8000},
      {0x1p-1074, 0x0000},
      {kInf, 0x7c00},
      {-kInf, 0xfc00},
      {kNan, 0x7e00},
  });
}

TEST(BF16, FromDoubleEdgeCases) {
  expect_edge_cases<bf16, double>({
      {1 + 0x1p-8 + 0x1p-50, 0x3f81},
      {1 + 0x3p-8 - 0x1p-50, 0x3f81},
      {0x1.ffp127 - 0x1p90, 0x7f7f},
      {0x1.ffp127, 0x7f80},
      {1e300, 0x7f80},
      {-DBL_MAX, 0xff80},
      {0x1p-134 + 0x1p-170, 0x0001},
      {0x1p-134 - 0x1p-170, 0x0000},
      {1e-300, 0x0000},
      {-1e-300, 0x8000},
      {kInf, 0x7f80},
      {kNan, 0x7fc0},
  });
}

TEST(F8E4M3, FromDoubleEdgeCases) {
  expect_edge_cases<f8e4m3, double>({
      {1.0625 + 0x1p-45, 0x39},
      {464.0, 0x7e},
      {464.0 + 0x1p-30, 0x7f},
      {464.0 - 0x1p-30, 0x7e},
      {1e300, 0x7f},
      {-1e300, 0xff},
      {0x1p-10 + 0x1p-60, 0x01},
      {1e-300, 0x00},
      {-1e-300, 0x80},
      {kInf, 0x7f},
      {-kInf, 0xff},
      {kNan, 0x7f},
  });
}

// ---- kernels::cast ----

// Truncation toward zero, saturating at the type's range, NaN to 0: wick's float -> int rule.
template <typename I>
I trunc_saturate(double v) {
  if (std::isnan(v)) return 0;
  double t = std::trunc(v);
  double above_max = std::ldexp(1.0, std::numeric_limits<I>::digits);
  double min = std::is_signed_v<I> ? -above_max : 0.0;
  if (t >= above_max) return std::numeric_limits<I>::max();
  if (t <= min) return std::numeric_limits<I>::min();
  return static_cast<I>(t);
}

struct FloatToIntRow {
  double x;
  uint8_t u8;
  uint32_t u32;
  int16_t i16;
  int32_t i32;
  int64_t i64;
};

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int32_t kI32Min = std::numeric_limits<int32_t>::min();

// Exact in f32 as well as in f64, or (2.9, -0.7, 9.3e18) far enough from a boundary that f32's rounding
// does not change the answer.
const std::vector<FloatToIntRow> kFloatToIntRows = {
    {1e30, 255, 4294967295u, 32767, kI32Max, kI64Max},
    {-1e30, 0, 0, -32768, kI32Min, kI64Min},
    {kInf, 255, 4294967295u, 32767, kI32Max, kI64Max},
    {-kInf, 0, 0, -32768, kI32Min, kI64Min},
    {kNan, 0, 0, 0, 0, 0},
    {-kNan, 0, 0, 0, 0, 0},
    {-0.0, 0, 0, 0, 0, 0},
    {-0.7, 0, 0, 0, 0, 0},
    {2.9, 2, 2, 2, 2, 2},
    {-2.9, 0, 0, -2, -2, -2},
    {255.5, 255, 255, 255, 255, 255},
    {256.0, 255, 256, 256, 256, 256},
    {-129.0, 0, 0, -129, -129, -129},
    {-1.0, 0, 0, -1, -1, -1},
    {32767.5, 255, 32767, 32767, 32767, 32767},
    {-32768.5, 0, 0, -32768, -32768, -32768},
    {-32769.0, 0, 0, -32768, -32769, -32769},
    {4294967296.0, 255, 4294967295u, 32767, kI32Max, 4294967296},
    {2147483648.0, 255, 2147483648u, 32767, kI32Max, 2147483648},
    {-2147483648.0, 0, 0, -32768, kI32Min, -2147483648},
    {9.3e18, 255, 4294967295u, 32767, kI32Max, kI64Max},
    {0x1p63, 255, 4294967295u, 32767, kI32Max, kI64Max},
    {-0x1p63, 0, 0, -32768, kI32Min, kI64Min},
    {0x1.fffffep62, 255, 4294967295u, 32767, kI32Max, 0x7fffff8000000000},
    {-0x1p64, 0, 0, -32768, kI32Min, kI64Min},
};

template <typename From>
void expect_float_to_int_rows() {
  for (const FloatToIntRow& r : kFloatToIntRows) {
    From x = static_cast<From>(r.x);
    SCOPED_TRACE(describe(r.x) + (std::is_same_v<From, float> ? " as f32" : " as f64"));
    EXPECT_EQ(kernels::cast<uint8_t>(x), r.u8);
    EXPECT_EQ(kernels::cast<uint32_t>(x), r.u32);
    EXPECT_EQ(kernels::cast<int16_t>(x), r.i16);
    EXPECT_EQ(kernels::cast<int32_t>(x), r.i32);
    EXPECT_EQ(kernels::cast<int64_t>(x), r.i64);
  }
}

TEST(Cast, F32ToIntTruncatesSaturatesAndMapsNanToZero) { expect_float_to_int_rows<float>(); }
TEST(Cast, F64ToIntTruncatesSaturatesAndMapsNanToZero) { expect_float_to_int_rows<double>(); }

TEST(Cast, F64ToIntAtTheRangeEnds) {
  EXPECT_EQ(kernels::cast<int32_t>(2147483647.9), kI32Max);
  EXPECT_EQ(kernels::cast<int32_t>(-2147483648.9), kI32Min);
  EXPECT_EQ(kernels::cast<int32_t>(-2147483649.0), kI32Min);
  EXPECT_EQ(kernels::cast<uint32_t>(4294967295.9), 4294967295u);
  EXPECT_EQ(kernels::cast<uint32_t>(-0.9999), 0u);
  EXPECT_EQ(kernels::cast<uint8_t>(255.999), 255);
  EXPECT_EQ(kernels::cast<uint8_t>(-0.999), 0);
  EXPECT_EQ(kernels::cast<int16_t>(32767.99), 32767);
  EXPECT_EQ(kernels::cast<int16_t>(-32768.99), -32768);
  EXPECT_EQ(kernels::cast<int64_t>(0x1.fffffffffffffp62), 0x7ffffffffffffc00);
  EXPECT_EQ(kernels::cast<int64_t>(-0x1.fffffffffffffp62), -0x7ffffffffffffc00);
  EXPECT_EQ(kernels::cast<int32_t>(std::nextafter(2147483648.0f, 0.0f)), 2147483520);
}

// The low floats: the value the pattern holds, truncated and saturated.
template <typename T>
void expect_low_float_to_int() {
  const Oracle& o = oracle<T>();
  const Format& f = o.format;
  for (const FloatToIntRow& r : kFloatToIntRows) {
    uint32_t bits = o.round(r.x);
    T x = T::from_bits(static_cast<decltype(T::bits)>(bits));
    double v = f.is_nan(bits) ? kNan : f.decode(bits);
    SCOPED_TRACE(describe(r.x) + " as " + f.name + " " + hex(bits) + " = " + describe(v));
    EXPECT_EQ(kernels::cast<uint8_t>(x), trunc_saturate<uint8_t>(v));
    EXPECT_EQ(kernels::cast<uint32_t>(x), trunc_saturate<uint32_t>(v));
    EXPECT_EQ(kernels::cast<int16_t>(x), trunc_saturate<int16_t>(v));
    EXPECT_EQ(kernels::cast<int32_t>(x), trunc_saturate<int32_t>(v));
    EXPECT_EQ(kernels::cast<int64_t>(x), trunc_saturate<int64_t>(v));
  }
}

TEST(Cast, LowFloatToIntTruncatesSaturatesAndMapsNanToZero) {
  expect_low_float_to_int<f16>();
  expect_low_float_to_int<bf16>();
  // Values that the 16-bit formats change on the way in.
  EXPECT_EQ(kernels::cast<int64_t>(f16::from_bits(0x7c00)), kI64Max);  // 4294967296 is inf in f16
  EXPECT_EQ(kernels::cast<int64_t>(f16::from_bits(0xfc00)), kI64Min);
  EXPECT_EQ(kernels::cast<int32_t>(f16::from_bits(0x7e00)), 0);     // NaN
  EXPECT_EQ(kernels::cast<int16_t>(bf16::from_bits(0x4380)), 256);  // 255.5 rounds to 256 in bf16
  EXPECT_EQ(kernels::cast<int16_t>(bf16::from_bits(0x437f)), 255);  // 255
  EXPECT_EQ(kernels::cast<uint8_t>(bf16::from_bits(0x4380)), 255);
  EXPECT_EQ(kernels::cast<int32_t>(bf16::from_bits(0xc03a)), -2);    // -2.90625
  EXPECT_EQ(kernels::cast<int16_t>(f16::from_bits(0x7bff)), 32767);  // 65504 saturates
  EXPECT_EQ(kernels::cast<int32_t>(f16::from_bits(0x7bff)), 65504);
  EXPECT_EQ(kernels::cast<uint8_t>(f8e4m3::from_bits(0x7e)), 255);  // 448
  EXPECT_EQ(kernels::cast<int16_t>(f8e4m3::from_bits(0xfe)), -448);
  EXPECT_EQ(kernels::cast<int16_t>(f8e4m3::from_bits(0x7f)), 0);   // NaN
  EXPECT_EQ(kernels::cast<int32_t>(f8e4m3::from_bits(0xbc)), -1);  // -1.5
  for (uint32_t b = 0; b < 256; ++b) {
    double v = kF8E4M3Format.is_nan(b) ? kNan : kF8E4M3Format.decode(b);
    f8e4m3 x = f8e4m3::from_bits(static_cast<uint8_t>(b));
    EXPECT_EQ(kernels::cast<uint8_t>(x), trunc_saturate<uint8_t>(v)) << hex(b);
    EXPECT_EQ(kernels::cast<int16_t>(x), trunc_saturate<int16_t>(v)) << hex(b);
    EXPECT_EQ(kernels::cast<int64_t>(x), trunc_saturate<int64_t>(v)) << hex(b);
  }
}

TEST(Cast, IntToIntWrapsModuloTwoToTheBits) {
  EXPECT_EQ(kernels::cast<uint8_t>(int64_t{300}), 44);
  EXPECT_EQ(kernels::cast<uint8_t>(int64_t{-1}), 255);
  EXPECT_EQ(kernels::cast<uint8_t>(int16_t{-129}), 127);
  EXPECT_EQ(kernels::cast<uint32_t>(int32_t{-1}), 4294967295u);
  EXPECT_EQ(kernels::cast<uint32_t>(int64_t{-1}), 4294967295u);
  EXPECT_EQ(kernels::cast<uint32_t>(int64_t{0x100000007}), 7u);
  EXPECT_EQ(kernels::cast<int16_t>(int32_t{70000}), 4464);
  EXPECT_EQ(kernels::cast<int16_t>(int32_t{-70000}), -4464);
  EXPECT_EQ(kernels::cast<int16_t>(uint32_t{0x12348000}), -32768);
  EXPECT_EQ(kernels::cast<int16_t>(uint8_t{200}), 200);
  EXPECT_EQ(kernels::cast<int32_t>(uint32_t{4294967295u}), -1);
  EXPECT_EQ(kernels::cast<int32_t>(int64_t{0x10000000005}), 5);
  EXPECT_EQ(kernels::cast<int32_t>(kI64Min), 0);
  EXPECT_EQ(kernels::cast<int32_t>(kI64Max), -1);
  EXPECT_EQ(kernels::cast<int64_t>(uint32_t{4294967295u}), 4294967295);
  EXPECT_EQ(kernels::cast<int64_t>(int16_t{-5}), -5);
  EXPECT_EQ(kernels::cast<uint32_t>(int16_t{-32768}), 4294934528u);
}

uint32_t f32_bits(float f) { return std::bit_cast<uint32_t>(f); }
uint64_t f64_bits(double d) { return std::bit_cast<uint64_t>(d); }

TEST(Cast, IntToFloatRoundsOnceToNearestEven) {
  using kernels::cast;
  // bf16 keeps 8 significant bits: at 2^40 a step is 2^33. 2^32 + 1 is just over half a step, so the value
  // rounds up; through f32 it would first become 2^40 + 2^32, an exact tie, and round down to 2^40.
  EXPECT_EQ(cast<bf16>(int64_t{(1LL << 40) + (1LL << 32) + 1}).bits, 0x5381);  // 2^40 + 2^33
  EXPECT_EQ(cast<bf16>(int64_t{-((1LL << 40) + (1LL << 32) + 1)}).bits, 0xd381);
  EXPECT_EQ(cast<bf16>(int64_t{(1LL << 40) + (1LL << 32)}).bits, 0x5380);  // exact tie, to even
  // Above 2^53 even f64 would round: 2^62 + 2^54 + 1 is just over half of bf16's step of 2^55 there.
  EXPECT_EQ(cast<bf16>(int64_t{(1LL << 62) + (1LL << 54) + 1}).bits, 0x5e81);
  EXPECT_EQ(cast<bf16>(int64_t{(1LL << 62) + (1LL << 54)}).bits, 0x5e80);
  EXPECT_EQ(cast<f16>(int64_t{(1LL << 62) + 1}).bits, 0x7c00);
  EXPECT_EQ(cast<bf16>(kI64Max).bits, 0x5f00);  // 2^63
  EXPECT_EQ(cast<bf16>(kI64Min).bits, 0xdf00);
  // f16 beyond the halfway point above 65504 is inf.
  EXPECT_EQ(cast<f16>(int64_t{65504}).bits, 0x7bff);
  EXPECT_EQ(cast<f16>(int64_t{65519}).bits, 0x7bff);
  EXPECT_EQ(cast<f16>(int64_t{65520}).bits, 0x7c00);
  EXPECT_EQ(cast<f16>(int64_t{-65520}).bits, 0xfc00);
  EXPECT_EQ(cast<f16>(int64_t{1000000000000000000}).bits, 0x7c00);
  EXPECT_EQ(cast<f16>(kI64Min).bits, 0xfc00);
  // f8e4m3: past 464 is NaN.
  EXPECT_EQ(cast<f8e4m3>(int64_t{464}).bits, 0x7e);
  EXPECT_EQ(cast<f8e4m3>(int64_t{465}).bits, 0x7f);
  EXPECT_EQ(cast<f8e4m3>(int64_t{-465}).bits, 0xff);
  EXPECT_EQ(cast<f8e4m3>(int64_t{17}).bits, 0x58);   // tie: 16
  EXPECT_EQ(cast<f8e4m3>(int64_t{19}).bits, 0x5a);   // tie: 20
  EXPECT_EQ(cast<f8e4m3>(uint8_t{255}).bits, 0x78);  // 256
  EXPECT_EQ(cast<f8e4m3>(kI64Max).bits, 0x7f);
  // u32 and i32 ties.
  EXPECT_EQ(cast<f16>(uint32_t{2049}).bits, 0x6800);  // 2048
  EXPECT_EQ(cast<f16>(uint32_t{2051}).bits, 0x6802);  // 2052
  EXPECT_EQ(cast<f16>(int32_t{-2049}).bits, 0xe800);
  EXPECT_EQ(cast<f16>(int32_t{-2051}).bits, 0xe802);
  EXPECT_EQ(cast<f16>(int32_t{65520}).bits, 0x7c00);
  EXPECT_EQ(cast<f16>(uint32_t{4294967295u}).bits, 0x7c00);
  EXPECT_EQ(cast<bf16>(uint32_t{257}).bits, 0x4380);  // 256
  EXPECT_EQ(cast<bf16>(uint32_t{259}).bits, 0x4382);  // 260
  EXPECT_EQ(cast<bf16>(int32_t{-257}).bits, 0xc380);
  EXPECT_EQ(cast<bf16>(int32_t{-259}).bits, 0xc382);
  EXPECT_EQ(cast<bf16>(int32_t{16777217}).bits, 0x4b80);      // 2^24
  EXPECT_EQ(cast<bf16>(kI32Max).bits, 0x4f00);                // 2^31
  EXPECT_EQ(cast<bf16>(uint32_t{4294967295u}).bits, 0x4f80);  // 2^32
  // 2^31 + 2^23 + 1: just over half of bf16's step of 2^24; f32 would make it the tie 2^31 + 2^23.
  EXPECT_EQ(cast<bf16>(uint32_t{0x80800001u}).bits, 0x4f01);
  EXPECT_EQ(cast<bf16>(int32_t{-0x40400001}).bits, 0xce81);  // -(2^30 + 2^23)
  // i16 and u8 are exact in f32, then rounded once.
  EXPECT_EQ(cast<f16>(int16_t{-32768}).bits, 0xf800);
  EXPECT_EQ(cast<f16>(int16_t{4098}).bits, 0x6c00);  // tie: 4096
  EXPECT_EQ(cast<f16>(int16_t{4102}).bits, 0x6c02);  // tie: 4104
  EXPECT_EQ(cast<bf16>(uint8_t{255}).bits, 0x437f);
  // f32 and f64 near 2^63. f32's step below 2^63 is 2^39, f64's is 2^10.
  EXPECT_EQ(f32_bits(cast<float>(kI64Max)), 0x5f000000u);
  EXPECT_EQ(f32_bits(cast<float>(kI64Min)), 0xdf000000u);
  EXPECT_EQ(f32_bits(cast<float>(int64_t{kI64Max - (1LL << 38)})), 0x5effffffu);      // just under the tie
  EXPECT_EQ(f32_bits(cast<float>(int64_t{kI64Max - (1LL << 38) + 1})), 0x5f000000u);  // the tie: to even, 2^63
  EXPECT_EQ(f32_bits(cast<float>(int64_t{(1LL << 62) + (1LL << 38) + 1})), 0x5e800001u);
  EXPECT_EQ(f64_bits(cast<double>(kI64Max)), 0x43e0000000000000u);
  EXPECT_EQ(f64_bits(cast<double>(kI64Min)), 0xc3e0000000000000u);
  EXPECT_EQ(f64_bits(cast<double>(int64_t{kI64Max - (1LL << 9)})), 0x43dfffffffffffffu);
  EXPECT_EQ(f64_bits(cast<double>(int64_t{kI64Max - (1LL << 9) + 1})), 0x43e0000000000000u);
  EXPECT_EQ(f64_bits(cast<double>(int64_t{(1LL << 62) + (1LL << 9)})), 0x43d0000000000000u);  // tie: to even
  EXPECT_EQ(f64_bits(cast<double>(int64_t{(1LL << 62) + (3LL << 9)})), 0x43d0000000000002u);  // tie: to even
  EXPECT_EQ(f64_bits(cast<double>(int64_t{(1LL << 62) + (1LL << 9) + 1})), 0x43d0000000000001u);
  EXPECT_EQ(f32_bits(cast<float>(uint32_t{4294967295u})), 0x4f800000u);
  EXPECT_EQ(f32_bits(cast<float>(uint32_t{16777217})), 0x4b800000u);
  EXPECT_EQ(f32_bits(cast<float>(uint32_t{16777219})), 0x4b800002u);
  EXPECT_EQ(f32_bits(cast<float>(int32_t{-16777219})), 0xcb800002u);
}

// |a| rounded to `sig` significant bits, ties to even, as an exact double.
double round_to_significant_bits(uint64_t a, int sig) {
  int width = 64 - std::countl_zero(a);
  if (width <= sig) return static_cast<double>(a);
  int shift = width - sig;
  uint64_t q = a >> shift, rem = a & ((uint64_t{1} << shift) - 1), half = uint64_t{1} << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) ++q;
  return std::ldexp(static_cast<double>(q), shift);
}

// Integers never reach the subnormals of these formats, so rounding to the significand width and then
// placing the exact result (or overflowing) is the whole conversion.
template <typename I>
void expect_int_converts(Mismatches& m, I v) {
  bool neg = false;
  if constexpr (std::is_signed_v<I>) neg = v < 0;
  uint64_t a = neg ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  auto rounded = [&](int sig) { return (neg ? -1.0 : 1.0) * round_to_significant_bits(a, sig); };
  std::string what = std::to_string(v) + " (" + hex(static_cast<uint64_t>(v)) + ")";
  auto low = [&](auto tag) {
    using T = decltype(tag);
    const Oracle& o = oracle<T>();
    uint32_t want = o.round(rounded(o.format.mant_bits + 1));
    uint32_t got = kernels::cast<T>(v).bits;
    m.check(same_result(o.format, want, got), what + " -> " + o.format.name + " " + hex(got) + ", want " + hex(want));
  };
  low(f16{});
  low(bf16{});
  low(f8e4m3{});
  uint32_t want32 = f32_bits(static_cast<float>(rounded(24)));
  uint32_t got32 = f32_bits(kernels::cast<float>(v));
  m.check(want32 == got32, what + " -> f32 " + hex(got32) + ", want " + hex(want32));
  uint64_t want64 = f64_bits(rounded(53));
  uint64_t got64 = f64_bits(kernels::cast<double>(v));
  m.check(want64 == got64, what + " -> f64 " + hex(got64) + ", want " + hex(want64));
}

TEST(Cast, IntToFloatMatchesOracleOnRandomAndNearTieValues) {
  std::mt19937_64 rng(2024);
  Mismatches m("int -> float");
  auto random_width = [&](int max_width) {
    int w = static_cast<int>(rng() % (max_width + 1));
    return w == 0 ? uint64_t{0} : rng() >> (64 - w);
  };
  for (int i = 0; i < 4000; ++i) {
    expect_int_converts(m, static_cast<uint8_t>(random_width(8)));
    expect_int_converts(m, static_cast<int16_t>(random_width(16)));
    expect_int_converts(m, static_cast<uint32_t>(random_width(32)));
    expect_int_converts(m, static_cast<int32_t>(random_width(32)));
    expect_int_converts(m, static_cast<int64_t>(random_width(64)));
  }
  // Values at, just under and just over a tie for each significand width, at every magnitude.
  for (int sig : {4, 8, 11, 24, 53}) {
    for (int width = sig + 1; width <= 64; ++width) {
      for (int rep = 0; rep < 8; ++rep) {
        int shift = width - sig;
        uint64_t top = (rng() | (uint64_t{1} << 63)) >> (64 - width);
        uint64_t base = (top >> shift << shift) | (uint64_t{1} << (shift - 1));
        for (int64_t delta : {-1, 0, 1}) {
          uint64_t a = base + static_cast<uint64_t>(delta);
          expect_int_converts(m, static_cast<int64_t>(a));
          expect_int_converts(m, static_cast<int64_t>(uint64_t{0} - a));
          if (width <= 32) {
            expect_int_converts(m, static_cast<uint32_t>(a));
            expect_int_converts(m, static_cast<int32_t>(static_cast<uint32_t>(a)));
          }
        }
      }
    }
  }
}

TEST(Cast, FloatToLowFloatRoundsOnce) {
  // f64 -> low float through kernels::cast keeps the single rounding of the constructors.
  EXPECT_EQ(kernels::cast<f16>(1 + 0x1p-11 + 0x1p-45).bits, 0x3c01);
  EXPECT_EQ(kernels::cast<bf16>(1 + 0x1p-8 + 0x1p-50).bits, 0x3f81);
  EXPECT_EQ(kernels::cast<f8e4m3>(464.0 + 0x1p-30).bits, 0x7f);
  EXPECT_EQ(kernels::cast<f16>(1 + 0x1p-11f).bits, 0x3c00);
  // Between low floats: exact widening to f32, then one rounding.
  EXPECT_EQ(kernels::cast<f16>(bf16::from_bits(0x4780)).bits, 0x7c00);  // 65536
  EXPECT_EQ(kernels::cast<f8e4m3>(f16::from_bits(0x5f40)).bits, 0x7e);  // 464: tie to 448
  EXPECT_EQ(kernels::cast<bf16>(f16::from_bits(0x3c01)).bits, 0x3f80);  // 1 + 2^-10
  EXPECT_EQ(kernels::cast<bf16>(f8e4m3::from_bits(0xff)).bits & 0x7fffu, 0x7fc0u);
  EXPECT_TRUE(std::isnan(kernels::cast<float>(f8e4m3::from_bits(0x7f))));
}

// ---- Philox ----

TEST(Philox, MatchesRandom123KnownAnswers) {
  struct Kat {
    kernels::PhiloxBlock ctr;
    uint32_t k0, k1;
    uint32_t want[4];
  };
  // Random123's kat_vectors, philox4x32 with 10 rounds.
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
       0xffffffff,
       0xffffffff,
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
       0xa4093822,
       0x299f31d0,
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    kernels::PhiloxBlock got = kernels::philox4x32_10(k.ctr, k.k0, k.k1);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(got.w[i], k.want[i]) << "counter word 0 " << hex(k.ctr.w[0]) << ", lane " << i;
  }
  // philox_block packs (block, stream) into the counter and the seed into the key.
  kernels::PhiloxBlock b = kernels::philox_block(0x299f31d0a4093822ull, 0x0370734413198a2eull, 0x85a308d3243f6a88ull);
  EXPECT_EQ(b.w[0], 0xd16cfe09u);
  EXPECT_EQ(b.w[3], 0x24126ea1u);
}

// ---- dtype tables ----

TEST(DTypeTable, SizesNamesAndKinds) {
  struct Row {
    DType dt;
    int64_t size;
    const char* name;
    bool is_float;
    bool is_unsigned;
  };
  const Row rows[] = {
      {DType::U8, 1, "u8", false, true},    {DType::U32, 4, "u32", false, true},
      {DType::I16, 2, "i16", false, false}, {DType::I32, 4, "i32", false, false},
      {DType::I64, 8, "i64", false, false}, {DType::BF16, 2, "bf16", true, false},
      {DType::F16, 2, "f16", true, false},  {DType::F32, 4, "f32", true, false},
      {DType::F64, 8, "f64", true, false},  {DType::F8E4M3, 1, "f8e4m3", true, false},
  };
  ASSERT_EQ(kNumDTypes, 10);
  for (int i = 0; i < kNumDTypes; ++i) {
    const Row& r = rows[i];
    SCOPED_TRACE(r.name);
    EXPECT_EQ(kAllDTypes[i], r.dt);
    EXPECT_EQ(dtype_size(r.dt), r.size);
    EXPECT_EQ(dtype_name(r.dt), r.name);
    EXPECT_EQ(is_float(r.dt), r.is_float);
    EXPECT_EQ(is_int(r.dt), !r.is_float);
    EXPECT_EQ(is_unsigned(r.dt), r.is_unsigned);
    DType parsed = r.dt == DType::U8 ? DType::F64 : DType::U8;
    EXPECT_TRUE(parse_dtype(r.name, &parsed));
    EXPECT_EQ(parsed, r.dt);
    std::ostringstream os;
    os << r.dt;
    EXPECT_EQ(os.str(), r.name);
  }
}

TEST(DTypeTable, ParseRejectsUnknownNames) {
  for (const char* name : {"", "F32", "float32", "f128", "u16", "f8", "bf16 ", " f32", "i8"}) {
    DType out = DType::I16;
    EXPECT_FALSE(parse_dtype(name, &out)) << '"' << name << '"';
    EXPECT_EQ(out, DType::I16) << "output changed by a failed parse of \"" << name << '"';
  }
}

TEST(DTypeTable, CxxTypesMapToTheirDTypes) {
  static_assert(dtype_of<uint8_t> == DType::U8 && dtype_of<uint32_t> == DType::U32);
  static_assert(dtype_of<int16_t> == DType::I16 && dtype_of<int32_t> == DType::I32 && dtype_of<int64_t> == DType::I64);
  static_assert(dtype_of<bf16> == DType::BF16 && dtype_of<f16> == DType::F16 && dtype_of<f8e4m3> == DType::F8E4M3);
  static_assert(dtype_of<float> == DType::F32 && dtype_of<double> == DType::F64);
  static_assert(sizeof(f16) == 2 && sizeof(bf16) == 2 && sizeof(f8e4m3) == 1);
  SUCCEED();
}


// The CPU nn kernels' vectorised row conversions (cpu/nn/rows.h) give the scalar conversions' bits:
// every half widened, and rounding to halves at and around every half, its ties, and random bits.
TEST(RowConversions, MatchTheScalarConversionsBitForBit) {
  std::vector<bf16> b(65536);
  std::vector<f16> h(65536);
  for (uint32_t i = 0; i < 65536; ++i) {
    b[i] = bf16::from_bits(static_cast<uint16_t>(i));
    h[i] = f16::from_bits(static_cast<uint16_t>(i));
  }
  std::vector<float> wide(65536);
  cpu::rows::widen_row(b.data(), 65535, wide.data());  // odd: the loop's tail too
  for (uint32_t i = 0; i < 65535; ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(wide[i]), std::bit_cast<uint32_t>(static_cast<float>(b[i]))) << "bf16 " << i;
  cpu::rows::widen_row(h.data(), 65535, wide.data());
  for (uint32_t i = 0; i < 65535; ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(wide[i]), std::bit_cast<uint32_t>(static_cast<float>(h[i]))) << "f16 " << i;

  std::vector<float> x;
  for (uint32_t i = 0; i < 65536; ++i)
    for (const float base : {static_cast<float>(b[i]), static_cast<float>(h[i])})
      for (const int32_t step : {0, 1, -1, 0x0fff, 0x1000, 0x1001, 0x7fff, 0x8000, 0x8001})
        x.push_back(std::bit_cast<float>(std::bit_cast<uint32_t>(base) + static_cast<uint32_t>(step)));
  std::mt19937 rng(7);
  for (int i = 0; i < 1 << 20; ++i) x.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  x.push_back(std::numeric_limits<float>::infinity());
  x.push_back(-std::numeric_limits<float>::infinity());
  x.push_back(std::numeric_limits<float>::denorm_min());
  x.push_back(65520.f);
  x.push_back(65519.996f);
  x.push_back(std::ldexp(1.f, -25));
  x.push_back(std::ldexp(1.5f, -25));
  const int64_t n = static_cast<int64_t>(x.size()) - 3;  // a tail again
  std::vector<bf16> nb(x.size());
  std::vector<f16> nh(x.size());
  cpu::rows::narrow_row(x.data(), n, nb.data());
  cpu::rows::narrow_row(x.data(), n, nh.data());
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = std::bit_cast<uint32_t>(x[static_cast<size_t>(i)]);
    ASSERT_EQ(nb[static_cast<size_t>(i)].bits, bf16(x[static_cast<size_t>(i)]).bits) << "to bf16 from " << bits;
    ASSERT_EQ(nh[static_cast<size_t>(i)].bits, f16(x[static_cast<size_t>(i)]).bits) << "to f16 from " << bits;
  }
}

}  // namespace
}  // namespace wick
