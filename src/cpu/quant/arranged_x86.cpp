// The products of arranged weights (arranged.h) on x86-64 machines with AVX-512 VNNI. A block of a
// group is four 64-byte vectors; masked and shifted, they are the 8 vectors of the unit's bytes
// whose lane r holds 4 values of row r, so that a dpbusd with 4 bytes of a row of x, broadcast,
// adds 4 products to each of the 16 rows' sums: nothing is summed across lanes and nothing is
// repacked per call. Q4_0's values are q - 8 with q unsigned below 16, so 8 times the sum of x's
// bytes starts each integer sum. Where the processor has AMX (Intel's matrix units, from Sapphire
// Rapids on) and Linux lets the process use them, tiles of x's rows take the products of many rows
// instead (q4_0_group_amx), with the same integer sums and the same float arithmetic after them.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "cpu/prefetch.h"
#include "cpu/quant/arranged.h"
#include "cpu/scratch.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define WICK_ARRANGED_X86 1
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // as in qdot_x86.cpp: GCC 12's AVX-512 intrinsics
#endif
#include <cpuid.h>
#include <immintrin.h>
#include <unistd.h>

#include <sys/syscall.h>
#else
#define WICK_ARRANGED_X86 0
#endif

namespace wick::cpu::arranged {

using quant::QType;

#if WICK_ARRANGED_X86

namespace {

#define WICK_AVX512 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni,f16c")))
#define WICK_AMX __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni,f16c,amx-tile,amx-int8")))

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

// ---- AMX --------------------------------------------------------------------------------------

// Whether the processor has AMX's tiles and 8-bit products (CPUID leaf 7: EDX bits 24 and 25) and
// Linux grants this process their state (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA, once for
// every thread of the process).
bool amx_present() {
  static const bool present = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0 || (d >> 24 & 3u) != 3u) return false;
    constexpr long kReqXcompPerm = 0x1023, kXtiledata = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXtiledata) == 0;
  }();
  return present;
}

std::atomic<bool> amx_allowed{true};

bool amx_active() { return amx_allowed.load(std::memory_order_relaxed) && amx_present(); }

// Rows of x from which a group's products take the tiles. Each group is first unpacked to signed
// bytes, and each block's sums go through memory from the tiles to the vector registers; on 2 cores
// of an Emerald Rapids Xeon (a 1B-shape Q4_0 file through bench-serve) steps of 4 sequences took
// 52.7 ms a token on the tiles against 39.4 on the vector kernel, steps of 16 105.3 against 105.3,
// and 512-token prompts 419.8 tokens/s against 303.
constexpr int64_t kAmxRows = 32;

// The tiles' shapes (palette 1), for two blocks in flight (b = 0, 1): tile 3b the int32 sums (rows
// of x by the group's 16 rows), tile 3b + 1 a block of rows of x (32 bytes each), tile 3b + 2 a
// block of the group (its 8 vectors: row j holds each weight row's values 4j..4j + 3, as dpbssd
// takes them).
struct alignas(64) TileShapes {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

WICK_AMX inline void configure_tiles(int m) {
  TileShapes t;
  for (int b = 0; b < 2; ++b) {
    t.rows[3 * b] = static_cast<uint8_t>(m);
    t.colsb[3 * b] = 64;
    t.rows[3 * b + 1] = static_cast<uint8_t>(m);
    t.colsb[3 * b + 1] = 32;
    t.rows[3 * b + 2] = 8;
    t.colsb[3 * b + 2] = 64;
  }
  // GCC 12 does not count ldtilecfg's read of t: without the barrier it dropped the stores of colsb.
  asm volatile("" : : "r"(&t) : "memory");
  _tile_loadconfig(&t);
}

// A Q4_0 group's unpacked copy for the tiles: load_block's vectors with 8 taken from every byte
// (the values q - 8 as signed bytes), then the rows' d.
WICK_AVX512 inline void unpack_signed(const uint8_t* g, int64_t nb, uint8_t* out) {
  const __m512i eight = _mm512_set1_epi8(8);
  for (int64_t i = 0; i < nb; ++i) {
    __m512i w[8];
    __m512 d;
    load_block<false>(g, nb, i, w, d);
    for (int v = 0; v < 8; ++v) _mm512_store_si512(out + i * kUnpackedBytes + 64 * v, _mm512_sub_epi8(w[v], eight));
    _mm512_store_ps(out + i * kUnpackedBytes + 8 * 64, d);
  }
}

// Block i's int32 sums (T rows of 16) into acc: q4_0_group's float arithmetic.
template <int T>
WICK_AMX inline void add_block(const uint8_t* g, int64_t nb, int64_t i, const qdot::XRows& x, const int32_t (*sums)[16],
                               __m512 (&acc)[T]) {
  const __m512 d = _mm512_load_ps(g + i * kUnpackedBytes + 8 * 64);
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    const __m512i sum = _mm512_load_si512(sums[t]);
    acc[t] = _mm512_fmadd_ps(d, _mm512_mul_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(x.d[t * nb + i])), acc[t]);
  }
}

