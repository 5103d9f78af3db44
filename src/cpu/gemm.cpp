#include "cpu/gemm.h"

#include <cblas.h>
#include <dlfcn.h>
#include <strings.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "cpu/parallel.h"
#include "wick/error.h"

namespace wick::cpu {

namespace {

void check_dims(int64_t m, int64_t n, int64_t k, const char* dtype) {
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  WICK_CHECK(m <= kMax && n <= kMax && k <= kMax, NotSupportedError, "matmul", "dims m=", m, " n=", n, " k=", k,
             " exceed the 32-bit BLAS interface (", dtype, " on cpu)");
}

CBLAS_TRANSPOSE op(const BlasMatrix& x) { return x.trans ? CblasTrans : CblasNoTrans; }

// OpenBLAS built for every x86 core (Debian's, DYNAMIC_ARCH) picks its kernels by the CPU's model
// number at load, and takes its Prescott (SSE3) kernels for a model newer than its release: 0.3.21,
// Debian 12's, does so on Intel's model 207 (Emerald Rapids), where a 2048^3 f32 product on 2 cores
// ran at 0.089 TFLOP/s against 0.457 with its SkylakeX kernels. Where it chose Prescott on a CPU with
// AVX-512 (F, BW, DQ, VL) or AVX2 and FMA, and OPENBLAS_CORETYPE is not set, wick asks it again for
// the kernels of those features, as that variable set before the process started would: through
// the entry points of its dispatch, looked up at run time (a build for one core has none, and is
// left as it is). Once, before wick's first product; a product running then on another thread of
// the process (the application's own, on the same OpenBLAS) would race with the switch.
void choose_blas_core() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr || strcasecmp(openblas_get_corename(), "prescott") != 0) return;
  __builtin_cpu_init();
  const char* core = nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl"))
    core = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    core = "Haswell";
  auto* quit = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit"));
  auto* init = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
  if (core == nullptr || quit == nullptr || init == nullptr) return;
  setenv("OPENBLAS_CORETYPE", core, 1);
  quit();
  init();
  unsetenv("OPENBLAS_CORETYPE");
#endif
}

// OpenBLAS's pthreads build (Ubuntu's default, and Debian's where its OpenMP build is not
// installed) runs a product on threads of its own, while the threads of wick's OpenMP team keep
// spinning for a while after each loop, waiting for the next one: the two share the cores. On the
// 16 cores of an H200 machine (Ubuntu 24.04's OpenBLAS 0.3.26, pthreads), a 1B-shape F16 file's
// 512-token prompt ran at 149 tokens/s, and at 296 with the team's threads made to sleep at once
// (GOMP_SPINCOUNT=0, which slowed its decoding by 12%). So under that build wick sets OpenBLAS to one
// thread and splits each product into tiles over its own team, each tile one call (gemm below).
// The OpenMP build shares wick's team and takes each product whole.
bool g_tiles = false;

void blas_ready() {
  static const bool ready = [] {
    choose_blas_core();
    if (openblas_get_parallel() == 1) {
      openblas_set_num_threads(1);
      g_tiles = true;
    }
    return true;
  }();
  (void)ready;
}

// c = op(a) op(b) by BLAS: whole, or in the tiles of plan_gemm_tiles over wick's team.
template <typename T, typename Call>
void product(int64_t m, int64_t n, int64_t k, const T* a, BlasMatrix am, const T* b, BlasMatrix bm, T* c, int64_t ldc,
             const Call& call) {
  blas_ready();
  const int threads = max_threads();
  if (!g_tiles || threads <= 1 ||
      static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) <=
          static_cast<double>(kSingleThreadedGemm)) {
    call(m, n, k, a, am, b, bm, c, ldc);
    return;
  }
  const GemmTiles t = plan_gemm_tiles(m, n, threads);
  const int64_t across = (n + t.cols - 1) / t.cols, tiles = across * ((m + t.rows - 1) / t.rows);
  parallel_for(tiles, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t i = t0; i < t1; ++i) {
      const int64_t r0 = i / across * t.rows, c0 = i % across * t.cols;
      // Row r0 of op(a) and column c0 of op(b), wherever each is stored.
      const T* ta = a + (am.trans ? r0 : r0 * am.ld);
      const T* tb = b + (bm.trans ? c0 * bm.ld : c0);
      call(std::min(t.rows, m - r0), std::min(t.cols, n - c0), k, ta, am, tb, bm, c + r0 * ldc + c0, ldc);
    }
  });
}

