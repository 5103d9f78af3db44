// Cases for the block formats (include/wick/quant.h), through the public functions: on a backend
// with kernels they test the kernels, elsewhere the front end's host path; the reference backend
// has none, so its side is always ggml's scalar dequantization and dequantize-then-matmul.
#include "parity/cases.h"
#include "wick/quant.h"

namespace wick::parity {

namespace {

using quant::QTensor;
using quant::QType;

constexpr DType kQuantDTypes[] = {DType::F32, DType::F16, DType::BF16};

Tensor tensor(const Arg& a) { return Tensor(a.storage, a.layout, a.dtype); }

Output result(const Tensor& t) {
  Tensor c = t.contiguous();
  if (c.offset() != 0) c = c.copy();
  return {c.storage(), c.dtype()};
}

std::string qlabel(QType q, DType dt) { return std::string(quant::qtype_name(q)) + "/" + label(dt); }

// Wide values (up to 1e6) kept below the magnitude q holds, past which quantize refuses them.
Tensor held(const Tensor& x, QType q) {
  const double limit = 0.99 * quant::max_magnitude(q);
  return x.clamp(-limit, limit);
}

// A weight of rows x cols in q on the case's backend, quantized from generated values.
QTensor weight(Ctx& c, QType q, int64_t rows, int64_t cols, Values values = Values::Normal) {
  return quant::quantize(held(tensor(c.input(DType::F32, {rows, cols}, Form::Contiguous, values)), q), q);
}

// The largest normalised error of qmatmul: x rounded to 8 bits per 32 values (about 1.5e-5 for
// uniform activations), then the result rounded to the dtype.
double qmatmul_tolerance(DType dt) { return dt == DType::BF16 ? 3e-4 : 1e-4; }

void add_quantize(std::vector<Case>& cases, QType q, DType dt) {
  const int64_t cols = 2 * quant::block_values(q);
  struct V {
    const char* name;
    Shape shape;
    Form form;
    Values values;
  };
  const V variants[] = {{"contiguous", {5, cols}, Form::Contiguous, Values::Normal},
                        {"transposed", {3, cols}, Form::Transposed, Values::Normal},
                        {"wide_values", {4, cols}, Form::Contiguous, Values::Wide},
                        {"ties", {4, cols}, Form::Contiguous, Values::Small},
                        {"empty", {0, cols}, Form::Contiguous, Values::Normal}};
  for (const V& v : variants) {
    if (v.values == Values::Wide && dt != DType::F32) continue;  // beyond the halves' range: inf, refused
    cases.push_back({OpKey(QuantOp::Quantize).name(), qlabel(q, dt), shape_label(v.shape), v.name, QuantOp::Quantize,
                     {dt}, Compare::Exact, false, [=](Ctx& c) {
                       const Tensor x = tensor(c.input(dt, v.shape, v.form, v.values));
                       const QTensor w = quant::quantize(v.values == Values::Wide ? held(x, q) : x, q);
                       return result(w.bytes());
                     }});
  }
}

void add_dequantize(std::vector<Case>& cases, QType q, DType dt) {
  const int64_t cols = 2 * quant::block_values(q), rows = 7;
  cases.push_back({OpKey(QuantOp::Dequantize).name(), qlabel(q, dt), shape_label({rows, cols}), "quantized",
                   QuantOp::Dequantize, {dt}, Compare::Exact, false,
                   [=](Ctx& c) { return result(quant::dequantize(weight(c, q, rows, cols, Values::Wide), dt)); }});
  // Random bytes as blocks: every bit pattern of the scales, infinities and NaN included.
  cases.push_back({OpKey(QuantOp::Dequantize).name(), qlabel(q, dt), shape_label({rows, cols}), "random_bytes",
                   QuantOp::Dequantize, {dt}, Compare::Exact, false, [=](Ctx& c) {
                     const Tensor bytes = tensor(c.input(DType::U8, {rows * quant::row_bytes(q, cols)}));
                     return result(quant::dequantize(QTensor(q, rows, cols, bytes), dt));
                   }});
}

// A GPU backend runs each f16 and bf16 case (and Q4_K's f32 ones) through each of its qmatmul paths:
// its default choice by the rows of x, the matrix-unit kernels wherever they apply ("tiles", one row
// of x too: Q4_K's 8-bit kernel for any x, the f16/bf16 tile kernel for the other formats), and
// never those kernels ("dot": the integer dot products, or dequantize and the GEMM).
void add_qmatmul(std::vector<Case>& cases, QType q, DType dt) {
  const int64_t bv = quant::block_values(q);
  struct V {
    const char* name;
    Shape x;
    int64_t rows;
    Form form;
  };
  // Rows of x on both sides of the GPU's integer-dot limit (16) and of the tile kernel's (64), one
  // weight row per lane and more; for the tile kernel, a last step of k short of its 256 values (9 x
  // 32), weight rows past a tile of 64, and k split over blocks (2048 values, 80 rows).
  const V variants[] = {{"decode", {1, 8 * bv}, 72, Form::Contiguous},
                        {"few_rows", {2, 3, 2 * bv}, 40, Form::Contiguous},
                        {"dot_limit", {16, 2 * bv}, 33, Form::Contiguous},
                        {"transposed", {5, 2 * bv}, 24, Form::Transposed},
                        {"prefill", {40, 2 * bv}, 48, Form::Contiguous},
                        {"tile_rows", {2, 5, bv < 256 ? 9 * 32 : 2 * bv}, 70, Form::Contiguous},
                        {"tile_split", {33, 2048}, 80, Form::Contiguous},
                        {"tile_limit", {64, 2 * bv}, 17, Form::Contiguous},
                        {"past_tiles", {65, bv}, 20, Form::Contiguous}};
  for (const V& v : variants)
    for (const char* path : {"library", "tiles", "dot"}) {
      // f32 x has no tile kernel but Q4_K's 8-bit one.
      if (dt == DType::F32 && q != QType::Q4_K && std::string_view(path) != "library") continue;
      std::string layout = v.name;
      if (std::string_view(path) != "library") layout += std::string(".") + path;
      Case k{OpKey(QuantOp::Matmul).name(),
             qlabel(q, dt),
             shape_label(v.x, "rows " + std::to_string(v.rows)),
             layout,
             QuantOp::Matmul,
             {dt},
             Compare::Float,
             false,
             [=](Ctx& c) {
               BackendOption guard(c.backend(), "qmatmul", path);
               const QTensor w = weight(c, q, v.rows, v.x[v.x.rank() - 1]);
               return result(quant::qmatmul(tensor(c.input(dt, v.x, v.form)), w));
             }};
      k.tolerance = qmatmul_tolerance(dt);
      cases.push_back(std::move(k));
    }
}

}  // namespace

void add_quant_cases(std::vector<Case>& cases) {
  for (QType q : quant::kAllQTypes) {
    add_quantize(cases, q, DType::F32);
    for (DType dt : kQuantDTypes) add_dequantize(cases, q, dt);
    for (DType dt : kQuantDTypes) add_qmatmul(cases, q, dt);
  }
  add_quantize(cases, QType::Q4_K, DType::BF16);
  add_quantize(cases, QType::Q8_0, DType::F16);
}

}  // namespace wick::parity
