// aarch64's dot-product kernels of the block formats (src/cpu/quant/qdot_arm.cpp) against the
// portable loop's formula, kernels/quant.h's load_unit and unit_dot unit by unit, for every format,
// 1 to 8 rows of x and rows of an odd count of blocks. scripts/arm-check builds this with an
// aarch64 cross compiler beside the two qdot sources (no other part of wick) and runs it under
// qemu-aarch64: on a core with the dot products (the kernels run, and must agree) and on one
// without (best_isa() is None, and simd_rows declines: the portable loops run). Exits 1 on the
// first disagreement; prints one summary line.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "cpu/quant/qdot.h"

namespace {

namespace kq = wick::kernels::quant;
namespace qdot = wick::cpu::qdot;
using wick::quant::QType;

// A block of random bytes whose scales are finite: f16 fields between 2^-7 and 2^-4, an f32 d
// likewise.
template <QType Q>
void random_block(typename kq::Format<Q>::Block& b, std::mt19937& g) {
  std::uniform_int_distribution<int> byte(0, 255);
  auto* bytes = reinterpret_cast<unsigned char*>(&b);
  for (size_t i = 0; i < sizeof(b); ++i) bytes[i] = static_cast<unsigned char>(byte(g));
  std::uniform_int_distribution<int> half(0x2000, 0x2bff);  // f16 normals in [2^-7, 2^-4)
  auto scale = [&](auto& field) {
    if constexpr (std::is_same_v<std::remove_reference_t<decltype(field)>, uint16_t>)
      field = static_cast<uint16_t>(half(g));
    else
      field = std::uniform_real_distribution<float>(0.01f, 0.1f)(g);
  };
  if constexpr (requires { b.d; }) scale(b.d);
  if constexpr (requires { b.dmin; }) scale(b.dmin);
  if constexpr (requires { b.m; }) scale(b.m);
  if constexpr (requires { b.s; }) scale(b.s);
}

// A format's name, from the list wick/quant.h keeps (qtype_name is the library's, not linked here).
const char* name_of(QType q) {
  switch (q) {
#define WICK_X(e, name, ggml) \
  case QType::e: return name;
    WICK_FORALL_QTYPES(WICK_X)
#undef WICK_X
  }
  return "?";
}

struct Dot4 {
  int operator()(uint32_t a, uint32_t b, int c) const { return kq::dot4_bytes(a, b, c); }
};

// Rows [0, n) of w times the m rows of x, unit by unit as unit_dot gives each.
template <QType Q>
void portable(const std::vector<typename kq::Format<Q>::Block>& w, int64_t n, int64_t k, const qdot::RoundedX& x,
              int64_t m, float* out) {
  using F = kq::Format<Q>;
  const int64_t nb = k / F::kValues, units = k / kq::kUnit;
  for (int64_t t = 0; t < m; ++t)
    for (int64_t r = 0; r < n; ++r) {
      float acc = 0;
      for (int64_t u = 0; u < units; ++u) {
        const auto& b = w[static_cast<size_t>(r * nb + u / (F::kValues / kq::kUnit))];
        const kq::Unit unit = kq::load_unit<Q>(b, static_cast<int>(u % (F::kValues / kq::kUnit)));
        uint32_t aw[8];
        std::memcpy(aw, x.q.data() + t * k + u * kq::kUnit, sizeof aw);
        const size_t at = static_cast<size_t>(t * units + u);
        acc += kq::unit_dot<Q>(unit, aw, kq::ActScale{x.d[at], x.s[2 * at], x.s[2 * at + 1]}, Dot4{});
      }
      out[t * n + r] = acc;
    }
}

int failures = 0, agreed = 0;

template <QType Q>
void check(bool expect_kernels) {
  using F = kq::Format<Q>;
  std::mt19937 g(static_cast<unsigned>(Q) * 7919u + 1u);
  const int64_t n = 19, k = F::kValues * (F::kValues == 32 ? 17 : 3);  // an odd count of blocks
  std::vector<typename F::Block> w(static_cast<size_t>(n * (k / F::kValues)));
  for (auto& b : w) random_block<Q>(b, g);
  for (int64_t m = 1; m <= qdot::kMaxRows; ++m) {
    std::vector<float> xf(static_cast<size_t>(m * k));
    std::normal_distribution<float> normal(0.f, 1.f);
    for (float& v : xf) v = normal(g);
    qdot::RoundedX x(m, k, qdot::offset_order(Q, k));
    for (int64_t t = 0; t < m; ++t) qdot::round_row(xf.data() + t * k, k, x, t);
    std::vector<float> want(static_cast<size_t>(m * n)), got(static_cast<size_t>(m * n), NAN);
    portable<Q>(w, n, k, x, m, want.data());
    const bool ran =
        qdot::simd_rows(Q, reinterpret_cast<const uint8_t*>(w.data()), 0, n, k, qdot::XRows(x, 0, k), m, got.data(), n);
    if (ran != expect_kernels) {
      std::printf("qdot_check: %s m %lld: simd_rows %s\n", name_of(Q), static_cast<long long>(m),
                  ran ? "ran where no kernel should" : "declined");
      ++failures;
      continue;
    }
    if (!ran) continue;
    double err = 0, norm = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      err += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
      norm += double(want[i]) * want[i];
    }
    // The same integer dot products; only the order of the float sums differs.
    if (!(err <= 1e-10 * norm)) {
      std::printf("qdot_check: %s m %lld: relative squared error %g\n", name_of(Q), static_cast<long long>(m),
                  norm > 0 ? err / norm : err);
      ++failures;
    } else {
      ++agreed;
    }
  }
}

}  // namespace

int main() {
  const bool dotprod = qdot::best_isa() == qdot::Isa::Neon;
  if (qdot::active_isa() != qdot::best_isa()) {
    std::printf("qdot_check: the active kernels (%s) are not the best (%s)\n", qdot::isa_name(qdot::active_isa()),
                qdot::isa_name(qdot::best_isa()));
    return 1;
  }
  for (QType q : wick::quant::kAllQTypes) kq::dispatch_qtype(q, [&]<QType Q>() { check<Q>(dotprod); });
  // Limited to the portable loops, the kernels decline.
  const qdot::Isa was = qdot::set_isa_limit(qdot::Isa::None);
  check<QType::Q4_0>(false);
  qdot::set_isa_limit(was);
  std::printf("qdot_check: %s kernels (best_isa %s): %d products agree with the portable loop, %d failures\n",
              dotprod ? "aarch64 dot-product" : "no SIMD", qdot::isa_name(qdot::best_isa()), agreed, failures);
  return failures == 0 ? 0 : 1;
}
