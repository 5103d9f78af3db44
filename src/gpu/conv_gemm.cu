// wick's own GPU convolutions: im2col + GEMM, and GEMM + col2im for the transposed forms, with
// groups native (one strided-batched product per group over a chunk of images). Used where the
// vendor's convolution library cannot serve (gpu/conv.cu decides). col2im gathers the taps of each
// output element on one thread, so no atomics and the same result every run.
#include "core/checked.h"
#include "core/dispatch.h"
#include "gpu/blas.h"
#include "gpu/conv.h"
#include "gpu/elementwise.cuh"
#include "gpu/gpu_backend.h"
#include "kernels/numeric.h"

namespace wick::gpu {

namespace {

// The bytes of col buffer one chunk of images may take.
constexpr int64_t kColBytes = int64_t(256) << 20;

struct Geometry {
  int64_t n, cin, h, w, cout, oh, ow, kh, kw, groups, cin_g, cout_g;
  int64_t xs[4];  // input strides
  int64_t x_offset;
  int64_t sh, sw, ph, pw, dh, dw;
};

Geometry geometry(const Layout& x, const Shape& k, const Shape& out, const ConvParams& p) {
  Geometry g{};
  g.n = x.dim(0), g.cin = x.dim(1), g.h = x.dim(2), g.w = x.dim(3);
  g.cout = out[1], g.oh = out[2], g.ow = out[3], g.kh = k[2], g.kw = k[3], g.groups = p.groups;
  g.cin_g = g.cin / g.groups, g.cout_g = g.cout / g.groups;
  for (int d = 0; d < 4; ++d) g.xs[d] = x.stride(d);
  g.x_offset = x.offset();
  g.sh = p.stride[0], g.sw = p.stride[1], g.ph = p.padding[0], g.pw = p.padding[1];
  g.dh = p.dilation[0], g.dw = p.dilation[1];
  return g;
}

// col[n - n0, grp, (c, i, j), (y, x)] = x[n, grp * cin_g + c, y sh - ph + i dh, x sw - pw + j dw].
template <typename T>
__global__ __launch_bounds__(kBlock) void im2col_kernel(const T* x, T* col, Geometry g, int64_t n0, int64_t count) {
  const int64_t hw = g.oh * g.ow, kdim = g.cin_g * g.kh * g.kw;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < count; e += step) {
    const int64_t pos = e % hw, row = e / hw % kdim, ng = e / (hw * kdim);
    const int64_t n = n0 + ng / g.groups, grp = ng % g.groups;
    const int64_t c = row / (g.kh * g.kw), i = row / g.kw % g.kh, j = row % g.kw;
    const int64_t iy = pos / g.ow * g.sh - g.ph + i * g.dh, ix = pos % g.ow * g.sw - g.pw + j * g.dw;
    T v{};
    if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w)
      v = x[g.x_offset + n * g.xs[0] + (grp * g.cin_g + c) * g.xs[1] + iy * g.xs[2] + ix * g.xs[3]];
    col[e] = v;
  }
}

// out[n, co, y, x] = sum over taps (i, j) reaching it of col[n - n0, grp, (c, i, j), (iy, ix)].
template <typename T>
__global__ __launch_bounds__(kBlock) void col2im_kernel(const T* col, T* out, Geometry g, int64_t n0, int64_t count) {
  using M = kernels::opmath_t<T>;
  const int64_t hw_in = g.h * g.w, kdim = g.cout_g * g.kh * g.kw;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < count; e += step) {
    const int64_t ox = e % g.ow, oy = e / g.ow % g.oh, co = e / (g.ow * g.oh) % g.cout, nl = e / (g.ow * g.oh * g.cout);
    const int64_t grp = co / g.cout_g, c = co % g.cout_g;
    const T* base = col + (nl * g.groups + grp) * kdim * hw_in;
    M acc = M(0);
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t ty = oy + g.ph - i * g.dh;
      if (ty < 0 || ty % g.sh != 0 || ty / g.sh >= g.h) continue;
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t tx = ox + g.pw - j * g.dw;
        if (tx < 0 || tx % g.sw != 0 || tx / g.sw >= g.w) continue;
        acc += kernels::to_opmath(base[((c * g.kh + i) * g.kw + j) * hw_in + ty / g.sh * g.w + tx / g.sw]);
      }
    }
    out[(n0 * g.cout) * g.oh * g.ow + e] = kernels::from_opmath<T>(acc);
  }
}

