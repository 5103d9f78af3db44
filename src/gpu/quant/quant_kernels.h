// The GPU backend's kernels for the GGUF block formats (backend/quant_kernels.h): dequantize, and
// qmatmul through integer dot products for one or a few rows of x, the matrix-unit tile kernel for a
// few dozen (x in f16 or bf16), dequantize-then-GEMM for more.
// Compiled by nvcc and hipcc alike.
#pragma once

#include "backend/quant_kernels.h"

namespace wick::gpu {

class GpuBackend;

class GpuQuantKernels final : public QuantKernels {
 public:
  explicit GpuQuantKernels(GpuBackend& backend) : backend_(backend) {}

  StoragePtr dequantize(const Storage& w, quant::QType qtype, int64_t rows, int64_t cols, DType dtype) const override;
  StoragePtr matmul(const View& x, const Storage& w, quant::QType qtype, int64_t rows, int64_t cols) const override;

  // The rows of x for which the matrix-unit tile kernel (qmatmul_tiles.cuh) is chosen where it
  // applies; fewer go through the integer-dot kernel, more through dequantize and the GEMM. On an
  // H200 (Llama 3 8B's four products, Q4_K and Q4_0) the tiles lost to the dots at 4 rows and won
  // at 8, won against dequantize and the GEMM at 32 and lost at 64 (docs/performance.md).
  static constexpr int64_t kMinTileRows = 8;
  static constexpr int64_t kMaxTileRows = 32;
  // The most rows of x the integer-dot kernel takes; more go through dequantize and the GEMM.
  static constexpr int64_t kMaxDotRows = 16;
  // The rows of x per launch in batch-invariant mode (wick::batch_invariant()), every m.
  static constexpr int64_t kInvariantRows = 8;

 private:
  GpuBackend& backend_;
};

}  // namespace wick::gpu
