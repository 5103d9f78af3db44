// Row-major walk over every multi-index of a shape.
#pragma once

#include <cstdint>

#include "wick/layout.h"

namespace wick::reference {

class IndexIter {
 public:
  explicit IndexIter(const Shape& shape) : shape_(shape), done_(shape.numel() == 0) {
    for (int d = 0; d < kMaxRank; ++d) idx_[d] = 0;
  }
  bool done() const { return done_; }
  const int64_t* index() const { return idx_; }
  int64_t operator[](int d) const { return idx_[d]; }
  void next() {
    for (int d = shape_.rank() - 1; d >= 0; --d) {
      if (++idx_[d] < shape_[d]) return;
      idx_[d] = 0;
    }
    done_ = true;
  }

 private:
  Shape shape_;
  int64_t idx_[kMaxRank];
  bool done_;
};

// Element offset of a multi-index in a layout; `replace_dim` (if >= 0) takes index `value`.
inline int64_t offset_of(const Layout& l, const int64_t* idx, int replace_dim = -1, int64_t value = 0) {
  int64_t off = l.offset();
  for (int d = 0; d < l.rank(); ++d) off += (d == replace_dim ? value : idx[d]) * l.stride(d);
  return off;
}

// Row-major position of a multi-index in a contiguous tensor of `shape`.
inline int64_t linear_of(const Shape& shape, const int64_t* idx) {
  int64_t pos = 0;
  for (int d = 0; d < shape.rank(); ++d) pos = pos * shape[d] + idx[d];
  return pos;
}

}  // namespace wick::reference
