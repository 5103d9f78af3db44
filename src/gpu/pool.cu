// Pooling and upsampling: one thread per output element, reading the input through its strides.
#include <vector>

#include "core/dispatch.h"
#include "gpu/elementwise.cuh"
#include "gpu/gpu_backend.h"
#include "kernels/binary.h"

namespace wick::gpu {

namespace {

// A 4-d input and its contiguous output of shape (n, c, oh, ow), indexed with I: 32 bits when
// every offset and the output's size fit, 64 otherwise.
template <typename I>
struct Planes {
  I c, oh, ow;
  I stride[4];
  I offset;
  I n;  // output elements
};

template <typename I>
Planes<I> planes(const Layout& x, int64_t oh, int64_t ow, int64_t n) {
  return {static_cast<I>(x.dim(1)),
          static_cast<I>(oh),
          static_cast<I>(ow),
          {static_cast<I>(x.stride(0)), static_cast<I>(x.stride(1)), static_cast<I>(x.stride(2)),
           static_cast<I>(x.stride(3))},
          static_cast<I>(x.offset()),
          static_cast<I>(n)};
}

// Calls f.template operator()<I>() with the narrowest index type for input x and n outputs.
template <typename F>
void with_index_type(const Layout& x, int64_t n, F&& f) {
  if (x.extent() < (int64_t(1) << 31) && n < (int64_t(1) << 31))
    f.template operator()<uint32_t>();
  else
    f.template operator()<uint64_t>();
}

// Output element i as (plane offset of the input, y, x).
template <typename I>
__device__ inline I plane_of(const Planes<I>& p, I i, I* y, I* x) {
  *x = i % p.ow;
  *y = i / p.ow % p.oh;
  const I nc = i / (p.ow * p.oh);
  return p.offset + nc / p.c * p.stride[0] + nc % p.c * p.stride[1];
}

template <bool kMax, typename T, typename I>
__global__ __launch_bounds__(kBlock) void pool_kernel(const T* x, T* out, Planes<I> p, PoolParams q) {
  using M = kernels::opmath_t<T>;
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  const I kh = static_cast<I>(q.kernel[0]), kw = static_cast<I>(q.kernel[1]);
  const I sy = static_cast<I>(q.stride[0]) * p.stride[2], sx = static_cast<I>(q.stride[1]) * p.stride[3];
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.n; i += step) {
    I y, xx;
    const T* win = x + plane_of(p, i, &y, &xx) + y * sy + xx * sx;
    M acc = kMax ? kernels::to_opmath(win[0]) : M(0);
    for (I a = 0; a < kh; ++a) {
      for (I b = 0; b < kw; ++b) {
        const M v = kernels::to_opmath(win[a * p.stride[2] + b * p.stride[3]]);
        if constexpr (kMax)
          acc = kernels::Binary<BinaryOp::Maximum>{}(acc, v);
        else
          acc += v;
      }
    }
    if constexpr (!kMax) acc = acc / static_cast<M>(kh * kw);
    out[i] = kernels::from_opmath<T>(acc);
  }
}

template <typename T, typename I>
__global__ __launch_bounds__(kBlock) void nearest_kernel(const T* x, T* out, Planes<I> p, int64_t in_h, int64_t in_w) {
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.n; i += step) {
    I y, xx;
    const I base = plane_of(p, i, &y, &xx);
    out[i] = x[base + static_cast<I>(nearest_source(in_h, p.oh, y)) * p.stride[2] +
               static_cast<I>(nearest_source(in_w, p.ow, xx)) * p.stride[3]];
  }
}

template <typename T, typename I>
__global__ __launch_bounds__(kBlock) void bilinear_kernel(const T* x, T* out, Planes<I> p, int64_t in_h, int64_t in_w,
                                                          BilinearParams q) {
  using M = kernels::opmath_t<T>;
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.n; i += step) {
    I y, xx;
    const T* plane = x + plane_of(p, i, &y, &xx);
    const double sy = bilinear_source(in_h, p.oh, q.align_corners, q.scale_h, y);
    const double sx = bilinear_source(in_w, p.ow, q.align_corners, q.scale_w, xx);
    const int64_t y0 = static_cast<int64_t>(sy), x0 = static_cast<int64_t>(sx);
    const int64_t y1 = y0 < in_h - 1 ? y0 + 1 : y0, x1 = x0 < in_w - 1 ? x0 + 1 : x0;
    const M h1 = static_cast<M>(sy - static_cast<double>(y0)), h0 = M(1) - h1;
    const M w1 = static_cast<M>(sx - static_cast<double>(x0)), w0 = M(1) - w1;
    auto v = [&](int64_t a, int64_t b) {
      return kernels::to_opmath(plane[static_cast<I>(a) * p.stride[2] + static_cast<I>(b) * p.stride[3]]);
    };
    out[i] = kernels::from_opmath<T>(h0 * (w0 * v(y0, x0) + w1 * v(y0, x1)) + h1 * (w0 * v(y1, x0) + w1 * v(y1, x1)));
  }
}

