#include "wick/layout.h"

#include <algorithm>
#include <array>
#include <sstream>

#include "core/checked.h"
#include "wick/error.h"

namespace wick {

namespace {

// The largest element offset a layout touches, or nullopt when it does not fit in int64.
std::optional<int64_t> last_offset(const Shape& shape, const Strides& strides, int64_t offset) {
  int64_t last = offset;
  for (int i = 0; i < shape.rank(); ++i) {
    if (shape[i] <= 1) continue;
    int64_t span;
    if (__builtin_mul_overflow(shape[i] - 1, strides[i], &span) || __builtin_add_overflow(last, span, &last))
      return std::nullopt;
  }
  return last;
}

// contiguous_strides, with the errors of a layout (its sizes, their product) named "layout".
Strides dense_strides(const Shape& shape) {
  for (int64_t d : shape) WICK_CHECK(d >= 0, ShapeError, "layout", "negative size in shape ", shape);
  WICK_CHECK(checked::numel_fits(shape), ShapeError, "layout", "shape ", shape, " has more than 2^63 - 1 elements");
  return contiguous_strides(shape);
}

}  // namespace

Layout::Layout(const Shape& shape, int64_t offset) : Layout(shape, dense_strides(shape), offset) {}

// Every Layout passes here: sizes, strides and offset non-negative, and the element count and
// the largest offset (so extent()) within int64, whatever numbers a caller or a file gave.
Layout::Layout(const Shape& shape, const Strides& strides, int64_t offset)
    : shape_(shape), strides_(strides), offset_(offset) {
  WICK_CHECK(shape.rank() == strides.rank(), ShapeError, "layout", "shape ", shape, " and strides ", strides,
             " differ in rank");
  WICK_CHECK(offset >= 0, ShapeError, "layout", "negative offset ", offset, " (shape ", shape, ")");
  for (int i = 0; i < shape.rank(); ++i) {
    WICK_CHECK(shape[i] >= 0 && strides[i] >= 0, ShapeError, "layout", "negative size or stride in shape ", shape,
               " strides ", strides);
  }
  WICK_CHECK(checked::numel_fits(shape), ShapeError, "layout", "shape ", shape, " has more than 2^63 - 1 elements");
  WICK_CHECK(numel() == 0 || last_offset(shape, strides, offset).value_or(checked::kMax) < checked::kMax, ShapeError,
             "layout", "shape ", shape, " strides ", strides, " offset ", offset,
             " reaches past element 2^63 - 1");
}

bool Layout::is_contiguous() const {
  if (numel() == 0) return true;
  int64_t expected = 1;
  for (int i = rank() - 1; i >= 0; --i) {
    if (shape_[i] == 1) continue;
    if (strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

int64_t Layout::extent() const {
  if (numel() == 0) return offset_;
  return *last_offset(shape_, strides_, offset_) + 1;  // fits: checked by the constructor
}

bool Layout::is_non_overlapping() const {
  if (numel() <= 1) return true;
  // Dims of size > 1 by increasing stride; each stride must pass the span of those before it.
  std::array<int, kMaxRank> order{};
  int n = 0;
  for (int i = 0; i < rank(); ++i) {  // insertion by stride: at most kMaxRank dims
    if (shape_[i] <= 1) continue;
    int j = n++;
    for (; j > 0 && strides_[order[static_cast<size_t>(j - 1)]] > strides_[i]; --j)
      order[static_cast<size_t>(j)] = order[static_cast<size_t>(j - 1)];
    order[static_cast<size_t>(j)] = i;
  }
  int64_t span = 0;  // the largest offset the dims so far reach from 0
  for (int j = 0; j < n; ++j) {
    const int i = order[static_cast<size_t>(j)];
    if (strides_[i] <= span) return false;
    span += (shape_[i] - 1) * strides_[i];  // within extent(): no overflow
  }
  return true;
}

Layout Layout::narrow(int64_t dim, int64_t start, int64_t len) const {
  int d = normalize_dim(dim, rank(), "narrow");
  WICK_CHECK(start >= 0 && len >= 0 && start <= shape_[d] - len, IndexError, "narrow", "elements ",
             checked::range_text(start, len), " are outside dim ", dim, " of size ", shape_[d], " (shape ", shape_, ")");
  Layout out = *this;
  out.shape_[d] = len;
  // An element of this layout, so within extent(); an empty result keeps its offset.
  if (out.numel() > 0) out.offset_ += start * strides_[d];
  return out;
}

Layout Layout::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  int d = normalize_dim(dim, rank(), "slice");
  WICK_CHECK(step >= 1, ShapeError, "slice", "step must be positive, got ", step);
  const int64_t size = shape_[d];
  // Negative bounds count from the end; both are then clamped to [0, size] (no overflow: a
  // negative bound plus a size is within int64).
  start = std::clamp<int64_t>(start < 0 ? start + size : start, 0, size);
  end = std::clamp<int64_t>(end < 0 ? end + size : end, start, size);
  const int64_t len = (end - start) / step + ((end - start) % step != 0);
  Layout out = *this;
  out.shape_[d] = len;
  if (out.numel() > 0) out.offset_ += start * strides_[d];
  // With two or more elements the new stride spans part of the old dim, so it fits when the view
  // has elements; with fewer, or in an empty view, it never addresses anything and stays.
  if (len > 1 && __builtin_mul_overflow(strides_[d], step, &out.strides_[d])) out.strides_[d] = strides_[d];
  return out;
}

Layout Layout::transpose(int64_t dim0, int64_t dim1) const {
  int a = normalize_dim(dim0, rank(), "transpose"), b = normalize_dim(dim1, rank(), "transpose");
  Layout out = *this;
  std::swap(out.shape_[a], out.shape_[b]);
  std::swap(out.strides_[a], out.strides_[b]);
  return out;
}

Layout Layout::permute(std::span<const int64_t> dims) const {
  WICK_CHECK(static_cast<int>(dims.size()) == rank(), ShapeError, "permute", "got ", dims.size(),
             " dims for a tensor of shape ", shape_);
  Layout out = *this;
  bool seen[kMaxRank] = {};
  for (int i = 0; i < rank(); ++i) {
    int d = normalize_dim(dims[static_cast<size_t>(i)], rank(), "permute");
    WICK_CHECK(!seen[d], ShapeError, "permute", "dim ", d, " appears twice (shape ", shape_, ")");
    seen[d] = true;
    out.shape_[i] = shape_[d];
    out.strides_[i] = strides_[d];
  }
  return out;
}

Layout Layout::broadcast_as(const Shape& shape) const {
  WICK_CHECK(shape.rank() >= rank(), ShapeError, "broadcast_as", "cannot broadcast shape ", shape_,
             " to lower-rank shape ", shape);
  WICK_CHECK(checked::numel_fits(shape), ShapeError, "broadcast_as", "shape ", shape,
             " has more than 2^63 - 1 elements");
  int lead = shape.rank() - rank();
  Strides strides = shape;
  for (int i = 0; i < shape.rank(); ++i) {
    if (i < lead) {
      strides[i] = 0;
      continue;
    }
    int64_t src = shape_[i - lead];
    WICK_CHECK(src == shape[i] || src == 1, ShapeError, "broadcast_as", "cannot broadcast shape ", shape_, " to ",
               shape);
    strides[i] = src == shape[i] ? strides_[i - lead] : 0;
  }
  return Layout(shape, strides, offset_);
}

Layout Layout::squeeze(int64_t dim) const {
  int d = normalize_dim(dim, rank(), "squeeze");
  if (shape_[d] != 1) return *this;  // as PyTorch and Candle: only size-1 dims go
  Layout out = *this;
  out.shape_.erase(d);
  out.strides_.erase(d);
  return out;
}

Layout Layout::unsqueeze(int64_t dim) const {
  int d = normalize_dim(dim, rank() + 1, "unsqueeze");
  Layout out = *this;
  // The stride of a size-1 dim addresses nothing; take the dense one when it fits.
  int64_t stride = 1;
  if (d < rank() && __builtin_mul_overflow(strides_[d], shape_[d], &stride)) stride = 0;
  out.shape_.insert(d, 1);
  out.strides_.insert(d, stride);
  return out;
}

std::optional<Layout> Layout::reshape(const Shape& shape) const {
  for (int64_t d : shape) WICK_CHECK(d >= 0, ShapeError, "reshape", "negative size in shape ", shape);
  WICK_CHECK(checked::numel_fits(shape), ShapeError, "reshape", "shape ", shape, " has more than 2^63 - 1 elements");
  WICK_CHECK(shape.numel() == numel(), ShapeError, "reshape", "cannot reshape ", shape_, " (", numel(),
             " elements) to ", shape, " (", shape.numel(), " elements)");
  if (is_contiguous() || numel() == 0) return Layout(shape, offset_);
  // Split the old dims into runs that are contiguous among themselves; each run must map onto
  // whole new dims, which then get strides within the run (PyTorch's view rule).
  Strides strides = shape;
  int view_d = shape.rank() - 1;
  int64_t chunk_base = strides_[rank() - 1];
  int64_t tensor_numel = 1, view_numel = 1;
  // Products that overflow are no stride of this layout: a run ends there, or the view is refused
  // and the caller copies.
  for (int d = rank() - 1; d >= 0; --d) {
    tensor_numel *= shape_[d];  // a partial product of a nonzero element count: fits
    int64_t run_stride = 0;
    if (d == 0 || (shape_[d - 1] != 1 && (__builtin_mul_overflow(tensor_numel, chunk_base, &run_stride) ||
                                          strides_[d - 1] != run_stride))) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        if (__builtin_mul_overflow(view_numel, chunk_base, &strides[view_d])) return std::nullopt;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base = strides_[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return Layout(shape, strides, offset_);
}

std::string Layout::to_string() const {
  std::ostringstream os;
  os << "shape " << shape_ << " strides " << strides_ << " offset " << offset_;
  return os.str();
}

}  // namespace wick