// q4_0_group's products of T rows of x (at most 16) on the tiles, from a group's signed copy: the
// sum of (q - 8) x is q4_0_group's integer sum (-8 times x's sum plus that of q x), and the float
// arithmetic after it is q4_0_group's, so each row gets the same bits from either kernel.
template <int T>
WICK_AMX void q4_0_group_amx(const uint8_t* g, int64_t nb, qdot::XRows x, int64_t k, float* out, int64_t n) {
  static_assert(T >= 1 && T <= 16);
  alignas(64) int32_t sums[2][T][16];
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  // Two blocks a step, each on tiles of its own, so that the second's products run while the first's
  // sums are scaled (the tile numbers are immediates: each block's calls are written out).
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const uint8_t* p = g + i * kUnpackedBytes;
    _tile_zero(0);
    _tile_loadd(1, x.q + 32 * i, k);
    _tile_loadd(2, p, 64);
    _tile_zero(3);
    _tile_loadd(4, x.q + 32 * (i + 1), k);
    _tile_loadd(5, p + kUnpackedBytes, 64);
    _tile_dpbssd(0, 1, 2);
    _tile_dpbssd(3, 4, 5);
    _tile_stored(0, sums[0], 64);
    _tile_stored(3, sums[1], 64);
    add_block<T>(g, nb, i, x, sums[0], acc);
    add_block<T>(g, nb, i + 1, x, sums[1], acc);
  }
  if (i < nb) {
    _tile_zero(0);
    _tile_loadd(1, x.q + 32 * i, k);
    _tile_loadd(2, g + i * kUnpackedBytes, 64);
    _tile_dpbssd(0, 1, 2);
    _tile_stored(0, sums[0], 64);
    add_block<T>(g, nb, i, x, sums[0], acc);
  }
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(out + t * n, acc[t]);
}

// Rows [r0, r1) (whole groups) times the m rows of x on the tiles, 16 rows of x at a time.
WICK_AMX void q4_0_rows_amx(const uint8_t* w, int64_t r0, int64_t r1, int64_t k, const qdot::RoundedX& x, int64_t m,
                            float* out, int64_t n) {
  constexpr int64_t kTileRows = 16;
  const int64_t nb = k / 32, group_bytes = kRows * quant::row_bytes(QType::Q4_0, k);
  Scratch<uint8_t> storage(nb * kUnpackedBytes + 64);
  uint8_t* unpacked = storage.data() + (-reinterpret_cast<uintptr_t>(storage.data()) & 63);
  int configured = 0;
  for (int64_t r = r0; r < r1; r += kRows) {
    unpack_signed(w + r / kRows * group_bytes, nb, unpacked);
    for (int64_t t0 = 0; t0 < m; t0 += kTileRows) {
      const int rows = static_cast<int>(std::min(kTileRows, m - t0));
      if (rows != configured) {
        configure_tiles(rows);
        configured = rows;
      }
      const qdot::XRows xt(x, t0, k);
      [&]<int... T>(std::integer_sequence<int, T...>) {
        ((rows == T + 1 ? q4_0_group_amx<T + 1>(unpacked, nb, xt, k, out + t0 * n + r, n) : void()), ...);
      }
      (std::make_integer_sequence<int, kTileRows>{});
    }
  }
  _tile_release();
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
    if (unpack) {
      for (int64_t i = 0; i < nb; ++i) {
        __m512i b[8];
        __m512 d;
        load_block<false>(g, nb, i, b, d);
        for (int v = 0; v < 8; ++v) _mm512_store_si512(unpacked + i * kUnpackedBytes + 64 * v, b[v]);
        _mm512_store_ps(unpacked + i * kUnpackedBytes + 8 * 64, d);
      }
    }
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
  if (m >= kAmxRows && amx_active())
    q4_0_rows_amx(w, r0, end, k, x, m, out, n);
  else
    q4_0_rows(w, r0, end, k, x, m, out, n);
  return end;
}

bool amx() { return amx_active(); }

bool set_amx(bool allowed) { return amx_allowed.exchange(allowed); }

#else

int64_t simd_rows(QType, const uint8_t*, int64_t r0, int64_t, int64_t, const qdot::RoundedX&, int64_t, float*,
                  int64_t) {
  return r0;
}

bool amx() { return false; }

bool set_amx(bool) { return false; }

#endif

}  // namespace wick::cpu::arranged
