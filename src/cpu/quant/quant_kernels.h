// The CPU backend's kernels for the GGUF block formats (backend/quant_kernels.h).
#pragma once

#include "backend/quant_kernels.h"

namespace wick::cpu {

class CpuQuantKernels final : public QuantKernels {
 public:
  explicit CpuQuantKernels(Backend& backend) : backend_(backend) {}

  // Dequantize and matmul for f32, f16 and bf16; quantize runs in the front end.
  bool supports(QuantOp op, DType dtype) const override {
    return op != QuantOp::Quantize && op_defined(op, {&dtype, 1});
  }
  StoragePtr dequantize(const Storage& w, quant::QType qtype, int64_t rows, int64_t cols, DType dtype) const override;
  StoragePtr matmul(const View& x, const Storage& w, quant::QType qtype, int64_t rows, int64_t cols) const override;

  // The most rows of x the integer-dot kernel takes; more go through dequantize and the GEMM.
  static constexpr int64_t kMaxDotRows = 8;

 private:
  Backend& backend_;
};

}  // namespace wick::cpu
