#include "core/checks.h"

#include <sstream>

#include "core/checked.h"

namespace wick::ops {

std::string describe(const Tensor& t) {
  if (!t.defined()) return "undefined tensor";
  std::ostringstream os;
  os << t.shape() << " " << t.dtype() << " on " << t.device();
  return os.str();
}

void check_defined(const char* op, const Tensor& t) {
  WICK_CHECK(t.defined(), Error, op, "called with an undefined tensor");
}

int dim_of(const char* op, const Tensor& t, int64_t dim, int extra_rank) {
  check_defined(op, t);
  const int rank = t.rank() + extra_rank;
  const int64_t d = dim < 0 ? dim + rank : dim;
  WICK_CHECK(d >= 0 && d < rank, ShapeError, op, "dim ", dim, " out of range for ", extra_rank ? "a new dim of " : "",
             describe(t));
  return static_cast<int>(d);
}

void check_same_device(const char* op, std::initializer_list<const Tensor*> ts) {
  const Tensor* first = *ts.begin();
  for (const Tensor* t : ts) {
    check_defined(op, *t);
    WICK_CHECK(t->device() == first->device(), DeviceError, op, "tensors on different devices: ", describe(*first),
               " and ", describe(*t));
  }
}

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  WICK_CHECK(a.dtype() == b.dtype(), DTypeError, op, "dtype mismatch: ", describe(a), " and ", describe(b),
             " (wick does not promote; use to_dtype)");
}

void check_supported(const char* op, const Tensor& t, OpKey key, std::initializer_list<DType> dtypes) {
  std::span<const DType> dts(dtypes.begin(), dtypes.size());
  for (DType dt : dts)
    WICK_CHECK(is_valid(dt), DTypeError, op, "invalid dtype ", static_cast<int>(dt), " (", describe(t), ")");
  auto list = [&] {
    std::ostringstream os;
    for (size_t i = 0; i < dtypes.size(); ++i) os << (i ? ", " : "") << dts[i];
    return os.str();
  };
  WICK_CHECK(op_defined(key, dts), DTypeError, op, "not defined for dtype ", list(), " (", describe(t), ")");
  WICK_CHECK(backend_of(t).supports(key, dts), NotSupportedError, op, "backend ", backend_of(t).name(),
             " does not support dtype ", list(), " (", describe(t), ")");
}

void check_index_dtype(const char* op, const Tensor& ids) {
  WICK_CHECK(is_index_dtype(ids.dtype()), DTypeError, op, "indices must have an integer dtype, got ", describe(ids));
}

void check_scalar_fits(const char* op, const Scalar& v, DType dtype, const std::string& context) {
  WICK_CHECK(v.fits(dtype), DTypeError, op, "scalar ", v.to_string(), " does not fit dtype ", dtype,
             is_int(dtype) ? " (integer dtypes take whole numbers in range)" : "", "; ", context);
}

Shape broadcast_shape(const char* op, const Tensor& a, const Tensor& b) {
  try {
    return broadcast_shapes(a.shape(), b.shape(), op);
  } catch (const ShapeError& e) {
    throw ShapeError(detail::str_cat(e.what(), " (", describe(a), " and ", describe(b), ")"));
  }
}

void check_writable(const char* op, const Tensor& t) {
  check_defined(op, t);
  if (t.numel() == 0) return;  // nothing is written
  for (int d = 0; d < t.rank(); ++d) {
    WICK_CHECK(t.strides()[d] != 0 || t.shape()[d] <= 1, ShapeError, op, "cannot write into a broadcast view (dim ", d,
               " has stride 0; ", describe(t), "); make it contiguous first");
  }
  WICK_CHECK(t.layout().is_non_overlapping(), ShapeError, op, "cannot write into a view whose elements overlap (",
             t.layout().to_string(), "; ", describe(t), "); make it contiguous first");
}

void check_output(const char* op, const Shape& shape, DType dtype, std::initializer_list<const Tensor*> operands) {
  auto names = [&] {
    std::string s;
    for (const Tensor* t : operands) s += (s.empty() ? "" : " and ") + describe(*t);
    return s;
  };
  for (int64_t d : shape)
    WICK_CHECK(d >= 0, ShapeError, op, "the result would have a negative size in shape ", shape, " (", names(), ")");
  int64_t bytes;
  WICK_CHECK(checked::numel_fits(shape) && !__builtin_mul_overflow(shape.numel(), dtype_size(dtype), &bytes),
             ShapeError, op, "the result of shape ", shape, " (", dtype, ") would have more than 2^63 - 1 bytes (",
             names(), ")");
}

Tensor unaliased(const Tensor& src, const Tensor& dst) { return src.storage() == dst.storage() ? src.copy() : src; }

std::vector<int64_t> host_groups(const char* op, const Tensor& groups, int64_t experts, int64_t p) {
  std::vector<int64_t> g = groups.to_device(Device::cpu()).contiguous().to_vector<int64_t>();
  for (size_t i = 0; i < g.size(); i += 3) {
    const int64_t e = g[i], first = g[i + 1], end = g[i + 2];
    WICK_CHECK(e >= 0 && e < experts, IndexError, op, "group ", i / 3, ": expert ", e, " is outside the ", experts,
               " experts");
    WICK_CHECK(first >= 0 && first <= end && end <= p, IndexError, op, "group ", i / 3, ": rows [", first, ", ", end,
               ") are outside the ", p, " rows of x");
  }
  return g;
}

}  // namespace wick::ops
