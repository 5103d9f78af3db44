// A Layout says where the elements of a tensor lie in its storage: shape, strides (in elements,
// non-negative) and a start offset. Every view is a new Layout over the same storage.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "wick/shape.h"

namespace wick {

class Layout {
 public:
  Layout() = default;  // rank 0, one element at offset 0
  // Dense row-major layout of `shape` starting at `offset`.
  explicit Layout(const Shape& shape, int64_t offset = 0);
  // Any strided layout. ShapeError if the ranks differ, a size, stride or the offset is
  // negative, or the element count or the largest element offset does not fit in int64.
  Layout(const Shape& shape, const Strides& strides, int64_t offset);

  const Shape& shape() const { return shape_; }
  const Strides& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t stride(int i) const { return strides_[i]; }
  int64_t numel() const { return shape_.numel(); }

  // Dense row-major (strides of size-1 dims are ignored; an empty layout is contiguous).
  bool is_contiguous() const;
  // One past the largest element offset the layout touches (offset for an empty layout): the
  // storage must hold at least this many elements.
  int64_t extent() const;
  // No two indices reach one element. Conservative: true when, with the dims of size > 1 ordered
  // by stride, each stride exceeds the span of the dims before it. Every view wick makes of a
  // dense tensor passes, except broadcasts; writes into a layout that fails are refused.
  bool is_non_overlapping() const;

  // Views. Dims may be negative (counted from the end). Each throws ShapeError or IndexError
  // naming the view and the shapes when its arguments are invalid.
  Layout narrow(int64_t dim, int64_t start, int64_t len) const;
  // Elements start, start+step, ... below end (clamped to the dim), step >= 1.
  Layout slice(int64_t dim, int64_t start, int64_t end, int64_t step) const;
  Layout transpose(int64_t dim0, int64_t dim1) const;
  Layout permute(std::span<const int64_t> dims) const;
  // Numpy broadcasting to `shape`: new leading dims and size-1 dims get stride 0.
  Layout broadcast_as(const Shape& shape) const;
  Layout squeeze(int64_t dim) const;    // a no-op when the dim is not of size 1
  Layout unsqueeze(int64_t dim) const;  // dim in [-(rank+1), rank]
  // A layout of `shape` over the same elements in row-major order, when one exists without a
  // copy (always for a contiguous layout).
  std::optional<Layout> reshape(const Shape& shape) const;

  std::string to_string() const;  // "shape [2, 3] strides [3, 1] offset 0"

  friend bool operator==(const Layout& a, const Layout& b) {
    return a.shape_ == b.shape_ && a.strides_ == b.strides_ && a.offset_ == b.offset_;
  }

 private:
  Shape shape_;
  Strides strides_;
  int64_t offset_ = 0;
};

}  // namespace wick
