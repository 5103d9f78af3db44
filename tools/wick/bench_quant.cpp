// `wick bench` cases of the block formats: qmatmul of one row of x (decode; memory-bound, its
// bytes the quantized weight's), of 16 and 64 rows on a GPU (a batch of decoding sequences; the
// weight's bytes still, read once by the matrix-unit tile kernel) and of 512 rows (prefill; compute-bound, beside the
// GEMM of the same shape in x's dtype), on the weight shapes of an 8B Llama layer (4096x4096, 14336x4096, 4096x14336;
// on the CPU the 4096x14336 that ggml's test-backend-ops perf times), and the dequantization that the many-row product
// starts with.
#include <random>

#include "backend/quant_kernels.h"
#include "bench.h"
#include "parity/cases.h"

namespace wick::bench {

namespace {

using parity::Arg;
using quant::QType;

// Random bytes as the blocks: the kernels' time does not depend on the values.
StoragePtr random_blocks(Backend& b, int64_t nbytes) {
  std::vector<uint8_t> bytes(static_cast<size_t>(nbytes));
  std::mt19937_64 rng(nbytes);
  for (size_t i = 0; i < bytes.size(); i += 8) {
    const uint64_t r = rng();
    for (size_t j = 0; j < 8 && i + j < bytes.size(); ++j) bytes[i + j] = static_cast<uint8_t>(r >> (8 * j));
  }
  return b.from_host(bytes.data(), bytes.size());
}

// `decode`: x's rows are decoding sequences (memory-bound: rated by bytes), not a prompt.
Case qmatmul_case(QType q, int64_t m, int64_t n, int64_t k, DType dt, bool decode) {
  const double wbytes = static_cast<double>(n * quant::row_bytes(q, k));
  const double xbytes = static_cast<double>(dtype_size(dt) * m * (k + n));
  return {.op = "quant.matmul",
          .dtype = std::string(quant::qtype_name(q)) + "/" + parity::label(dt),
          .shape = dims_label({m, k}) + " @ " + dims_label({k, n}),
          .layout = "contiguous",
          .main_dtype = dt,
          .key = QuantOp::Matmul,
          .dtypes = {dt},
          .bytes = wbytes + xbytes,
          .flops = decode ? 0 : 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k),
          .prepare = [=](Inputs& in) -> Run {
            Backend& b = in.backend();
            const Arg x = in.floats(dt, {m, k});
            StoragePtr w = random_blocks(b, n * quant::row_bytes(q, k));
            return [&b, x, w, q, n, k] { return b.quant()->matmul(x.view(), *w, q, n, k); };
          }};
}

// The weight (n, k) dequantized to dt: the first half of the prefill product. Memory-bound: its bytes
// are the quantized weight's read and the dequantized weight's written.
Case dequantize_case(QType q, int64_t n, int64_t k, DType dt) {
  const double wbytes = static_cast<double>(n * quant::row_bytes(q, k));
  return {.op = "quant.dequantize",
          .dtype = std::string(quant::qtype_name(q)) + "/" + parity::label(dt),
          .shape = dims_label({n, k}),
          .layout = "contiguous",
          .main_dtype = dt,
          .key = QuantOp::Dequantize,
          .dtypes = {dt},
          .bytes = wbytes + static_cast<double>(dtype_size(dt) * n * k),
          .prepare = [=](Inputs& in) -> Run {
            Backend& b = in.backend();
            StoragePtr w = random_blocks(b, n * quant::row_bytes(q, k));
            return [&b, w, q, n, k, dt] { return b.quant()->dequantize(*w, q, n, k, dt); };
          }};
}

// x (m, k) times a (n, k) weight transposed in x's dtype: the GEMM a quantized prefill competes with.
// Shapes read as the product's: x (m, k) @ (k, n), the weight stored as (n, k) ("transposed").
Case gemm_case(int64_t m, int64_t n, int64_t k, DType dt) {
  return {.op = "matmul",
          .dtype = parity::label(dt),
          .shape = dims_label({m, k}) + " @ " + dims_label({k, n}),
          .layout = "transposed",
          .main_dtype = dt,
          .key = OpCode::Matmul,
          .dtypes = {dt},
          .bytes = static_cast<double>(dtype_size(dt) * (m * k + n * k + m * n)),
          .flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k),
          .prepare = [=](Inputs& in) -> Run {
            Backend& b = in.backend();
            const Arg x = in.floats(dt, {m, k}, Form::Contiguous, -1, 1);
            const Arg w = in.floats(dt, {k, n}, Form::Transposed, -1, 1);
            return [&b, x, w] { return b.matmul(x.view(), w.view()); };
          }};
}

}  // namespace

void add_quant_cases(std::vector<Case>& cases, Scale scale) {
  const QType types[] = {QType::Q4_0, QType::Q4_K, QType::Q5_K, QType::Q6_K, QType::Q8_0};
  std::vector<std::pair<int64_t, int64_t>> shapes = {{4096, 4096}, {14336, 4096}, {4096, 14336}};
  DType dt = DType::BF16;
  int64_t prefill = 512;
  if (scale == Scale::Cpu) shapes = {{4096, 14336}}, dt = DType::F32;
  if (scale == Scale::Quick) shapes = {{64, 512}}, dt = DType::F32, prefill = 20;
  for (auto [n, k] : shapes) {
    for (QType q : types) cases.push_back(qmatmul_case(q, 1, n, k, dt, true));
    if (scale == Scale::Gpu)
      for (int64_t m : {16, 64})
        for (QType q : types) cases.push_back(qmatmul_case(q, m, n, k, dt, true));
    for (QType q : types) cases.push_back(qmatmul_case(q, prefill, n, k, dt, false));
    for (QType q : types) cases.push_back(dequantize_case(q, n, k, dt));
    cases.push_back(gemm_case(prefill, n, k, dt));
  }
}

}  // namespace wick::bench
