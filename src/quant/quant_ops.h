// Internals of the quantized-weight front end (src/quant).
#pragma once

#include "kernels/quant.h"
#include "wick/quant.h"

namespace wick::quant::detail {

// ggml's reference quantizer for one block of Format<Q>::kValues values (quantize_blocks.cpp).
template <QType Q>
void quantize_block(const float* x, typename kernels::quant::Format<Q>::Block& b);

// The values of `rows` rows of blocks in host memory as f32, row-major (rows * cols values): the
// front end's dequantization where a backend has no kernel, and so the oracle of the kernels.
void dequantize_host(QType qtype, const uint8_t* blocks, int64_t rows, int64_t cols, float* out);

}  // namespace wick::quant::detail
