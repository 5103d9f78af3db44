// Matrix products for the CPU backend through OpenBLAS, and the view of a strided matrix that
// BLAS can take as it is.
#pragma once

#include <cstdint>
#include <string>

#include "backend/blas_layout.h"

namespace wick::cpu {

// c (m x n, row-major, leading dimension ldc) = op(a) op(b), op as BlasMatrix says; a is m x k,
// b is k x n. k = 0 gives zeros.
void gemm(int64_t m, int64_t n, int64_t k, const float* a, BlasMatrix am, const float* b, BlasMatrix bm, float* c,
          int64_t ldc);
void gemm(int64_t m, int64_t n, int64_t k, const double* a, BlasMatrix am, const double* b, BlasMatrix bm, double* c,
          int64_t ldc);

// The BLAS the products run on, for `wick info`: "OpenBLAS 0.3.21 (OpenMP), Haswell kernels" (the
// kernels wick asked OpenBLAS for where it took its generic ones on a CPU it did not know: gemm.cpp).
std::string blas_description();

// OpenBLAS runs one thread for products up to this many multiply-adds, so callers may run such
// products in parallel themselves without oversubscribing the cores.
inline constexpr int64_t kSingleThreadedGemm = 64 * 64 * 64;

}  // namespace wick::cpu
