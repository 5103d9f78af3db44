// Checked size arithmetic: every size, stride, offset and byte count that wick computes from user
// input or from a file goes through these, so an overflow is a ShapeError naming the op and its
// operands, never a wrapped number. The message tail (`ctx...`) is built only on failure.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "wick/dtype.h"
#include "wick/error.h"
#include "wick/shape.h"

namespace wick::checked {

inline constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// a * b and a + b, or ShapeError("op: <what> a x b overflows ... (ctx)").
template <typename... Ctx>
int64_t mul(int64_t a, int64_t b, const char* op, const Ctx&... ctx) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) [[unlikely]]
    throw ShapeError(detail::str_cat(op, ": ", a, " x ", b, " overflows 64-bit sizes", ctx...));
  return r;
}

template <typename... Ctx>
int64_t add(int64_t a, int64_t b, const char* op, const Ctx&... ctx) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) [[unlikely]]
    throw ShapeError(detail::str_cat(op, ": ", a, " + ", b, " overflows 64-bit sizes", ctx...));
  return r;
}

// Whether the product of the nonzero sizes of `shape` fits in int64 (a shape [0, 2^40, 2^40] is
// refused too: its strides would not fit). Negative sizes are the caller's to reject.
inline bool numel_fits(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (d != 0 && __builtin_mul_overflow(n, d, &n)) return false;
  return true;
}

// The element count of a tensor of `shape` and `dtype`: sizes non-negative, the element count
// and the byte size of a dense copy within int64. ShapeError naming op and ctx otherwise.
template <typename... Ctx>
int64_t numel(const Shape& shape, DType dtype, const char* op, const Ctx&... ctx) {
  WICK_CHECK(is_valid(dtype), DTypeError, op, "invalid dtype ", static_cast<int>(dtype), ctx...);
  for (int64_t d : shape)
    WICK_CHECK(d >= 0, ShapeError, op, "negative size in shape ", shape, ctx...);
  WICK_CHECK(numel_fits(shape), ShapeError, op, "shape ", shape, " has more than 2^63 - 1 elements", ctx...);
  const int64_t n = shape.numel();
  int64_t bytes;
  WICK_CHECK(!__builtin_mul_overflow(n, dtype_size(dtype), &bytes), ShapeError, op, "shape ", shape, " of ", dtype,
             " needs more than 2^63 - 1 bytes", ctx...);
  return n;
}

// "[start, end)" of `len` elements from `start`, for messages; "[start, start + len)" when the
// end does not fit in int64.
inline std::string range_text(int64_t start, int64_t len) {
  int64_t end;
  if (__builtin_add_overflow(start, len, &end)) return detail::str_cat("[", start, ", ", start, " + ", len, ")");
  return detail::str_cat("[", start, ", ", end, ")");
}

}  // namespace wick::checked
