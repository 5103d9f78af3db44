// Products of rows by a weight's transpose whose every output is the same sum in the same order for
// any number of rows: the f16 and bf16 products of batch-invariant mode (wick::batch_invariant()),
// and on ROCm of 2 to 8 rows in every mode (a few sequences decoding; gpu/matmul.cu says why).
#pragma once

#include <cstdint>

#include "wick/dtype.h"

namespace wick::gpu {

class GpuBackend;

// out (m, n, dense) = x (m, k) times w (n, k) transposed, in f16 or bf16 with f32 sums on the
// matrix units; x's and w's rows `ldx` and `ldw` elements apart. k is cut into slices whose count
// depends on n, k and the device alone, added in order: an output's bits do not depend on m or on
// the other rows of x. False (nothing queued) where the device has no matrix units or the dtype is
// another.
bool gemm_rows_invariant(GpuBackend& backend, DType dtype, const void* x, int64_t ldx, int64_t m, const void* w,
                         int64_t ldw, int64_t n, int64_t k, void* out);

}  // namespace wick::gpu
