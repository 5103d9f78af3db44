// The products of amx.h on x86-64 machines with AMX (tiles and 8-bit products) and AVX-512.
#include <algorithm>
#include <atomic>
#include <utility>

#include "cpu/quant/amx.h"
#include "cpu/scratch.h"
#include "wick/quant.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define WICK_AMX_X86 1
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // as in qdot_x86.cpp: GCC 12's AVX-512 intrinsics
#endif
#include <cpuid.h>
#include <immintrin.h>
#include <unistd.h>

#include <sys/syscall.h>
#else
#define WICK_AMX_X86 0
#endif

namespace wick::cpu::amx {

namespace {
std::atomic<bool> allowed{true};
}  // namespace

bool set_allowed(bool on) { return allowed.exchange(on); }

#if WICK_AMX_X86

namespace {

#define WICK_AVX512 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,f16c")))
#define WICK_AMX __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,f16c,amx-tile,amx-int8")))

// Whether the processor has AMX's tiles and 8-bit products (CPUID leaf 7: EDX bits 24 and 25) and
// Linux grants this process their state (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA, once for
// every thread of the process).
bool present() {
  static const bool ok = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0 || (d >> 24 & 3u) != 3u) return false;
    constexpr long kReqXcompPerm = 0x1023, kXtiledata = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXtiledata) == 0;
  }();
  return ok;
}

// Rows of x a tile takes.
constexpr int64_t kTileRows = 16;

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

// Block i's int32 sums (T rows of 16) into acc: the vector kernels' float arithmetic.
template <int T>
WICK_AMX inline void add_block(const uint8_t* g, int64_t nb, int64_t i, const qdot::XRows& x, const int32_t (*sums)[16],
                               __m512 (&acc)[T]) {
  const __m512 d = _mm512_load_ps(g + i * kBlockBytes + 8 * 64);
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    const __m512i sum = _mm512_load_si512(sums[t]);
    acc[t] = _mm512_fmadd_ps(d, _mm512_mul_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(x.d[t * nb + i])), acc[t]);
  }
}

// The products of T rows of x (at most 16) with the group: two blocks a step, each on tiles of its
// own, so that the second's products run while the first's sums are scaled.
template <int T>
WICK_AMX void block_products(const uint8_t* g, int64_t nb, qdot::XRows x, int64_t k, float* out, int64_t n) {
  static_assert(T >= 1 && T <= 16);
  alignas(64) int32_t sums[2][T][16];
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  // (The tile numbers are immediates: each block's calls are written out.)
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const uint8_t* p = g + i * kBlockBytes;
    _tile_zero(0);
    _tile_loadd(1, x.q + 32 * i, k);
    _tile_loadd(2, p, 64);
    _tile_zero(3);
    _tile_loadd(4, x.q + 32 * (i + 1), k);
    _tile_loadd(5, p + kBlockBytes, 64);
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
    _tile_loadd(2, g + i * kBlockBytes, 64);
    _tile_dpbssd(0, 1, 2);
    _tile_stored(0, sums[0], 64);
    add_block<T>(g, nb, i, x, sums[0], acc);
  }
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(out + t * n, acc[t]);
}

// Q8_0 rows r..r + 15 (plain, row_bytes apart) unpacked for the tiles: each vector gathers 4 bytes of
// every row, and the rows' d come through the same gather, 2 of its 4 bytes each.
WICK_AVX512 void unpack_q8_0(const uint8_t* rows, int64_t row_bytes, int64_t nb, uint8_t* out) {
  const __m512i offsets = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                             _mm512_set1_epi32(static_cast<int>(row_bytes)));
  constexpr int64_t kBlock = sizeof(kernels::quant::BlockQ8_0);
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* b = rows + i * kBlock;
    for (int v = 0; v < 8; ++v)
      _mm512_store_si512(out + i * kBlockBytes + 64 * v, _mm512_i32gather_epi32(offsets, b + 2 + 4 * v, 1));
    const __m256i d = _mm512_cvtepi32_epi16(_mm512_i32gather_epi32(offsets, b, 1));
    _mm512_store_ps(out + i * kBlockBytes + 8 * 64, _mm512_cvtph_ps(d));
  }
}

WICK_AMX void products_on_tiles(const uint8_t* unpacked, int64_t nb, const qdot::RoundedX& x, int64_t m, int64_t k,
                                float* out, int64_t n) {
  int configured = 0;
  for (int64_t t0 = 0; t0 < m; t0 += kTileRows) {
    const int rows = static_cast<int>(std::min(kTileRows, m - t0));
    if (rows != configured) {
      configure_tiles(rows);
      configured = rows;
    }
    const qdot::XRows xt(x, t0, k);
    [&]<int... T>(std::integer_sequence<int, T...>) {
      ((rows == T + 1 ? block_products<T + 1>(unpacked, nb, xt, k, out + t0 * n, n) : void()), ...);
    }
    (std::make_integer_sequence<int, kTileRows>{});
  }
  _tile_release();
}

}  // namespace

bool active() {
  return allowed.load(std::memory_order_relaxed) && qdot::active_isa() == qdot::Isa::Avx512Vnni && present();
}

void group_products(const uint8_t* unpacked, int64_t nb, const qdot::RoundedX& x, int64_t m, int64_t k, float* out,
                    int64_t n) {
  products_on_tiles(unpacked, nb, x, m, k, out, n);
}

int64_t q8_0_rows(const uint8_t* w, int64_t r0, int64_t r1, int64_t k, const qdot::RoundedX& x, int64_t m, float* out,
                  int64_t n) {
  if (!active() || k % 32 != 0) return r0;
  const int64_t nb = k / 32, row_bytes = quant::row_bytes(quant::QType::Q8_0, k);
  if (16 * row_bytes > INT32_MAX) return r0;
  const int64_t end = r0 + (r1 - r0) / 16 * 16;
  Scratch<uint8_t> storage(nb * kBlockBytes + 64);
  uint8_t* unpacked = storage.data() + (-reinterpret_cast<uintptr_t>(storage.data()) & 63);
  for (int64_t r = r0; r < end; r += 16) {
    unpack_q8_0(w + r * row_bytes, row_bytes, nb, unpacked);
    group_products(unpacked, nb, x, m, k, out + r, n);
  }
  return end;
}

#else

bool active() { return false; }

void group_products(const uint8_t*, int64_t, const qdot::RoundedX&, int64_t, int64_t, float*, int64_t) {}

int64_t q8_0_rows(const uint8_t*, int64_t r0, int64_t, int64_t, const qdot::RoundedX&, int64_t, float*, int64_t) {
  return r0;
}

#endif

}  // namespace wick::cpu::amx
