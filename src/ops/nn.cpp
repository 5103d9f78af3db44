// Front end of matmul, the convolutions, pooling and upsampling.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "backend/nn_params.h"
#include "core/checked.h"
#include "core/checks.h"

namespace wick {

using ops::backend_of;
using ops::describe;
using ops::view_of;
using ops::wrap;

namespace {

Shape leading(const Shape& s, int drop) {
  Shape out;
  for (int d = 0; d + drop < s.rank(); ++d) out.push_back(s[d]);
  return out;
}

// `what` >= min for input x (and kernel k of a convolution); the message names both shapes.
void check_pair(const char* op, const char* what, int64_t v, int64_t min, const Tensor& x, const Tensor* k = nullptr) {
  WICK_CHECK(v >= min, ShapeError, op, what, " must be at least ", min, ", got ", v, " (input ", describe(x),
             k ? " and kernel " + describe(*k) : std::string(), ")");
}

// Computes the terms of conv_out_size / conv_transpose_out_size along `axis` in their order with
// checked arithmetic, so that once this passes, the backends' unchecked formulas cannot overflow.
void check_conv_sizes(const char* op, const Tensor& x, const Tensor& k, const ConvParams& p, int axis,
                      bool transposed) {
  const int64_t in = x.shape()[2 + axis], ks = k.shape()[2 + axis];
  const std::string ctx = detail::str_cat(" (input ", describe(x), ", kernel ", describe(k), ", stride ",
                                          p.stride[axis], ", padding ", p.padding[axis], ", dilation ",
                                          p.dilation[axis], ")");
  const int64_t span = checked::mul(p.dilation[axis], ks - 1, op, ctx);
  const int64_t pad2 = checked::mul(2, p.padding[axis], op, ctx);
  if (!transposed) {
    checked::add(in, pad2, op, ctx);
    checked::add(span, 1, op, ctx);
    return;
  }
  const int64_t out = checked::mul(std::max<int64_t>(in - 1, 0), p.stride[axis], op, ctx) - pad2;
  checked::add(checked::add(checked::add(out, span, op, ctx), p.output_padding[axis], op, ctx), 1, op, ctx);
}

Tensor conv(const char* op, OpCode code, const Tensor& x, const Tensor& k, ConvParams p, int spatial, bool transposed) {
  ops::check_same_device(op, {&x, &k});
  ops::check_same_dtype(op, x, k);
  ops::check_supported(op, x, code, {x.dtype()});
  const int rank = 2 + spatial;
  WICK_CHECK(x.rank() == rank, ShapeError, op, "input must have rank ", rank, " (N, C", spatial == 1 ? ", L" : ", H, W",
             "), got ", describe(x), " (kernel ", describe(k), ")");
  WICK_CHECK(k.rank() == rank, ShapeError, op, "kernel must have rank ", rank, ", got ", describe(k), " (input ",
             describe(x), ")");
  check_pair(op, "groups", p.groups, 1, x, &k);
  const int64_t cin = x.shape()[1];
  WICK_CHECK(cin % p.groups == 0, ShapeError, op, "groups ", p.groups, " do not divide the ", cin,
             " input channels of ", describe(x), " (kernel ", describe(k), ")");
  if (transposed) {
    WICK_CHECK(k.shape()[0] == cin, ShapeError, op, "kernel ", describe(k), " must have ", cin,
               " input channels (dim 0) for input ", describe(x));
  } else {
    WICK_CHECK(k.shape()[1] * p.groups == cin, ShapeError, op, "kernel ", describe(k), " must have ", cin / p.groups,
               " channels per group (dim 1) for input ", describe(x), " and groups ", p.groups);
    WICK_CHECK(k.shape()[0] % p.groups == 0, ShapeError, op, "groups ", p.groups, " do not divide the ", k.shape()[0],
               " output channels of kernel ", describe(k));
  }
  for (int a = 0; a < spatial; ++a) {
    check_pair(op, "stride", p.stride[a], 1, x, &k);
    check_pair(op, "dilation", p.dilation[a], 1, x, &k);
    check_pair(op, "padding", p.padding[a], 0, x, &k);
    check_pair(op, "output_padding", p.output_padding[a], 0, x, &k);
    check_pair(op, "kernel size", k.shape()[2 + a], 1, x, &k);
    const int64_t in = x.shape()[2 + a], ks = k.shape()[2 + a];
    check_conv_sizes(op, x, k, p, a, transposed);
    if (transposed) {
      WICK_CHECK(p.output_padding[a] < p.stride[a] || p.output_padding[a] < p.dilation[a], ShapeError, op,
                 "output_padding ", p.output_padding[a], " must be smaller than the stride ", p.stride[a],
                 " or the dilation ", p.dilation[a], " (input ", describe(x), " and kernel ", describe(k), ")");
      WICK_CHECK(conv_transpose_out_size(in, ks, p, a) >= 1, ShapeError, op, "padding ", p.padding[a],
                 " leaves no output for input ", describe(x), " and kernel ", describe(k));
    } else {
      WICK_CHECK(p.output_padding[a] == 0, ShapeError, op, "output_padding is for transposed convolutions only (input ",
                 describe(x), " and kernel ", describe(k), ")");
      WICK_CHECK(in + 2 * p.padding[a] >= p.dilation[a] * (ks - 1) + 1, ShapeError, op, "kernel ", describe(k),
                 " (dilation ", p.dilation[a], ") is larger than the padded input ", describe(x), " (padding ",
                 p.padding[a], ")");
    }
  }
  const Shape out_shape = conv_output_shape(x.shape(), k.shape(), p, spatial, transposed);
  ops::check_output(op, out_shape, x.dtype(), {&x, &k});
  Backend& b = backend_of(x);
  StoragePtr s =
      spatial == 1 ? (transposed ? b.conv_transpose1d(view_of(x), view_of(k), p) : b.conv1d(view_of(x), view_of(k), p))
                   : (transposed ? b.conv_transpose2d(view_of(x), view_of(k), p) : b.conv2d(view_of(x), view_of(k), p));
  return wrap(std::move(s), out_shape, x.dtype());
}

ConvParams params_1d(const Conv1dOptions& o) {
  ConvParams p;
  p.padding[0] = o.padding;
  p.stride[0] = o.stride;
  p.dilation[0] = o.dilation;
  p.output_padding[0] = o.output_padding;
  p.groups = o.groups;
  return p;
}

ConvParams params_2d(const Conv2dOptions& o) {
  ConvParams p;
  p.padding[0] = o.padding.h, p.padding[1] = o.padding.w;
  p.stride[0] = o.stride.h, p.stride[1] = o.stride.w;
  p.dilation[0] = o.dilation.h, p.dilation[1] = o.dilation.w;
  p.output_padding[0] = o.output_padding.h, p.output_padding[1] = o.output_padding.w;
  p.groups = o.groups;
  return p;
}

Tensor pool(const char* op, OpCode code, const Tensor& x, Pair kernel, Pair stride) {
  ops::check_defined(op, x);
  ops::check_supported(op, x, code, {x.dtype()});
  WICK_CHECK(x.rank() == 4, ShapeError, op, "input must have rank 4 (N, C, H, W), got ", describe(x));
  PoolParams p;
  p.kernel[0] = kernel.h, p.kernel[1] = kernel.w, p.stride[0] = stride.h, p.stride[1] = stride.w;
  for (int a = 0; a < 2; ++a) {
    check_pair(op, "kernel size", p.kernel[a], 1, x);
    check_pair(op, "stride", p.stride[a], 1, x);
    WICK_CHECK(p.kernel[a] <= x.shape()[2 + a], ShapeError, op, "kernel ", kernel.h, "x", kernel.w,
               " is larger than the input ", describe(x));
  }
  Backend& b = backend_of(x);
  const Shape out_shape = pool_output_shape(x.shape(), p);
  StoragePtr s = code == OpCode::AvgPool2d ? b.avg_pool2d(view_of(x), p) : b.max_pool2d(view_of(x), p);
  return wrap(std::move(s), out_shape, x.dtype());
}

void check_upsample(const char* op, const Tensor& x, int spatial, std::initializer_list<int64_t> sizes) {
  ops::check_defined(op, x);
  WICK_CHECK(x.rank() == 2 + spatial, ShapeError, op, "input must have rank ", 2 + spatial, ", got ", describe(x));
  int a = 0;
  for (int64_t size : sizes) {
    check_pair(op, "output size", size, 1, x);
    const int64_t in = x.shape()[2 + a];
    WICK_CHECK(in >= 1, ShapeError, op, "cannot upsample the empty dim ", 2 + a, " of ", describe(x));
    // The nearest source index is dst * in / out in exact integer arithmetic (nearest_source),
    // dst < size.
    checked::mul(size - 1, in, op, " (output size ", size, " for dim ", 2 + a, " of ", describe(x), ")");
    ++a;
  }
}

// matmul of lhs and rhs, its errors named after `op` (matmul, dot or mv).
Tensor matmul_as(const char* op, const Tensor& lhs, const Tensor& rhs) {
  ops::check_same_device(op, {&lhs, &rhs});
  ops::check_same_dtype(op, lhs, rhs);
  ops::check_supported(op, lhs, OpCode::Matmul, {lhs.dtype()});
  WICK_CHECK(lhs.rank() >= 1 && rhs.rank() >= 1, ShapeError, op, "operands must have rank 1 or more: ", describe(lhs),
             " and ", describe(rhs));
  const Tensor a = lhs.rank() == 1 ? lhs.unsqueeze(0) : lhs;
  const Tensor b = rhs.rank() == 1 ? rhs.unsqueeze(-1) : rhs;
  const int64_t m = a.dim(-2), k = a.dim(-1), n = b.dim(-1);
  WICK_CHECK(b.dim(-2) == k, ShapeError, op, "inner dims differ: ", describe(lhs), " has ", k, ", ", describe(rhs),
             " has ", b.dim(-2));
  Shape batch;
  try {
    batch = broadcast_shapes(leading(a.shape(), 2), leading(b.shape(), 2), op);
  } catch (const ShapeError& e) {
    throw ShapeError(detail::str_cat(e.what(), " (batch dims of ", describe(lhs), " and ", describe(rhs), ")"));
  }
  Shape sa = batch, sb = batch, so = batch;
  sa.push_back(m), sa.push_back(k);
  sb.push_back(k), sb.push_back(n);
  so.push_back(m), so.push_back(n);
  ops::check_output(op, so, lhs.dtype(), {&lhs, &rhs});
  // Every backend multiplies through a BLAS with 32-bit dims (cuBLAS, rocBLAS, OpenBLAS's LP64
  // interface): refused here, so that dot and mv name themselves.
  constexpr int64_t kBlasMax = std::numeric_limits<int>::max();
  WICK_CHECK(m <= kBlasMax && n <= kBlasMax && k <= kBlasMax, NotSupportedError, op, "dims m=", m, " n=", n, " k=", k,
             " exceed the 32-bit BLAS interface (", describe(lhs), " and ", describe(rhs), ")");
  // A product by one matrix whose left operand's batch and row dims merge into one without a copy
  // (a linear layer over (batch, t, k) activations) runs as one product of batch * m rows: one
  // GEMM, or one pass over b, where a batch of products would read b once each.
  std::optional<Layout> merged;
  if (b.rank() == 2 && a.rank() > 2) {
    Shape rows = batch;
    rows.push_back(m);
    if (checked::numel_fits(rows) && rows.numel() <= kBlasMax) merged = a.layout().reshape(Shape({rows.numel(), k}));
  }
  const Layout la = merged ? *merged : a.layout().broadcast_as(sa), lb = merged ? b.layout() : b.layout().broadcast_as(sb);
  Tensor out = wrap(backend_of(a).matmul(view_of(a, la), view_of(b, lb)), so, lhs.dtype());
  if (lhs.rank() == 1) out = out.squeeze(-2);
  if (rhs.rank() == 1) out = out.squeeze(-1);
  return out;
}

}  // namespace

Tensor Tensor::matmul(const Tensor& rhs) const { return matmul_as("matmul", *this, rhs); }

Tensor Tensor::dot(const Tensor& rhs) const {
  ops::check_same_device("dot", {this, &rhs});
  WICK_CHECK(rank() == 1 && rhs.rank() == 1, ShapeError, "dot", "needs two tensors of rank 1, got ", describe(*this),
             " and ", describe(rhs));
  return matmul_as("dot", *this, rhs);
}

Tensor Tensor::mv(const Tensor& vec) const {
  ops::check_same_device("mv", {this, &vec});
  WICK_CHECK(rank() == 2 && vec.rank() == 1, ShapeError, "mv", "needs a matrix and a vector, got ", describe(*this),
             " and ", describe(vec));
  return matmul_as("mv", *this, vec);
}

Tensor Tensor::conv1d(const Tensor& kernel, const Conv1dOptions& o) const {
  return conv("conv1d", OpCode::Conv1d, *this, kernel, params_1d(o), 1, false);
}
Tensor Tensor::conv_transpose1d(const Tensor& kernel, const Conv1dOptions& o) const {
  return conv("conv_transpose1d", OpCode::ConvTranspose1d, *this, kernel, params_1d(o), 1, true);
}
Tensor Tensor::conv2d(const Tensor& kernel, const Conv2dOptions& o) const {
  return conv("conv2d", OpCode::Conv2d, *this, kernel, params_2d(o), 2, false);
}
Tensor Tensor::conv_transpose2d(const Tensor& kernel, const Conv2dOptions& o) const {
  return conv("conv_transpose2d", OpCode::ConvTranspose2d, *this, kernel, params_2d(o), 2, true);
}

Tensor Tensor::avg_pool2d(Pair kernel, Pair stride) const {
  return pool("avg_pool2d", OpCode::AvgPool2d, *this, kernel, stride);
}
Tensor Tensor::max_pool2d(Pair kernel, Pair stride) const {
  return pool("max_pool2d", OpCode::MaxPool2d, *this, kernel, stride);
}

Tensor Tensor::upsample_nearest1d(int64_t size) const {
  check_upsample("upsample_nearest1d", *this, 1, {size});
  Shape s = shape();
  s[2] = size;
  ops::check_output("upsample_nearest1d", s, dtype_, {this});
  return wrap(backend_of(*this).upsample_nearest1d(view_of(*this), size), s, dtype_);
}

Tensor Tensor::upsample_nearest2d(int64_t height, int64_t width) const {
  check_upsample("upsample_nearest2d", *this, 2, {height, width});
  Shape s = shape();
  s[2] = height, s[3] = width;
  ops::check_output("upsample_nearest2d", s, dtype_, {this});
  return wrap(backend_of(*this).upsample_nearest2d(view_of(*this), height, width), s, dtype_);
}

namespace {

Tensor bilinear(const Tensor& x, BilinearParams p) {
  const char* op = "upsample_bilinear2d";
  check_upsample(op, x, 2, {p.out_h, p.out_w});
  ops::check_supported(op, x, OpCode::UpsampleBilinear2d, {x.dtype()});
  Shape s = x.shape();
  s[2] = p.out_h, s[3] = p.out_w;
  ops::check_output(op, s, x.dtype(), {&x});
  return wrap(backend_of(x).upsample_bilinear2d(view_of(x), p), s, x.dtype());
}

}  // namespace

Tensor Tensor::upsample_bilinear2d(int64_t height, int64_t width, bool align_corners) const {
  BilinearParams p;
  p.out_h = height, p.out_w = width, p.align_corners = align_corners;
  return bilinear(*this, p);
}

Tensor Tensor::upsample_bilinear2d_scale(double scale_h, double scale_w, bool align_corners) const {
  const char* op = "upsample_bilinear2d";
  ops::check_defined(op, *this);
  WICK_CHECK(rank() == 4, ShapeError, op, "input must have rank 4, got ", describe(*this));
  WICK_CHECK(scale_h > 0 && scale_w > 0 && std::isfinite(scale_h) && std::isfinite(scale_w), ShapeError, op,
             "scale factors must be positive, got ", scale_h, " and ", scale_w, " (", describe(*this), ")");
  const double out_h = std::floor(static_cast<double>(dim(2)) * scale_h);
  const double out_w = std::floor(static_cast<double>(dim(3)) * scale_w);
  WICK_CHECK(out_h < 0x1p62 && out_w < 0x1p62, ShapeError, op, "scale factors ", scale_h, " and ", scale_w,
             " give an output size beyond 2^62 (", describe(*this), ")");
  BilinearParams p;
  p.out_h = static_cast<int64_t>(out_h);
  p.out_w = static_cast<int64_t>(out_w);
  p.align_corners = align_corners, p.scale_h = scale_h, p.scale_w = scale_w;
  return bilinear(*this, p);
}

}  // namespace wick
