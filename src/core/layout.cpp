#include "wick/layout.h"

#include <algorithm>
#include <sstream>

#include "wick/error.h"

namespace wick {

Layout::Layout(const Shape& shape, int64_t offset)
    : shape_(shape), strides_(contiguous_strides(shape)), offset_(offset) {}

Layout::Layout(const Shape& shape, const Strides& strides, int64_t offset)
    : shape_(shape), strides_(strides), offset_(offset) {
  WICK_CHECK(shape.rank() == strides.rank(), ShapeError, "layout", "shape ", shape, " and strides ", strides,
             " differ in rank");
  WICK_CHECK(offset >= 0, ShapeError, "layout", "negative offset ", offset);
  for (int i = 0; i < shape.rank(); ++i) {
    WICK_CHECK(shape[i] >= 0 && strides[i] >= 0, ShapeError, "layout", "negative size or stride in shape ", shape,
               " strides ", strides);
  }
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
  int64_t last = offset_;
  for (int i = 0; i < rank(); ++i) last += (shape_[i] - 1) * strides_[i];
  return last + 1;
}

Layout Layout::narrow(int64_t dim, int64_t start, int64_t len) const {
  int d = normalize_dim(dim, rank(), "narrow");
  WICK_CHECK(start >= 0 && len >= 0 && start + len <= shape_[d], IndexError, "narrow", "elements [", start, ", ",
             start + len, ") are outside dim ", dim, " of size ", shape_[d], " (shape ", shape_, ")");
  Layout out = *this;
  out.shape_[d] = len;
  out.offset_ += start * strides_[d];
  return out;
}

Layout Layout::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  int d = normalize_dim(dim, rank(), "slice");
  WICK_CHECK(step >= 1, ShapeError, "slice", "step must be positive, got ", step);
  int64_t size = shape_[d];
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  Layout out = *this;
  out.shape_[d] = (end - start + step - 1) / step;
  out.offset_ += start * strides_[d];
  out.strides_[d] = strides_[d] * step;
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
  int64_t stride = d < rank() ? strides_[d] * shape_[d] : 1;
  out.shape_.insert(d, 1);
  out.strides_.insert(d, stride);
  return out;
}

std::optional<Layout> Layout::reshape(const Shape& shape) const {
  WICK_CHECK(shape.numel() == numel(), ShapeError, "reshape", "cannot reshape ", shape_, " (", numel(),
             " elements) to ", shape, " (", shape.numel(), " elements)");
  if (is_contiguous()) return Layout(shape, offset_);
  // Split the old dims into runs that are contiguous among themselves; each run must map onto
  // whole new dims, which then get strides within the run (PyTorch's view rule).
  Strides strides = shape;
  int view_d = shape.rank() - 1;
  int64_t chunk_base = strides_[rank() - 1];
  int64_t tensor_numel = 1, view_numel = 1;
  for (int d = rank() - 1; d >= 0; --d) {
    tensor_numel *= shape_[d];
    if (d == 0 || (shape_[d - 1] != 1 && strides_[d - 1] != tensor_numel * chunk_base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        strides[view_d] = view_numel * chunk_base;
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
