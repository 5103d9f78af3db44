// Front end of the index ops (gather, scatter, index_select, index_add, embedding) and the
// in-place writes (slice_set, const_set, copy_from).
#include "backend/op.h"
#include "core/checked.h"
#include "core/checks.h"
#include "wick/ops.h"

namespace wick {

using ops::backend_of;
using ops::describe;
using ops::view_of;
using ops::wrap;

namespace {

// Checks of an op that reads or writes `data` at positions given by `ids` along `dim`.
int index_checks(const char* op, const Tensor& data, const Tensor& ids, int64_t dim, OpCode code) {
  ops::check_same_device(op, {&data, &ids});
  ops::check_index_dtype(op, ids);
  int d = ops::dim_of(op, data, dim);
  ops::check_supported(op, data, code, {data.dtype(), ids.dtype()});
  return d;
}

// `big` narrowed to `small`'s sizes in every dim but `dim` (PyTorch lets the index tensor be
// smaller there); ShapeError if it is larger or the ranks differ.
Tensor fit_except_dim(const char* op, const Tensor& big, const Tensor& small, int dim, const char* what) {
  WICK_CHECK(small.rank() == big.rank(), ShapeError, op, what, " must have the rank of the tensor: ", describe(small),
             " vs ", describe(big));
  Tensor out = big;
  for (int d = 0; d < big.rank(); ++d) {
    if (d == dim) continue;
    WICK_CHECK(small.shape()[d] <= big.shape()[d], ShapeError, op, what, " ", describe(small),
               " is larger than the tensor ", describe(big), " in dim ", d);
    out = out.narrow(d, 0, small.shape()[d]);
  }
  return out;
}

void scatter_into(const char* op, Tensor& dst, const Tensor& ids, const Tensor& src, int64_t dim, bool add) {
  int d = index_checks(op, dst, ids, dim, add ? OpCode::ScatterAddSet : OpCode::ScatterSet);
  ops::check_same_device(op, {&dst, &src});
  ops::check_same_dtype(op, dst, src);
  WICK_CHECK(ids.shape() == src.shape(), ShapeError, op, "ids ", describe(ids), " and src ", describe(src),
             " must have one shape");
  ops::check_writable(op, dst);
  Tensor target = fit_except_dim(op, dst, src, d, "src");
  Tensor s = ops::unaliased(src, dst), i = ops::unaliased(ids, dst);
  MutView out{*target.storage(), target.layout(), target.dtype()};
  try {
    if (add)
      backend_of(dst).scatter_add_set(out, view_of(i), view_of(s), d);
    else
      backend_of(dst).scatter_set(out, view_of(i), view_of(s), d);
  } catch (const IndexError& e) {
    const std::string_view backend_op = add ? "scatter_add_set" : "scatter_set";
    if (op == backend_op) throw;
    throw IndexError(detail::str_cat(op, ": ", e.what()));  // the functional form: name it
  }
}

}  // namespace

Tensor Tensor::index_select(const Tensor& ids, int64_t dim) const {
  int d = index_checks("index_select", *this, ids, dim, OpCode::IndexSelect);
  WICK_CHECK(ids.rank() == 1, ShapeError, "index_select", "ids must have rank 1, got ", describe(ids));
  Shape shape = this->shape();
  shape[d] = ids.numel();
  ops::check_output("index_select", shape, dtype_, {this, &ids});
  return wrap(backend_of(*this).index_select(view_of(*this), view_of(ids), d), shape, dtype_);
}

Tensor Tensor::gather(const Tensor& ids, int64_t dim) const {
  int d = index_checks("gather", *this, ids, dim, OpCode::Gather);
  Tensor x = fit_except_dim("gather", *this, ids, d, "ids");
  ops::check_output("gather", ids.shape(), dtype_, {this, &ids});
  return wrap(backend_of(*this).gather(view_of(x), view_of(ids), d), ids.shape(), dtype_);
}

void Tensor::scatter_set(const Tensor& ids, const Tensor& src, int64_t dim) {
  scatter_into("scatter_set", *this, ids, src, dim, false);
}

void Tensor::scatter_add_set(const Tensor& ids, const Tensor& src, int64_t dim) {
  scatter_into("scatter_add_set", *this, ids, src, dim, true);
}

Tensor Tensor::scatter(const Tensor& ids, const Tensor& src, int64_t dim) const {
  ops::check_defined("scatter", *this);
  Tensor out = copy();
  scatter_into("scatter", out, ids, src, dim, false);
  return out;
}

Tensor Tensor::scatter_add(const Tensor& ids, const Tensor& src, int64_t dim) const {
  ops::check_defined("scatter_add", *this);
  Tensor out = copy();
  scatter_into("scatter_add", out, ids, src, dim, true);
  return out;
}

Tensor Tensor::index_add(const Tensor& ids, const Tensor& src, int64_t dim) const {
  const char* op = "index_add";
  int d = index_checks(op, *this, ids, dim, OpCode::IndexAdd);
  ops::check_same_device(op, {this, &src});
  ops::check_same_dtype(op, *this, src);
  WICK_CHECK(ids.rank() == 1, ShapeError, op, "ids must have rank 1, got ", describe(ids));
  Shape expected = shape();
  expected[d] = ids.numel();
  WICK_CHECK(src.shape() == expected, ShapeError, op, "src ", describe(src), " must have shape ", expected,
             " (the tensor ", describe(*this), " with dim ", d, " the length of ids)");
  ops::check_output(op, shape(), dtype_, {this, &ids, &src});
  return wrap(backend_of(*this).index_add(view_of(*this), view_of(ids), view_of(src), d), shape(), dtype_);
}

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  const char* op = "embedding";
  ops::check_same_device(op, {&weight, &ids});
  ops::check_index_dtype(op, ids);
  WICK_CHECK(weight.rank() == 2, ShapeError, op, "weight must have rank 2 (vocab, hidden), got ", describe(weight));
  WICK_CHECK(ids.rank() < kMaxRank, ShapeError, op, "ids ", describe(ids), " would give a result of rank ",
             ids.rank() + 1, ", above wick's maximum rank ", kMaxRank);
  Shape shape = ids.shape();
  shape.push_back(weight.shape()[1]);
  ops::check_output(op, shape, weight.dtype(), {&weight, &ids});
  try {
    return weight.index_select(ids.flatten_all(), 0).reshape(shape);
  } catch (const IndexError& e) {
    throw IndexError(detail::str_cat(op, ": ", e.what()));
  }
}

