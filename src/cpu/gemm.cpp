#include "cpu/gemm.h"

#include <cblas.h>

#include <algorithm>
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
  cblas_sgemm(CblasRowMajor, op(am), op(bm), static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a,
              static_cast<int>(am.ld), b, static_cast<int>(bm.ld), 0.0f, c, static_cast<int>(ldc));
}

void gemm(int64_t m, int64_t n, int64_t k, const double* a, BlasMatrix am, const double* b, BlasMatrix bm, double* c,
          int64_t ldc) {
  if (zero_product(m, n, k, c, ldc)) return;
  check_dims(m, n, k, "f64");
  cblas_dgemm(CblasRowMajor, op(am), op(bm), static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0, a,
              static_cast<int>(am.ld), b, static_cast<int>(bm.ld), 0.0, c, static_cast<int>(ldc));
}

std::string blas_description() {
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
