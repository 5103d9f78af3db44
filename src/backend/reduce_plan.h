// How a reduction walks its input, shared by the backends: a kept space (one point per output
// element, with the output's and the input's strides) and a reduced space (the input's strides
// over the reduced dims, walked in memory order, so a full reduction of a permuted contiguous
// tensor is one dense run).
#pragma once

#include <algorithm>
#include <span>
#include <vector>

#include "backend/strided.h"

namespace wick {

struct ReducePlan {
  Shape out_shape;          // the input's shape with reduced dims set to 1
  StridedSpace<2> kept;     // operand 0: the output (contiguous); 1: the input
  StridedSpace<1> reduced;  // offsets relative to the input's point of the kept space
  int64_t kept_numel() const { return kept.numel(); }
  int64_t reduced_numel() const { return reduced.numel(); }
};

inline ReducePlan make_reduce_plan(const Layout& x, std::span<const int> dims) {
  ReducePlan plan;
  bool reduced[kMaxRank] = {};
  for (int d : dims) reduced[d] = true;
  plan.out_shape = x.shape();
  for (int d : dims) plan.out_shape[d] = 1;
  const Strides out_strides = contiguous_strides(plan.out_shape);
  Shape kshape, rshape;
  Strides kx, ko, rx;
  std::vector<int> rdims;
  for (int d = 0; d < x.rank(); ++d) {
    if (reduced[d]) {
      rdims.push_back(d);
    } else {
      kshape.push_back(x.dim(d));
      kx.push_back(x.stride(d));
      ko.push_back(out_strides[d]);
    }
  }
  // Argmin/argmax reduce one dim, whose position is the element index: any order works for one.
  std::stable_sort(rdims.begin(), rdims.end(), [&](int a, int b) { return x.stride(a) > x.stride(b); });
  for (int d : rdims) {
    rshape.push_back(x.dim(d));
    rx.push_back(x.stride(d));
  }
  const Layout kept_out(kshape, ko, 0), kept_x(kshape, kx, x.offset()), red_x(rshape, rx, 0);
  plan.kept = collapse<2>({&kept_out, &kept_x});
  plan.reduced = collapse<1>({&red_x});
  return plan;
}

}  // namespace wick
