// The GPU backend's kernels for the GGUF block formats (backend/quant_kernels.h): dequantize, and
// qmatmul through integer dot products for one or a few rows of x, the matrix-unit kernels for a
// few dozen (Q4_K's 8-bit one for any x; the f16/bf16 tiles for x in f16 or bf16),
// dequantize-then-GEMM for more.
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
  bool supports(QuantOp op, DType dtype) const override {
    return op != QuantOp::Quantize && op_defined(op, {&dtype, 1});
  }
  // Up to kMaxGroupedRows rows a group (max_rows), or any while a graph is recorded: one launch over
  // every group at once with no wait for the host (a decode step's experts), Q4_K's on the 8-bit
  // matrix units from kMinMmqGroupedRows, else the integer dots. More: the groups read on the host
  // and each group's product as matmul() runs it (a prompt's).
  StoragePtr matmul_grouped(const View& x, const Storage& w, quant::QType qtype, int64_t rows, int64_t cols,
                            int64_t experts, const View& groups, int64_t max_rows, bool arranged) const override;
  static constexpr int64_t kMaxGroupedRows = 64;

  // The rows of x for which the matrix-unit tile kernel (qmatmul_tiles.cuh) is chosen where it
  // applies; fewer go through the integer-dot kernel, more through dequantize and the GEMM. On an
  // H200 (Llama 3 8B's four products, Q4_K and Q4_0) the tiles lost to the dots at 4 rows and won
  // at 8, won against dequantize and the GEMM at 32 and lost at 64
  // (docs/performance-quantized.md).
  static constexpr int64_t kMinTileRows = 8;
  static constexpr int64_t kMaxTileRows = 32;
  // The rows of x for which Q4_K weights take the 8-bit matrix units (qmatmul_mmq.cuh) on devices
  // that have them, and the least max_rows for which qmatmul_grouped takes them; elsewhere the
  // kernels above and below. On an H200 (Llama 3 8B's four products) they lost to the integer dots at
  // 1 and 2 rows of x, won at 4 (in all) and after, were level with the f16/bf16 tiles at 32 and
  // won against dequantize and the GEMM at 48 and 64 (the model's decode at 64 sequences 1.46 times
  // as fast); a mixture at 16 sequences ran 1.8-2.1 times as fast as through the grouped integer
  // dots (docs/performance-quantized.md).
  static constexpr int64_t kMinMmqRows = 4;
  static constexpr int64_t kMaxMmqRows = 64;
  static constexpr int64_t kMinMmqGroupedRows = 4;
  // The most rows of x the integer-dot kernel takes; more go through dequantize and the GEMM.
  static constexpr int64_t kMaxDotRows = 16;
  // The rows of x per launch in batch-invariant mode (wick::batch_invariant()), every m.
  static constexpr int64_t kInvariantRows = 8;

 private:
  // dequantize's values and matmul's product of the blocks at w (device memory), the device active.
  StoragePtr values(const uint8_t* w, quant::QType qtype, int64_t rows, int64_t cols, DType dtype) const;
  StoragePtr product(const View& x, const uint8_t* w, quant::QType qtype, int64_t rows, int64_t cols) const;

  GpuBackend& backend_;
};

}  // namespace wick::gpu