// A contiguous copy of v (itself when it already is one).
StoragePtr dense(GpuBackend& b, const View& v, Layout* layout) {
  if (v.layout.is_contiguous() && v.layout.offset() == 0) {
    *layout = v.layout;
    return nullptr;
  }
  *layout = Layout(v.layout.shape());
  StoragePtr s = b.alloc(v.dtype, v.layout.numel());
  b.copy_strided(v, MutView{*s, *layout, v.dtype});
  return s;
}

}  // namespace

StoragePtr conv_gemm(GpuBackend& b, const View& x, const View& k, const ConvParams& p, bool transposed,
                     const Shape& out_shape) {
  const DType dt = x.dtype;
  StoragePtr out = b.alloc(dt, out_shape.numel());
  if (out_shape.numel() == 0) return out;
  Layout kl, xl;
  StoragePtr kd = dense(b, k, &kl);
  StoragePtr xd = transposed ? dense(b, x, &xl) : nullptr;  // the transposed form reads x as a GEMM operand
  const Storage& ks = kd ? *kd : k.storage;
  const Storage& xs = xd ? *xd : x.storage;
  const Layout& x_layout = transposed ? xl : x.layout;
  const Geometry g = geometry(x_layout, k.layout.shape(), out_shape, p);
  const size_t size = static_cast<size_t>(dtype_size(dt));
  const int64_t in_hw = g.h * g.w, out_hw = g.oh * g.ow;
  const int64_t kdim = (transposed ? g.cout_g : g.cin_g) * g.kh * g.kw;
  // The im2col buffer multiplies dims of the kernel and of the output: checked (1d ops run as 2d).
  const char* name = transposed ? "conv_transpose2d" : "conv2d";
  const int64_t col_per_image = checked::mul(checked::mul(g.groups, kdim, name, " (im2col rows)"),
                                             transposed ? in_hw : out_hw, name, " (im2col buffer)");
  const int64_t col_bytes = checked::mul(col_per_image, static_cast<int64_t>(size), name, " (im2col buffer)");
  const int64_t chunk = std::clamp<int64_t>(kColBytes / std::max<int64_t>(col_bytes, 1), 1, g.n);
  StoragePtr col = b.alloc(dt, chunk * col_per_image);
  const char* kp = static_cast<const char*>(ks.data());
  const char* xp = static_cast<const char*>(xs.data());
  char* op = static_cast<char*>(out->data());
  dispatch(dt, [&]<typename T>() {
    for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
      const int64_t nc = std::min(chunk, g.n - n0);
      if (!transposed) {
        const int64_t count = nc * col_per_image;
        im2col_kernel<T>
            <<<grid_for(count), kBlock, 0, b.stream()>>>(static_cast<const T*>(xs.data()), col->as<T>(), g, n0, count);
        WICK_GPU_CHECK_LAUNCH();
        for (int64_t grp = 0; grp < g.groups; ++grp) {
          // out[n, grp] (cout_g x out_hw) = W_grp (cout_g x kdim) . col[n, grp] (kdim x out_hw)
          gemm(b, Gemm{dt, g.cout_g, out_hw, kdim, nc, kp + grp * g.cout_g * kdim * size, false, kdim, 0,
                       col->as<char>() + grp * kdim * out_hw * size, false, out_hw, g.groups * kdim * out_hw,
                       op + ((n0 * g.cout) + grp * g.cout_g) * out_hw * size, out_hw, g.cout * out_hw});
        }
      } else {
        for (int64_t grp = 0; grp < g.groups; ++grp) {
          // col[n, grp] (kdim x in_hw) = W_grp^T (kdim x cin_g) . x[n, grp] (cin_g x in_hw)
          gemm(b, Gemm{dt, kdim, in_hw, g.cin_g, nc, kp + grp * g.cin_g * kdim * size, true, kdim, 0,
                       xp + ((n0 * g.cin) + grp * g.cin_g) * in_hw * size, false, in_hw, g.cin * in_hw,
                       col->as<char>() + grp * kdim * in_hw * size, in_hw, g.groups * kdim * in_hw});
        }
        const int64_t count = nc * g.cout * out_hw;
        col2im_kernel<T><<<grid_for(count), kBlock, 0, b.stream()>>>(col->as<T>(), out->as<T>(), g, n0, count);
        WICK_GPU_CHECK_LAUNCH();
      }
    }
  });
  return out;
}

}  // namespace wick::gpu
