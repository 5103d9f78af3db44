#include "wick/shape.h"

#include <algorithm>
#include <ostream>
#include <sstream>

#include "wick/error.h"

namespace wick {

namespace {
void check_rank(size_t rank) {
  if (rank > static_cast<size_t>(kMaxRank))
    throw ShapeError(detail::str_cat("shape: rank ", rank, " exceeds wick's maximum rank ", kMaxRank));
}
}  // namespace

Dims::Dims(std::initializer_list<int64_t> dims) : Dims(std::span<const int64_t>(dims.begin(), dims.size())) {}

Dims::Dims(std::span<const int64_t> dims) {
  check_rank(dims.size());
  std::copy(dims.begin(), dims.end(), d_.begin());
  rank_ = static_cast<int>(dims.size());
}

int64_t Dims::numel() const {
  int64_t n = 1;
  bool empty = false;
  for (int i = 0; i < rank_; ++i) {
    const int64_t d = d_[static_cast<size_t>(i)];
    if (d == 0) empty = true;
    else if (__builtin_mul_overflow(n, d, &n))
      throw ShapeError(detail::str_cat("numel: shape ", *this, " has more than 2^63 - 1 elements"));
  }
  return empty ? 0 : n;
}

void Dims::push_back(int64_t v) {
  check_rank(static_cast<size_t>(rank_) + 1);
  d_[static_cast<size_t>(rank_++)] = v;
}

void Dims::insert(int pos, int64_t v) {
  check_rank(static_cast<size_t>(rank_) + 1);
  for (int i = rank_; i > pos; --i) d_[static_cast<size_t>(i)] = d_[static_cast<size_t>(i - 1)];
  d_[static_cast<size_t>(pos)] = v;
  ++rank_;
}

void Dims::erase(int pos) {
  for (int i = pos; i + 1 < rank_; ++i) d_[static_cast<size_t>(i)] = d_[static_cast<size_t>(i + 1)];
  --rank_;
}

std::string Dims::to_string() const {
  std::ostringstream os;
  os << *this;
  return os.str();
}

bool operator==(const Dims& a, const Dims& b) {
  return a.rank_ == b.rank_ && std::equal(a.begin(), a.end(), b.begin());
}

std::ostream& operator<<(std::ostream& os, const Dims& d) {
  os << '[';
  for (int i = 0; i < d.rank(); ++i) os << (i ? ", " : "") << d[i];
  return os << ']';
}

Strides contiguous_strides(const Shape& shape) {
  Strides s = shape;
  int64_t acc = 1;
  for (int i = shape.rank() - 1; i >= 0; --i) {
    const int64_t d = shape[i];
    if (d < 0) throw ShapeError(detail::str_cat("strides: negative size in shape ", shape));
    s[i] = acc;
    // As PyTorch: an empty dim does not zero the strides above it. The whole product must fit,
    // as every element count does.
    if (__builtin_mul_overflow(acc, std::max<int64_t>(d, 1), &acc))
      throw ShapeError(detail::str_cat("strides: shape ", shape, " has more than 2^63 - 1 elements"));
  }
  return s;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  int rank = std::max(a.rank(), b.rank());
  Shape out;
  for (int i = 0; i < rank; ++i) {
    int ia = i - (rank - a.rank()), ib = i - (rank - b.rank());
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    WICK_CHECK(da >= 0 && db >= 0, ShapeError, op, "negative size in shapes ", a, " and ", b);
    WICK_CHECK(da == db || da == 1 || db == 1, ShapeError, op, "shapes ", a, " and ", b,
               " cannot be broadcast together (dim ", i, ": ", da, " vs ", db, ")");
    out.push_back(da == 1 ? db : da);
  }
  return out;
}

int normalize_dim(int64_t dim, int rank, const char* op) {
  WICK_CHECK(rank >= 0 && rank <= kMaxRank + 1, ShapeError, op, "rank ", rank, " is out of range");
  const int64_t d = dim < 0 ? dim + rank : dim;  // no overflow: rank is small and non-negative
  WICK_CHECK(d >= 0 && d < rank, ShapeError, op, "dim ", dim, " out of range for a tensor of rank ", rank);
  return static_cast<int>(d);
}

}  // namespace wick