template <typename T>
bool zero_product(int64_t m, int64_t n, int64_t k, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return true;
  if (k > 0) return false;
  for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, T(0));
  return true;
}

}  // namespace

void gemm(int64_t m, int64_t n, int64_t k, const float* a, BlasMatrix am, const float* b, BlasMatrix bm, float* c,
          int64_t ldc) {
  if (zero_product(m, n, k, c, ldc)) return;
  check_dims(m, n, k, "f32");
  product(m, n, k, a, am, b, bm, c, ldc,
          [](int64_t tm, int64_t tn, int64_t tk, const float* ta, BlasMatrix tam, const float* tb, BlasMatrix tbm,
             float* tc, int64_t tldc) {
            cblas_sgemm(CblasRowMajor, op(tam), op(tbm), static_cast<int>(tm), static_cast<int>(tn),
                        static_cast<int>(tk), 1.0f, ta, static_cast<int>(tam.ld), tb, static_cast<int>(tbm.ld), 0.0f,
                        tc, static_cast<int>(tldc));
          });
}

void gemm(int64_t m, int64_t n, int64_t k, const double* a, BlasMatrix am, const double* b, BlasMatrix bm, double* c,
          int64_t ldc) {
  if (zero_product(m, n, k, c, ldc)) return;
  check_dims(m, n, k, "f64");
  product(m, n, k, a, am, b, bm, c, ldc,
          [](int64_t tm, int64_t tn, int64_t tk, const double* ta, BlasMatrix tam, const double* tb, BlasMatrix tbm,
             double* tc, int64_t tldc) {
            cblas_dgemm(CblasRowMajor, op(tam), op(tbm), static_cast<int>(tm), static_cast<int>(tn),
                        static_cast<int>(tk), 1.0, ta, static_cast<int>(tam.ld), tb, static_cast<int>(tbm.ld), 0.0, tc,
                        static_cast<int>(tldc));
          });
}

GemmTiles plan_gemm_tiles(int64_t m, int64_t n, int threads) {
  GemmTiles t{std::max<int64_t>(m, 1), std::max<int64_t>(n, 1)};
  const int64_t want = 2 * static_cast<int64_t>(std::max(threads, 1));
  auto count = [&] { return ((m + t.rows - 1) / t.rows) * ((n + t.cols - 1) / t.cols); };
  while (count() < want) {
    if (t.cols >= t.rows && t.cols > kTileColumns) {
      t.cols = std::max<int64_t>(kTileColumns, (t.cols / 2 + kTileColumns - 1) / kTileColumns * kTileColumns);
    } else if (t.rows > kTileRows) {
      t.rows = std::max<int64_t>(kTileRows, (t.rows / 2 + kTileRows - 1) / kTileRows * kTileRows);
    } else if (t.cols > kTileColumns) {
      t.cols = std::max<int64_t>(kTileColumns, (t.cols / 2 + kTileColumns - 1) / kTileColumns * kTileColumns);
    } else {
      break;
    }
  }
  return t;
}

bool blas_in_tiles() {
  blas_ready();
  return g_tiles;
}

std::string blas_description() {
  blas_ready();
  // The config reads "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64".
  std::string config = openblas_get_config();
  const size_t version_end = config.find(' ', config.find(' ') + 1);
  const int parallel = openblas_get_parallel();  // 0 sequential, 1 pthreads, 2 OpenMP
  return detail::str_cat(config.substr(0, version_end),
                         parallel == 2   ? " (OpenMP)"
                         : parallel == 1 ? " (pthreads; products in tiles over wick's threads)"
                                         : "",
                         ", ", openblas_get_corename(), " kernels");
}

}  // namespace wick::cpu
