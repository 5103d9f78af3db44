// Internals of the quantized-weight front end (src/quant).
#pragma once

#include "kernels/quant.h"
#include "wick/quant.h"

namespace wick::quant::detail {

// qtype itself when it is one of QType's values; DTypeError naming op and the number otherwise (an
// integer cast to QType). Every public function that takes a QType checks it here first, so that
// no switch over QType (dispatch_qtype's included) meets another value.
QType check_qtype(const char* op, QType qtype);

// ggml's reference quantizer for one block of Format<Q>::kValues values (quantize_blocks.cpp);
// false when a scale of the block came out infinite (past f16's range, or f32's for Q8_K).
template <QType Q>
bool quantize_block(const float* x, typename kernels::quant::Format<Q>::Block& b);

// The values of `rows` rows of blocks in host memory as f32, row-major (rows * cols values): the
// front end's dequantization where a backend has no kernel, and so the oracle of the kernels.
void dequantize_host(QType qtype, const uint8_t* blocks, int64_t rows, int64_t cols, float* out);

}  // namespace wick::quant::detail
