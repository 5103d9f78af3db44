// The nn wing: fused transformer ops as free functions (as Candle's candle-nn and MLX's fast).
// Every op runs on every backend: through the backend's fused kernel where it has one (`wick ops`
// lists them), else composed from wick's other ops, with the same results within the float
// tolerance of docs/numerics.md. Inputs may be any strided view; results are new contiguous
// tensors of the input's dtype. Halves (f16, bf16) are computed in f32.
#pragma once

#include <cstdint>

#include "wick/tensor.h"

namespace wick::nn {

// exp(x - max) / sum(exp(x - max)) along dim (negative counts from the end): stable for any
// magnitude. A slice holding NaN, or only -inf, gives NaN (as PyTorch). f64, f32, f16, bf16.
Tensor softmax(const Tensor& x, int64_t dim);
// (x - max) - log(sum(exp(x - max))) along dim.
Tensor log_softmax(const Tensor& x, int64_t dim);

// x / sqrt(mean(x^2) + eps) * weight over the last dim; weight of shape (d), d = x's last dim.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps);
// (x - mean) / sqrt(var + eps) * weight + bias over the last dim, var the biased variance;
// weight and bias of shape (d). Without bias: the same with bias 0.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);
Tensor layer_norm(const Tensor& x, const Tensor& weight, double eps);

}  // namespace wick::nn
