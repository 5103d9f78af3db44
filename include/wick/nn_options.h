// Options of the convolution, pooling and upsampling ops. A per-axis value given as one number
// applies to both axes: Conv2dOptions{.padding = 1, .stride = {2, 1}}.
#pragma once

#include <cstdint>

namespace wick {

// A value per spatial axis (height, width).
struct Pair {
  int64_t h, w;
  Pair(int64_t both) : h(both), w(both) {}  // NOLINT: implicit, so that a number is a shorthand
  Pair(int64_t h_, int64_t w_) : h(h_), w(w_) {}
};

struct Conv1dOptions {
  int64_t padding = 0;
  int64_t stride = 1;
  int64_t dilation = 1;
  int64_t output_padding = 0;  // conv_transpose1d only: extra length at the end of the output
  int64_t groups = 1;
};

struct Conv2dOptions {
  Pair padding = 0;
  Pair stride = 1;
  Pair dilation = 1;
  Pair output_padding = 0;  // conv_transpose2d only
  int64_t groups = 1;
};

}  // namespace wick
