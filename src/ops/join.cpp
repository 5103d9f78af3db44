// cat, stack and pad_with_zeros.
#include "core/checked.h"
#include "core/checks.h"
#include "wick/ops.h"

namespace wick {

using ops::backend_of;
using ops::describe;

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  const char* op = "cat";
  WICK_CHECK(!tensors.empty(), ShapeError, op, "needs at least one tensor");
  const Tensor& first = tensors[0];
  ops::check_defined(op, first);
  WICK_CHECK(first.rank() > 0, ShapeError, op, "cannot join rank-0 tensors (", describe(first), "); use stack");
  int d = ops::dim_of(op, first, dim);
  Shape shape = first.shape();
  shape[d] = 0;
  for (const Tensor& t : tensors) {
    ops::check_same_device(op, {&first, &t});
    ops::check_same_dtype(op, first, t);
    WICK_CHECK(t.rank() == first.rank(), ShapeError, op, "rank mismatch: ", describe(first), " and ", describe(t));
    for (int i = 0; i < t.rank(); ++i) {
      WICK_CHECK(i == d || t.shape()[i] == first.shape()[i], ShapeError, op, "shapes ", describe(first), " and ",
                 describe(t), " differ in dim ", i, " (joining along dim ", d, ")");
    }
    shape[d] = checked::add(shape[d], t.shape()[d], op, " (joined size along dim ", d, " of ", describe(first), ")");
  }
  ops::check_output(op, shape, first.dtype(), {&first});
  Backend& b = backend_of(first);
  Tensor out = ops::wrap(b.alloc(first.dtype(), shape.numel()), shape, first.dtype());
  // Contiguous pieces are blocks of rows (dims before d) x (the rest): copy2d; others copy_strided.
  int64_t rows = 1;
  for (int i = 0; i < d; ++i) rows *= shape[i];
  const int64_t inner = shape.numel() / std::max<int64_t>(rows * shape[d], 1);
  int64_t start = 0;
  for (const Tensor& t : tensors) {
    const int64_t len = t.shape()[d];
    if (t.is_contiguous()) {
      b.copy2d(*t.storage(), *out.storage(), t.dtype(),
               Copy2dParams{rows, len * inner, len * inner, shape[d] * inner, t.offset(), start * inner});
    } else {
      Tensor piece = out.narrow(d, start, len);
      b.copy_strided(ops::view_of(t), ops::mut_view_of(piece));
    }
    start += len;
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  WICK_CHECK(!tensors.empty(), ShapeError, "stack", "needs at least one tensor");
  ops::check_defined("stack", tensors[0]);
  const Tensor& first = tensors[0];
  int d = ops::dim_of("stack", first, dim, 1);
  WICK_CHECK(first.rank() < kMaxRank, ShapeError, "stack", "stacking ", describe(first), " would give rank ",
             first.rank() + 1, ", above wick's maximum rank ", kMaxRank);
  Shape out_shape = first.shape();
  out_shape.insert(d, static_cast<int64_t>(tensors.size()));
  ops::check_output("stack", out_shape, first.dtype(), {&first});
  std::vector<Tensor> pieces;
  for (const Tensor& t : tensors) {
    ops::check_same_device("stack", {&first, &t});
    ops::check_same_dtype("stack", first, t);
    WICK_CHECK(t.shape() == tensors[0].shape(), ShapeError, "stack", "shapes differ: ", describe(tensors[0]), " and ",
               describe(t));
    pieces.push_back(t.unsqueeze(d));
  }
  return cat(pieces, d);
}

Tensor Tensor::pad_with_zeros(int64_t dim, int64_t left, int64_t right) const {
  ops::check_defined("pad_with_zeros", *this);
  int d = ops::dim_of("pad_with_zeros", *this, dim);
  WICK_CHECK(left >= 0 && right >= 0, ShapeError, "pad_with_zeros", "padding must be non-negative, got ", left, " and ",
             right, " (", describe(*this), ")");
  Shape s = shape();
  s[d] = checked::add(checked::add(s[d], left, "pad_with_zeros", " (", describe(*this), ")"), right, "pad_with_zeros",
                      " (", describe(*this), ")");
  ops::check_output("pad_with_zeros", s, dtype_, {this});
  Tensor out = zeros(s, dtype_, device());
  out.slice_set(*this, d, left);
  return out;
}

}  // namespace wick