void Tensor::slice_set(const Tensor& src, int64_t dim, int64_t start) {
  const char* op = "slice_set";
  ops::check_same_device(op, {this, &src});
  ops::check_same_dtype(op, *this, src);
  int d = ops::dim_of(op, *this, dim);
  WICK_CHECK(src.rank() == rank(), ShapeError, op, "src ", describe(src), " must have the rank of ", describe(*this));
  for (int i = 0; i < rank(); ++i) {
    WICK_CHECK(i == d || src.shape()[i] == shape()[i], ShapeError, op, "src ", describe(src), " and ", describe(*this),
               " differ in dim ", i);
  }
  WICK_CHECK(start >= 0 && start <= shape()[d] - src.shape()[d], IndexError, op, "elements ",
             checked::range_text(start, src.shape()[d]), " are outside dim ", d, " of ", describe(*this));
  ops::check_writable(op, *this);
  narrow(d, start, src.shape()[d]).copy_from(src);
}

void Tensor::copy_from(const Tensor& src) {
  const char* op = "copy_from";
  ops::check_same_device(op, {this, &src});
  ops::check_same_dtype(op, *this, src);
  ops::check_writable(op, *this);
  Tensor s = ops::unaliased(src, *this);
  bool fits = s.rank() <= rank();
  try {
    fits = fits && broadcast_shapes(s.shape(), shape(), op) == shape();
  } catch (const ShapeError&) {
    fits = false;
  }
  WICK_CHECK(fits, ShapeError, op, "cannot broadcast src ", describe(src), " to the destination ", describe(*this));
  Tensor from = s.broadcast_as(shape());
  backend_of(*this).copy_strided(view_of(from), ops::mut_view_of(*this));
}

void Tensor::const_set(Scalar value) {
  ops::check_defined("const_set", *this);
  ops::check_scalar_fits("const_set", value, dtype_, describe(*this));
  ops::check_writable("const_set", *this);
  backend_of(*this).const_set(ops::mut_view_of(*this), value);
}

}  // namespace wick
