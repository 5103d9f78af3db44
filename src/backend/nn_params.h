// Parameters of the matmul, convolution, pooling and upsampling Backend ops, and their output
// sizes (shared by the front end, which validates them, and every backend).
#pragma once

#include <cstdint>

#include "wick/float_types.h"  // WICK_HD
#include "wick/shape.h"

namespace wick {

// Per spatial axis: index 0 is H and 1 is W for the 2d ops; the 1d ops use index 0 only.
struct ConvParams {
  int64_t padding[2] = {0, 0};
  int64_t stride[2] = {1, 1};
  int64_t dilation[2] = {1, 1};
  int64_t output_padding[2] = {0, 0};  // transposed convolutions only
  int64_t groups = 1;
};

// Output length of a convolution along an axis: (in + 2p - d (k - 1) - 1) / s + 1. The front end
// has checked that in + 2p >= d (k - 1) + 1.
inline int64_t conv_out_size(int64_t in, int64_t k, const ConvParams& p, int axis) {
  return (in + 2 * p.padding[axis] - p.dilation[axis] * (k - 1) - 1) / p.stride[axis] + 1;
}

// Output length of a transposed convolution: (in - 1) s - 2p + d (k - 1) + output_padding + 1.
inline int64_t conv_transpose_out_size(int64_t in, int64_t k, const ConvParams& p, int axis) {
  return (in - 1) * p.stride[axis] - 2 * p.padding[axis] + p.dilation[axis] * (k - 1) + p.output_padding[axis] + 1;
}

// x (N, C_in, spatial...) with kernel k: (C_out, C_in / groups, K...) for a convolution,
// (C_in, C_out / groups, K...) for a transposed one. `spatial` is 1 or 2.
inline Shape conv_output_shape(const Shape& x, const Shape& k, const ConvParams& p, int spatial, bool transposed) {
  Shape out = x;
  out[1] = transposed ? k[1] * p.groups : k[0];
  for (int a = 0; a < spatial; ++a) {
    out[2 + a] =
        transposed ? conv_transpose_out_size(x[2 + a], k[2 + a], p, a) : conv_out_size(x[2 + a], k[2 + a], p, a);
  }
  return out;
}

// The 1d ops run as 2d ones over a height of 1: their axis-0 parameters become the W axis.
inline ConvParams conv1d_as_2d(const ConvParams& p) {
  ConvParams q;
  q.padding[1] = p.padding[0];
  q.stride[1] = p.stride[0];
  q.dilation[1] = p.dilation[0];
  q.output_padding[1] = p.output_padding[0];
  q.groups = p.groups;
  return q;
}

// Bilinear source coordinate of output index `dst` along an axis, as PyTorch computes it.
// `scale` is the given scale factor (> 0) or 0 when there is none.
WICK_HD inline double bilinear_source(int64_t in, int64_t out, bool align_corners, double scale, int64_t dst) {
  if (align_corners) return out > 1 ? static_cast<double>(dst) * (in - 1) / (out - 1) : 0.0;
  double step = scale > 0 ? 1.0 / scale : static_cast<double>(in) / out;
  double src = step * (static_cast<double>(dst) + 0.5) - 0.5;
  return src < 0 ? 0 : src;
}

// Nearest source index: min(in - 1, floor(dst * in / out)), in exact integer arithmetic.
WICK_HD inline int64_t nearest_source(int64_t in, int64_t out, int64_t dst) {
  int64_t s = dst * in / out;
  return s < in - 1 ? s : in - 1;
}

// Pooling windows of kernel[0] x kernel[1] every stride[0], stride[1]; no padding; the output size
// is floor((in - k) / s) + 1.
struct PoolParams {
  int64_t kernel[2] = {1, 1};
  int64_t stride[2] = {1, 1};
};

inline Shape pool_output_shape(const Shape& x, const PoolParams& p) {
  Shape out = x;
  for (int a = 0; a < 2; ++a) out[2 + a] = (x[2 + a] - p.kernel[a]) / p.stride[a] + 1;
  return out;
}

// Bilinear upsampling as PyTorch's interpolate(mode="bilinear"): with align_corners the corner
// pixels of input and output line up; without it pixel centres do (half-pixel offsets), using
// scale_h/scale_w when given (> 0) instead of in/out.
struct BilinearParams {
  int64_t out_h = 0, out_w = 0;
  bool align_corners = false;
  double scale_h = 0, scale_w = 0;
};

}  // namespace wick
