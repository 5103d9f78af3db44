// The products of arranged weights (arranged.h) on x86-64 machines with AVX-512 VNNI. A block of a
// group is four 64-byte vectors; masked and shifted, they are the 8 vectors of the unit's bytes
// whose lane r holds 4 values of row r, so that a dpbusd with 4 bytes of a row of x, broadcast,
// adds 4 products to each of the 16 rows' sums: nothing is summed across lanes and nothing is
// repacked per call. Q4_0's values are q - 8 with q unsigned below 16, so 8 times the sum of x's
// bytes starts each integer sum. Where the processor has AMX, many rows of x take its tiles instead
// (amx.h), with the same integer sums and the same float arithmetic after them.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "cpu/prefetch.h"
#include "cpu/quant/amx.h"
#include "cpu/quant/arranged.h"
#include "cpu/scratch.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define WICK_ARRANGED_X86 1
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // as in qdot_x86.cpp: GCC 12's AVX-512 intrinsics
#endif
#include <immintrin.h>
#else
#define WICK_ARRANGED_X86 0
#endif

namespace wick::cpu::arranged {

using quant::QType;

#if WICK_ARRANGED_X86

namespace {

#define WICK_AVX512 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni,f16c")))

// The 4 bytes of x at a, in every lane.
WICK_AVX512 inline __m512i broadcast4(const int8_t* a) {
  int32_t v;
  std::memcpy(&v, a, 4);
  return _mm512_set1_epi32(v);
}

// A block of a Q4_0 group unpacked: its 8 vectors of bytes below 16, then its 16 rows' d as floats.
constexpr int64_t kUnpackedBytes = 8 * 64 + 64;

// Block i of a Q4_0 group g (nb blocks per row): w, the unit's bytes (lane r: 4 values of row r),
// and d, the rows' scales; from the group itself or from its unpacked copy.
template <bool kUnpacked>
WICK_AVX512 inline void load_block(const uint8_t* g, int64_t nb, int64_t i, __m512i (&w)[8], __m512& d) {
  if constexpr (kUnpacked) {
    const uint8_t* p = g + i * kUnpackedBytes;
    for (int v = 0; v < 8; ++v) w[v] = _mm512_load_si512(p + 64 * v);
    d = _mm512_load_ps(p + 8 * 64);
  } else {
    const Q4_0Block at = q4_0_block(i, nb);
    const uint8_t* q = g + at.q;
    prefetch_ahead<kRows * 18>(g + i * kRows * 18);
    const __m512i low = _mm512_set1_epi8(0x0f);
    for (int v = 0; v < 4; ++v) {
      const __m512i b = _mm512_loadu_si512(q + 64 * v);
      w[v] = _mm512_and_si512(b, low);
      w[v + 4] = _mm512_and_si512(_mm512_srli_epi16(b, 4), low);
    }
    d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + at.d)));
  }
}

// A Q4_0 group (nb blocks per row, or its unpacked copy) times the T rows of x: out[t * n + r] for
// its rows r < 16.
template <int T, bool kUnpacked>
WICK_AVX512 void q4_0_group(const uint8_t* g, int64_t nb, qdot::XRows x, int64_t k, float* out, int64_t n) {
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    __m512i w[8];
    __m512 d;
    load_block<kUnpacked>(g, nb, i, w, d);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const int8_t* a = x.q + t * k + 32 * i;
      const int64_t at = t * nb + i;
      __m512i sum = _mm512_set1_epi32(-8 * (x.qsum[2 * at] + x.qsum[2 * at + 1]));
#pragma GCC unroll 8
      for (int v = 0; v < 8; ++v) sum = _mm512_dpbusd_epi32(sum, w[v], broadcast4(a + 4 * v));
      acc[t] = _mm512_fmadd_ps(d, _mm512_mul_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(x.d[at])), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(out + t * n, acc[t]);
}

