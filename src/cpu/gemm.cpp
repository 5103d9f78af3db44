#include "cpu/gemm.h"

#include <cblas.h>
#include <dlfcn.h>
#include <strings.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>

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

void blas_ready() {
  static const bool chosen = (choose_blas_core(), true);
  (void)chosen;
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
  blas_ready();
  cblas_sgemm(CblasRowMajor, op(am), op(bm), static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a,
              static_cast<int>(am.ld), b, static_cast<int>(bm.ld), 0.0f, c, static_cast<int>(ldc));
}

void gemm(int64_t m, int64_t n, int64_t k, const double* a, BlasMatrix am, const double* b, BlasMatrix bm, double* c,
          int64_t ldc) {
  if (zero_product(m, n, k, c, ldc)) return;
  check_dims(m, n, k, "f64");
  blas_ready();
  cblas_dgemm(CblasRowMajor, op(am), op(bm), static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0, a,
              static_cast<int>(am.ld), b, static_cast<int>(bm.ld), 0.0, c, static_cast<int>(ldc));
}

std::string blas_description() {
  blas_ready();
  // The config reads "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64".
  std::string config = openblas_get_config();
  const size_t version_end = config.find(' ', config.find(' ') + 1);
  const int parallel = openblas_get_parallel();  // 0 sequential, 1 pthreads, 2 OpenMP
  return detail::str_cat(config.substr(0, version_end),
                         parallel == 2   ? " (OpenMP)"
                         : parallel == 1 ? " (pthreads)"
                                         : "",
                         ", ", openblas_get_corename(), " kernels");
}

}  // namespace wick::cpu
