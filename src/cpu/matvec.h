// Products of a few rows by a matrix stored as rows (a linear layer's weight, b = W^T): the
// decode step of a model, where a GEMM library would pack the whole weight for one row of
// activations. Each weight row is read once for all the rows of a, widened from f16/bf16 on the
// fly, in f32 math with kLanes partial sums folded in a fixed order, so the result does not
// depend on the vector width the machine runs (each loop is compiled for AVX-512, AVX2 and the
// baseline and chosen when the library loads) nor on the thread count.
#pragma once

#include <cstdint>

#include "kernels/numeric.h"

namespace wick::cpu {

// The most rows of a that one pass over the weight serves.
inline constexpr int64_t kMatvecRows = 8;

// out[i * ldo + j] = sum over l < k of a[i * lda + l] * w[j * ldw + l], for i < m and j0 <= j < j1,
// m <= kMatvecRows. The rows of a are f32 and dense along k; so are those of w, of type W.
void matvec_rows(int64_t m, int64_t j0, int64_t j1, int64_t k, const float* a, int64_t lda, const float* w, int64_t ldw,
                 float* out, int64_t ldo);
void matvec_rows(int64_t m, int64_t j0, int64_t j1, int64_t k, const float* a, int64_t lda, const f16* w, int64_t ldw,
                 float* out, int64_t ldo);
void matvec_rows(int64_t m, int64_t j0, int64_t j1, int64_t k, const float* a, int64_t lda, const bf16* w, int64_t ldw,
                 float* out, int64_t ldo);

// Whether f16 weights may take the F16C loop where the processor has it (else the portable one,
// which gives the same bits); returns the previous setting. For tests.
bool set_matvec_f16c(bool use);

}  // namespace wick::cpu
