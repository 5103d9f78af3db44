// Host-side layout helpers shared by every backend: collapse the dims of N operands that walk
// one shape together, and classify what is left. After collapsing, an elementwise op over
// contiguous operands is a single dim of stride 1, and a broadcast operand has stride-0 dims.
// The struct is plain data, so a GPU backend passes it to kernels by value.
#pragma once

#include <array>
#include <cstdint>
#include <limits>

#include "wick/layout.h"

namespace wick {

// A typed operand of an elementwise op: element 0 of its storage (the layout holds the offset),
// and the layout over it.
template <typename T>
struct Operand {
  const T* data;
  const Layout* layout;
};

// l's strides over `shape`, with dim's stride replaced (0: the index ops read x at the ids'
// positions through their own stride).
inline Layout with_stride(const Layout& l, const Shape& shape, int dim, int64_t stride) {
  Strides s = l.strides();
  s[dim] = stride;
  return Layout(shape, s, l.offset());
}

// Rank-1 ids seen as a tensor of `shape` that varies only along dim.
inline Layout ids_along(const Layout& ids, const Shape& shape, int dim) {
  Strides s = shape;
  for (int d = 0; d < shape.rank(); ++d) s[d] = d == dim ? ids.stride(0) : 0;
  return Layout(shape, s, ids.offset());
}

template <int N>
struct StridedSpace {
  int rank = 0;  // 0 only for an empty space; one element is rank 1 of size 1
  int64_t shape[kMaxRank] = {};
  int64_t strides[N][kMaxRank] = {};
  int64_t offsets[N] = {};

  int64_t numel() const {
    if (rank == 0) return 0;
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= shape[i];
    return n;
  }
  // Operand k is read densely in order: one dim of stride 1, or a single element.
  bool dense(int k) const { return rank == 1 && (shape[0] == 1 || strides[k][0] == 1); }
  bool all_dense() const {
    for (int k = 0; k < N; ++k)
      if (!dense(k)) return false;
    return true;
  }
  // The largest element offset any operand reaches: decides 32- or 64-bit index maths.
  int64_t max_offset() const {
    int64_t m = 0;
    for (int k = 0; k < N; ++k) {
      int64_t o = offsets[k];
      for (int i = 0; i < rank; ++i) o += (shape[i] - 1) * strides[k][i];
      m = o > m ? o : m;
    }
    return m;
  }
  bool fits_int32() const {
    constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
    return numel() <= kMax && max_offset() <= kMax;
  }
};

// What a kernel needs to know of one operand's layout.
enum class LayoutKind {
  Contiguous,  // dense row-major from its offset
  Scalar,      // one element read everywhere (every stride 0, or a single element)
  General,     // anything else: walk the strides
};

inline LayoutKind classify(const Layout& l) {
  if (l.is_contiguous()) return LayoutKind::Contiguous;
  for (int i = 0; i < l.rank(); ++i)
    if (l.dim(i) != 1 && l.stride(i) != 0) return LayoutKind::General;
  return LayoutKind::Scalar;
}

// Collapses the common shape of `layouts` (all of one shape): size-1 dims are dropped, and
// neighbouring dims merge where every operand steps through them as through one dim.
template <int N>
StridedSpace<N> collapse(const std::array<const Layout*, N>& layouts) {
  StridedSpace<N> s;
  const Shape& shape = layouts[0]->shape();
  for (int k = 0; k < N; ++k) s.offsets[k] = layouts[k]->offset();
  if (shape.numel() == 0) return s;
  for (int i = 0; i < shape.rank(); ++i) {
    if (shape[i] == 1) continue;
    bool merge = s.rank > 0;
    for (int k = 0; k < N && merge; ++k) merge = s.strides[k][s.rank - 1] == layouts[k]->stride(i) * shape[i];
    int d = merge ? s.rank - 1 : s.rank++;
    s.shape[d] = merge ? s.shape[d] * shape[i] : shape[i];
    for (int k = 0; k < N; ++k) s.strides[k][d] = layouts[k]->stride(i);
  }
  if (s.rank == 0) {  // a single element
    s.rank = 1;
    s.shape[0] = 1;
    for (int k = 0; k < N; ++k) s.strides[k][0] = 1;
  }
  return s;
}

}  // namespace wick
