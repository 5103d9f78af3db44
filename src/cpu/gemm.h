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

// The tiles of c (m x n) that a product split over `threads` takes, each one call to BLAS (where
// it runs its own threads: gemm.cpp): about two a thread, each as square as the product allows (a
// tile's call packs its rows of a and its columns of b, (rows + cols) x k values, for rows x cols x k
// multiply-adds), whole multiples of kTileRows rows and kTileColumns columns but at the edges.
inline constexpr int64_t kTileRows = 16;
inline constexpr int64_t kTileColumns = 64;
struct GemmTiles {
  int64_t rows, cols;
};
GemmTiles plan_gemm_tiles(int64_t m, int64_t n, int threads);

// Whether gemm splits products into tiles over wick's threads (OpenBLAS's pthreads build).
bool blas_in_tiles();

// The BLAS the products run on, for `wick info`: "OpenBLAS 0.3.21 (OpenMP), Haswell kernels" (the
// kernels wick asked OpenBLAS for where it took its generic ones on a CPU it did not know: gemm.cpp).
std::string blas_description();

// OpenBLAS runs one thread for products up to this many multiply-adds, so callers may run such
// products in parallel themselves without oversubscribing the cores.
inline constexpr int64_t kSingleThreadedGemm = 64 * 64 * 64;

}  // namespace wick::cpu
