// The GPU backend's matrix products, behind one interface: blas_cuda.cu (cuBLAS) and
// blas_rocm.cu (rocBLAS) implement it; nothing else names a BLAS library.
#pragma once

#include <cstdint>
#include <string>

#include "wick/dtype.h"

namespace wick::gpu {

class GpuBackend;

// Row-major batched product: C_i = op(A_i) op(B_i) for i < batch, with operand i at its base
// pointer + i * stride (elements; a stride may be 0). A is m x k, B is k x n after op; op
// transposes when trans is set (the operand is stored k x m, or n x k, row-major). dtype is the
// element type of all three: f16 and bf16 accumulate in f32.
struct Gemm {
  DType dtype;
  int64_t m, n, k, batch;
  const void* a;
  bool trans_a;
  int64_t lda, stride_a;
  const void* b;
  bool trans_b;
  int64_t ldb, stride_b;
  void* c;
  int64_t ldc, stride_c;
};

// Queues the product on the backend's stream. f16, bf16, f32 and f64 only.
void gemm(GpuBackend& backend, const Gemm& g);

// Makes the library's handle and workspace for the device now, if not yet made (they are made on
// first use otherwise): before a recording, which cannot hold their creation.
void prepare_blas(GpuBackend& backend);

// The product in words, for error messages: "f32, 4 x [128, 64] . [64, 32]".
std::string describe(const Gemm& g);

}  // namespace wick::gpu
