// The GPU backend's kernels for the GGUF block formats (backend/quant_kernels.h): dequantize, and
// qmatmul through integer dot products for few rows of x or dequantize-then-GEMM for many.
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

  // The most rows of x the integer-dot kernel takes; more go through dequantize and the GEMM.
  static constexpr int64_t kMaxDotRows = 16;
  // The rows of x per launch in batch-invariant mode (wick::batch_invariant()), every m.
  static constexpr int64_t kInvariantRows = 8;

 private:
  GpuBackend& backend_;
};

}  // namespace wick::gpu
