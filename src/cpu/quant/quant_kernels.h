// The CPU backend's kernels for the GGUF block formats (backend/quant_kernels.h).
#pragma once

#include "backend/quant_kernels.h"

namespace wick::cpu {

class CpuQuantKernels final : public QuantKernels {
 public:
  explicit CpuQuantKernels(Backend& backend) : backend_(backend) {}

  StoragePtr dequantize(const Storage& w, quant::QType qtype, int64_t rows, int64_t cols, DType dtype) const override;
  StoragePtr matmul(const View& x, const Storage& w, quant::QType qtype, int64_t rows, int64_t cols) const override;
  // Q4_0 in groups of 16 rows where the machine has AVX2 or AVX-512 VNNI; Q8_0, Q4_K and Q6_K where
  // its best kernels are AVX2's (cpu/quant/arranged.h).
  StoragePtr arrange(const Storage& w, quant::QType qtype, int64_t rows, int64_t cols) const override;
  StoragePtr plain(const Storage& w, quant::QType qtype, int64_t rows, int64_t cols) const override;
  StoragePtr matmul_arranged(const View& x, const Storage& w, quant::QType qtype, int64_t rows,
                             int64_t cols) const override;
  bool supports(QuantOp op, DType dtype) const override {
    if (op == QuantOp::MatmulGrouped) return dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16;
    return QuantKernels::supports(op, dtype);
  }
  // Every group's rows of x rounded as matmul rounds them, then one parallel region over every
  // group's weight rows (a mixture's experts in one region, where one product each would wait for
  // every thread as many times): each row of the result as matmul gives it. An arranged weight
  // whose experts' rows are not whole groups of arranged::kRows: null (the front end's composition).
  StoragePtr matmul_grouped(const View& x, const Storage& w, quant::QType qtype, int64_t rows, int64_t cols,
                            int64_t experts, const View& groups, int64_t max_rows, bool arranged) const override;

  // The most rows of x the portable integer-dot loop takes; more go through dequantize and the GEMM
  // where the machine has no SIMD kernels (qdot.h), which take any number of rows in tiles.
  static constexpr int64_t kMaxDotRows = 8;
  // From this many rows of x, where the SIMD kernels are AVX2's (no AVX-512 VNNI), a weight of a
  // format other than Q4_K, Q5_K and Q6_K (which take superblock.h's kernel from kMaxDotRows on) is
  // dequantized to f32 once and the GEMM (OpenBLAS) takes the product: there it is the faster
  // (arranged weights keep their own kernel, which was as fast or faster, but for Q8_0: 512 rows of
  // x times 2048 x 2048 on one Zen 1 core, arranged kernel 154 ms, GEMM 131). A
  // Llama 3.2 1B-shape file's prompt of P tokens on 2 cores (wick limited to AVX2 on an AVX-512
  // machine, OpenBLAS's Haswell kernels), tokens/s, the AVX2 panels against the GEMM: Q4_0 P=64
  // 62.8 / 56.2, P=96 65.1 / 67.9, P=512 65.1 / 95.3; Q4_K_M 58.1 / 61.4, 59.1 / 65.8, 59.4 / 94.1;
  // Q8_0 P=96 60.5 / 64.9 (docs/performance-avx2.md).
  static constexpr int64_t kAvx2GemmFromRows = 96;

 private:
  // The kernel a product of m rows of x takes: the row kernels (qdot.h's, or arranged.h's for an
  // arranged weight; x rounded per 32 values), superblock.h's (x rounded per super-block), or the
  // weight dequantized to f32 and the GEMM. Reads batch_invariant() and the instruction set.
  enum class Path { Rows, Superblock, Gemm };
  static Path path(quant::QType qtype, int64_t cols, int64_t m, bool arranged);
  StoragePtr product(const View& x, const Storage& w, quant::QType qtype, int64_t rows, int64_t cols,
                     bool arranged) const;

  Backend& backend_;
};

}  // namespace wick::cpu
