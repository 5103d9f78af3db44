// Matrix products for the CPU backend through OpenBLAS, and the view of a strided matrix that
// BLAS can take as it is.
#pragma once

#include <cstdint>
#include <optional>

namespace wick::cpu {

// A matrix of rows x cols with element (i, j) at i * row_stride + j * col_stride, as BLAS sees it:
// row-major (trans = false, ld = row_stride) or the transpose of a row-major one (trans = true,
// ld = col_stride). nullopt when neither fits (the caller copies it first).
struct BlasMatrix {
  bool trans;
  int64_t ld;
};
std::optional<BlasMatrix> blas_matrix(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride);

// c (m x n, row-major, leading dimension ldc) = op(a) op(b), op as BlasMatrix says; a is m x k,
// b is k x n. k = 0 gives zeros.
void gemm(int64_t m, int64_t n, int64_t k, const float* a, BlasMatrix am, const float* b, BlasMatrix bm, float* c,
          int64_t ldc);
void gemm(int64_t m, int64_t n, int64_t k, const double* a, BlasMatrix am, const double* b, BlasMatrix bm, double* c,
          int64_t ldc);

// OpenBLAS runs one thread for products up to this many multiply-adds, so callers may run such
// products in parallel themselves without oversubscribing the cores.
inline constexpr int64_t kSingleThreadedGemm = 64 * 64 * 64;

}  // namespace wick::cpu
