// The view of a strided matrix that a BLAS library can take as it is, shared by the backends.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>

namespace wick {

// A matrix of rows x cols with element (i, j) at i * row_stride + j * col_stride, as BLAS sees it:
// row-major (trans = false, ld = row_stride) or the transpose of a row-major one (trans = true,
// ld = col_stride). nullopt when neither fits (the caller copies it first).
struct BlasMatrix {
  bool trans;
  int64_t ld;
};

inline std::optional<BlasMatrix> blas_matrix(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  // The stride of a dim of size 1 is never used, so such a dim fits any layout.
  auto fits = [](int64_t ld, int64_t min) {
    return ld >= std::max<int64_t>(min, 1) && ld <= std::numeric_limits<int>::max();
  };
  if ((cols <= 1 || col_stride == 1) && (rows <= 1 || fits(row_stride, cols)))  // (i, j) at i * ld + j
    return BlasMatrix{false, rows <= 1 ? std::max<int64_t>(cols, 1) : row_stride};
  if ((rows <= 1 || row_stride == 1) && (cols <= 1 || fits(col_stride, rows)))  // (i, j) at j * ld + i
    return BlasMatrix{true, cols <= 1 ? std::max<int64_t>(rows, 1) : col_stride};
  return std::nullopt;
}

}  // namespace wick