// A Q4_0 group unpacked (nb blocks of kUnpackedBytes): load_block's vectors, as they are or, for
// AMX's tiles (amx.h's layout), with 8 taken from every byte (the values q - 8 as signed bytes),
// then the rows' d.
static_assert(kUnpackedBytes == amx::kBlockBytes);
template <bool kSigned>
WICK_AVX512 void unpack_group(const uint8_t* g, int64_t nb, uint8_t* out) {
  const __m512i eight = _mm512_set1_epi8(8);
  for (int64_t i = 0; i < nb; ++i) {
    __m512i w[8];
    __m512 d;
    load_block<false>(g, nb, i, w, d);
    for (int v = 0; v < 8; ++v)
      _mm512_store_si512(out + i * kUnpackedBytes + 64 * v, kSigned ? _mm512_sub_epi8(w[v], eight) : w[v]);
    _mm512_store_ps(out + i * kUnpackedBytes + 8 * 64, d);
  }
}

// Rows [r0, r1) (whole groups) times the m rows of x on AMX's tiles: the integer sums of (q - 8) x are
// q4_0_group's (-8 times x's sum plus q x) and amx::group_products' float arithmetic is q4_0_group's,
// so each row gets the same bits from either kernel.
void q4_0_rows_amx(const uint8_t* w, int64_t r0, int64_t r1, int64_t k, const qdot::RoundedX& x, int64_t m, float* out,
                   int64_t n) {
  const int64_t nb = k / 32, group_bytes = kRows * quant::row_bytes(QType::Q4_0, k);
  Scratch<uint8_t> storage(nb * kUnpackedBytes + 64);
  uint8_t* unpacked = storage.data() + (-reinterpret_cast<uintptr_t>(storage.data()) & 63);
  for (int64_t r = r0; r < r1; r += kRows) {
    unpack_group<true>(w + r / kRows * group_bytes, nb, unpacked);
    amx::group_products(unpacked, nb, x, m, k, out + r, n);
  }
}

// Rows of x past which a group is unpacked once for all their tiles rather than per tile.
constexpr int64_t kUnpackRows = 2 * qdot::kMaxRows;

WICK_AVX512 void q4_0_rows(const uint8_t* w, int64_t r0, int64_t r1, int64_t k, const qdot::RoundedX& x, int64_t m,
                           float* out, int64_t n) {
  const int64_t nb = k / 32, group_bytes = kRows * quant::row_bytes(QType::Q4_0, k);
  const bool unpack = m > kUnpackRows;
  Scratch<uint8_t> storage(unpack ? nb * kUnpackedBytes + 64 : 0);
  uint8_t* unpacked = storage.data() + (-reinterpret_cast<uintptr_t>(storage.data()) & 63);
  for (int64_t r = r0; r < r1; r += kRows) {
    const uint8_t* g = w + r / kRows * group_bytes;
    if (unpack) unpack_group<false>(g, nb, unpacked);
    for (int64_t t0 = 0; t0 < m; t0 += qdot::kMaxRows) {
      const qdot::XRows xt(x, t0, k);
      [&]<int... T>(std::integer_sequence<int, T...>) {
        ((std::min(qdot::kMaxRows, m - t0) == T + 1
              ? (unpack ? q4_0_group<T + 1, true>(unpacked, nb, xt, k, out + t0 * n + r, n)
                        : q4_0_group<T + 1, false>(g, nb, xt, k, out + t0 * n + r, n))
              : void()),
         ...);
      }
      (std::make_integer_sequence<int, qdot::kMaxRows>{});
    }
  }
}

}  // namespace

int64_t simd_rows(QType qtype, const uint8_t* w, int64_t r0, int64_t r1, int64_t k, const qdot::RoundedX& x, int64_t m,
                  float* out, int64_t n) {
  if (!arranges(qtype, k)) return r0;
  const int64_t end = r0 + (r1 - r0) / kRows * kRows;
  if (m >= amx::kMinRows && amx::active())
    q4_0_rows_amx(w, r0, end, k, x, m, out, n);
  else
    q4_0_rows(w, r0, end, k, x, m, out, n);
  return end;
}

#else

int64_t simd_rows(QType, const uint8_t*, int64_t r0, int64_t, int64_t, const qdot::RoundedX&, int64_t, float*,
                  int64_t) {
  return r0;
}

#endif

}  // namespace wick::cpu::arranged
