// Front end of the reductions, cumsum and sorting. An empty dim list means every dim.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/op.h"
#include "kernels/numeric.h"
#include "core/checks.h"

namespace wick {

using ops::backend_of;
using ops::view_of;
using ops::wrap;

namespace {

// Normalised, sorted, unique dims; every dim when `dims` is empty.
std::vector<int> reduce_dims(const char* op, const Tensor& x, const Dims& dims) {
  std::vector<int> out;
  if (dims.empty()) {
    for (int d = 0; d < x.rank(); ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) out.push_back(ops::dim_of(op, x, d));
  std::sort(out.begin(), out.end());
  WICK_CHECK(std::adjacent_find(out.begin(), out.end()) == out.end(), ShapeError, op, "dim listed twice in ", dims,
             " (", ops::describe(x), ")");
  return out;
}

Shape reduced_shape(const Shape& shape, const std::vector<int>& dims, bool keepdim) {
  Shape out;
  for (int d = 0; d < shape.rank(); ++d) {
    bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced)
      out.push_back(shape[d]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

// argmin, argmax and argsort give u32 indices; the largest, 2^32 - 1, is the index ops' skip
// sentinel. A longer dim is refused rather than truncated (wick has no i64 index results yet).
void check_u32_indices(const char* op, const Tensor& x, int dim) {
  WICK_CHECK(x.rank() == 0 || x.shape()[dim] <= int64_t(UINT32_MAX), ShapeError, op, "dim ", dim, " has ",
             x.shape()[dim], " elements; u32 indices address at most 2^32 - 1 elements (", ops::describe(x), ")");
}

Tensor reduce_op(ReduceOp op, const Tensor& x, const Dims& dims, bool keepdim) {
  const std::string name(op_name(op));
  ops::check_defined(name.c_str(), x);
  ops::check_supported(name.c_str(), x, op, {x.dtype()});
  std::vector<int> rd = reduce_dims(name.c_str(), x, dims);
  const bool arg = op == ReduceOp::ArgMin || op == ReduceOp::ArgMax;
  if (op != ReduceOp::Sum) {
    for (int d : rd) {
      WICK_CHECK(x.shape()[d] > 0, ShapeError, name, "cannot reduce over dim ", d, " of size 0: an empty dim has no ",
                 arg ? name.substr(3) : name, " (", ops::describe(x), ")");
    }
  }
  if (arg && !rd.empty()) check_u32_indices(name.c_str(), x, rd[0]);
  const Shape out_shape = reduced_shape(x.shape(), rd, keepdim);
  const DType out_dtype = arg ? DType::U32 : x.dtype();
  ops::check_output(name.c_str(), rd.empty() ? x.shape() : out_shape, out_dtype, {&x});
  if (rd.empty()) return arg ? Tensor::zeros(x.shape(), DType::U32, x.device()) : x.copy();
  StoragePtr s = backend_of(x).reduce(op, view_of(x), rd);
  return wrap(std::move(s), out_shape, out_dtype);
}

// The float dtype statistics are computed in: f32 for the low-precision floats.
DType stats_dtype(const char* op, const Tensor& x) {
  ops::check_defined(op, x);
  WICK_CHECK(is_float(x.dtype()), DTypeError, op, "needs a float dtype, got ", ops::describe(x));
  return x.dtype() == DType::F64 ? DType::F64 : DType::F32;
}

int64_t count_of(const Tensor& x, const std::vector<int>& dims) {
  int64_t n = 1;
  for (int d : dims) n *= x.shape()[d];  // at most x.numel(): no overflow
  return n;
}

}  // namespace

Tensor Tensor::sum(const Dims& dims, bool keepdim) const { return reduce_op(ReduceOp::Sum, *this, dims, keepdim); }
Tensor Tensor::sum(int64_t dim, bool keepdim) const { return sum(Dims{dim}, keepdim); }
Tensor Tensor::sum() const { return sum(Dims{}); }
Tensor Tensor::max(const Dims& dims, bool keepdim) const { return reduce_op(ReduceOp::Max, *this, dims, keepdim); }
Tensor Tensor::max(int64_t dim, bool keepdim) const { return max(Dims{dim}, keepdim); }
Tensor Tensor::max() const { return max(Dims{}); }
Tensor Tensor::min(const Dims& dims, bool keepdim) const { return reduce_op(ReduceOp::Min, *this, dims, keepdim); }
Tensor Tensor::min(int64_t dim, bool keepdim) const { return min(Dims{dim}, keepdim); }
Tensor Tensor::min() const { return min(Dims{}); }

Tensor Tensor::argmax(int64_t dim, bool keepdim) const {
  ops::check_defined("argmax", *this);
  return reduce_op(ReduceOp::ArgMax, *this, Dims{ops::dim_of("argmax", *this, dim)}, keepdim);
}

Tensor Tensor::argmin(int64_t dim, bool keepdim) const {
  ops::check_defined("argmin", *this);
  return reduce_op(ReduceOp::ArgMin, *this, Dims{ops::dim_of("argmin", *this, dim)}, keepdim);
}

// mean and var of f16/bf16/f8e4m3 are computed in f32 and rounded once at the end, so that a
// large sum does not overflow the narrow type before the division.
Tensor Tensor::mean(const Dims& dims, bool keepdim) const {
  DType acc = stats_dtype("mean", *this);
  std::vector<int> rd = reduce_dims("mean", *this, dims);
  Tensor s = to_dtype(acc).sum(dims, keepdim);
  return s.affine(1.0 / static_cast<double>(count_of(*this, rd)), 0.0).to_dtype(dtype_);
}
Tensor Tensor::mean(int64_t dim, bool keepdim) const { return mean(Dims{dim}, keepdim); }
Tensor Tensor::mean() const { return mean(Dims{}); }

Tensor Tensor::var(const Dims& dims, bool keepdim) const {
  DType acc = stats_dtype("var", *this);
  std::vector<int> rd = reduce_dims("var", *this, dims);
  Tensor x = to_dtype(acc);
  Tensor centered = x - x.mean(dims, true);
  Tensor ss = centered.sqr().sum(dims, keepdim);
  return ss.affine(1.0 / static_cast<double>(count_of(*this, rd) - 1), 0.0).to_dtype(dtype_);
}
Tensor Tensor::var(int64_t dim, bool keepdim) const { return var(Dims{dim}, keepdim); }

Tensor Tensor::cumsum(int64_t dim) const {
  ops::check_defined("cumsum", *this);
  int d = ops::dim_of("cumsum", *this, dim);
  ops::check_supported("cumsum", *this, OpCode::Cumsum, {dtype_});
  ops::check_output("cumsum", shape(), dtype_, {this});
  return wrap(backend_of(*this).cumsum(view_of(*this), d), shape(), dtype_);
}

Tensor Tensor::argsort(bool ascending) const {
  ops::check_defined("argsort", *this);
  ops::check_supported("argsort", *this, OpCode::Argsort, {dtype_});
  check_u32_indices("argsort", *this, rank() - 1);
  ops::check_output("argsort", shape(), DType::U32, {this});
  return wrap(backend_of(*this).argsort(view_of(*this), ascending), shape(), DType::U32);
}

std::pair<Tensor, Tensor> Tensor::sort(bool ascending) const {
  Tensor idx = argsort(ascending);
  if (rank() == 0) return {copy(), idx};
  return {gather(idx, -1), idx};
}

}  // namespace wick