template <bool kMax>
StoragePtr pool(GpuBackend& b, const View& x, const PoolParams& q) {
  b.activate();
  const Shape out_shape = pool_output_shape(x.layout.shape(), q);
  StoragePtr out = b.alloc(x.dtype, out_shape.numel());
  const int64_t n = out_shape.numel();
  if (n == 0) return out;
  dispatch(x.dtype, [&]<typename T>() {
    if constexpr (kMax || kernels::is_float_v<T>) {
      with_index_type(x.layout, n, [&]<typename I>() {
        pool_kernel<kMax, T, I>
            <<<grid_for(n), kBlock, 0, b.stream()>>>(static_cast<const T*>(x.storage.data()), out->as<T>(),
                                                     planes<I>(x.layout, out_shape[2], out_shape[3], n), q);
        WICK_GPU_CHECK_LAUNCH();
      });
    } else {
      throw_not_supported(b, OpCode::AvgPool2d, x.dtype);
    }
  });
  return out;
}

StoragePtr nearest(GpuBackend& b, const View& x, int64_t out_h, int64_t out_w, bool one_d) {
  b.activate();
  const Layout l = one_d ? x.layout.unsqueeze(2) : x.layout;
  Shape out_shape = l.shape();
  out_shape[2] = out_h;
  out_shape[3] = out_w;
  StoragePtr out = b.alloc(x.dtype, out_shape.numel());
  const int64_t n = out_shape.numel();
  if (n == 0) return out;
  dispatch(x.dtype, [&]<typename T>() {
    with_index_type(l, n, [&]<typename I>() {
      nearest_kernel<T, I><<<grid_for(n), kBlock, 0, b.stream()>>>(
          static_cast<const T*>(x.storage.data()), out->as<T>(), planes<I>(l, out_h, out_w, n), l.dim(2), l.dim(3));
      WICK_GPU_CHECK_LAUNCH();
    });
  });
  return out;
}

}  // namespace

StoragePtr GpuBackend::avg_pool2d(const View& x, const PoolParams& p) { return pool<false>(*this, x, p); }
StoragePtr GpuBackend::max_pool2d(const View& x, const PoolParams& p) { return pool<true>(*this, x, p); }

StoragePtr GpuBackend::upsample_nearest1d(const View& x, int64_t out_l) { return nearest(*this, x, 1, out_l, true); }

StoragePtr GpuBackend::upsample_nearest2d(const View& x, int64_t out_h, int64_t out_w) {
  return nearest(*this, x, out_h, out_w, false);
}

StoragePtr GpuBackend::upsample_bilinear2d(const View& x, const BilinearParams& q) {
  activate();
  Shape out_shape = x.layout.shape();
  out_shape[2] = q.out_h;
  out_shape[3] = q.out_w;
  StoragePtr out = alloc(x.dtype, out_shape.numel());
  const int64_t n = out_shape.numel();
  if (n == 0) return out;
  dispatch(x.dtype, [&]<typename T>() {
    if constexpr (kernels::is_float_v<T>) {
      with_index_type(x.layout, n, [&]<typename I>() {
        bilinear_kernel<T, I><<<grid_for(n), kBlock, 0, stream_>>>(
            static_cast<const T*>(x.storage.data()), out->as<T>(), planes<I>(x.layout, q.out_h, q.out_w, n),
            x.layout.dim(2), x.layout.dim(3), q);
        WICK_GPU_CHECK_LAUNCH();
      });
    } else {
      throw_not_supported(*this, OpCode::UpsampleBilinear2d, x.dtype);
    }
  });
  return out;
}

}  // namespace wick::gpu
