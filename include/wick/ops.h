// Ops over several tensors. Single-tensor ops are Tensor methods (tensor.h).
#pragma once

#include <vector>

#include "wick/tensor.h"

namespace wick {

// Joins tensors of one dtype and device along `dim`; all other dims must match.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
// Joins tensors of one shape along a new dim inserted at `dim`.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
// Rows of `weight` (vocab, hidden) picked by `ids` (any shape): ids.shape + [hidden].
Tensor embedding(const Tensor& weight, const Tensor& ids);
// cond (an integer dtype) nonzero picks on_true, else on_false; all three broadcast.
Tensor where_cond(const Tensor& cond, const Tensor& on_true, const Tensor& on_false);

}  // namespace wick
