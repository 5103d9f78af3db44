// Pooling and upsampling: direct loops over the output, one (n, c) plane per task, reading the
// input through its strides.
#include <vector>

#include "core/dispatch.h"
#include "cpu/cpu_backend.h"
#include "cpu/parallel.h"
#include "kernels/binary.h"
#include "kernels/numeric.h"

namespace wick::cpu {

namespace {

// Calls f(in_plane, out_plane) for every (n, c) plane of a 4-d x, in parallel; in_plane points at
// element (n, c, 0, 0) of x and out_plane at the contiguous output plane of plane_size elements.
template <typename T, typename F>
void for_each_plane(const View& x, T* out, int64_t plane_size, const F& f) {
  const Layout& l = x.layout;
  const T* in = static_cast<const T*>(x.storage.data()) + l.offset();
  const int64_t planes = l.dim(0) * l.dim(1);
  parallel_for(planes, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(plane_size, 1)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t pl = begin; pl < end; ++pl) {
                   const int64_t n = pl / l.dim(1), c = pl % l.dim(1);
                   f(in + n * l.stride(0) + c * l.stride(1), out + pl * plane_size);
                 }
               });
}

template <bool kMax>
StoragePtr pool(Backend& b, const View& x, const PoolParams& p) {
  const Shape out_shape = pool_output_shape(x.layout.shape(), p);
  StoragePtr out = b.alloc(x.dtype, out_shape.numel());
  if (out_shape.numel() == 0) return out;
  const int64_t oh = out_shape[2], ow = out_shape[3], sh = x.layout.stride(2), sw = x.layout.stride(3);
  dispatch(x.dtype, [&]<typename T>() {
    using M = kernels::opmath_t<T>;
    if constexpr (kMax || kernels::is_float_v<T>) {
      for_each_plane<T>(x, out->as<T>(), oh * ow, [&](const T* in, T* o) {
        for (int64_t y = 0; y < oh; ++y) {
          for (int64_t xx = 0; xx < ow; ++xx) {
            const T* win = in + y * p.stride[0] * sh + xx * p.stride[1] * sw;
            M acc = kMax ? kernels::to_opmath(win[0]) : M(0);
            for (int64_t i = 0; i < p.kernel[0]; ++i) {
              for (int64_t j = 0; j < p.kernel[1]; ++j) {
                M v = kernels::to_opmath(win[i * sh + j * sw]);
                if constexpr (kMax)
                  acc = kernels::Binary<BinaryOp::Maximum>{}(acc, v);
                else
                  acc += v;
              }
            }
            if constexpr (!kMax) acc = acc / static_cast<M>(p.kernel[0] * p.kernel[1]);
            o[y * ow + xx] = kernels::from_opmath<T>(acc);
          }
        }
      });
    } else {
      throw_not_supported(b, OpCode::AvgPool2d, x.dtype);
    }
  });
  return out;
}

// Nearest source index for each output index of an axis.
std::vector<int64_t> nearest_table(int64_t in, int64_t out) {
  std::vector<int64_t> t(static_cast<size_t>(out));
  for (int64_t i = 0; i < out; ++i) t[static_cast<size_t>(i)] = nearest_source(in, out, i);
  return t;
}

// x as 4-d (a height of 1 for the 1d op): out[y, x] = in[ty[y], tx[x]].
StoragePtr nearest(Backend& b, const View& x, int64_t out_h, int64_t out_w, bool one_d) {
  const Layout l = one_d ? x.layout.unsqueeze(2) : x.layout;
  Shape out_shape = l.shape();
  out_shape[2] = out_h;
  out_shape[3] = out_w;
  StoragePtr out = b.alloc(x.dtype, out_shape.numel());
  if (out_shape.numel() == 0) return out;
  const std::vector<int64_t> ty = nearest_table(l.dim(2), out_h), tx = nearest_table(l.dim(3), out_w);
  dispatch(x.dtype, [&]<typename T>() {
    const int64_t sh = l.stride(2), sw = l.stride(3);
    for_each_plane<T>(View{x.storage, l, x.dtype}, out->as<T>(), out_h * out_w, [&](const T* in, T* o) {
      for (int64_t y = 0; y < out_h; ++y)
        for (int64_t xx = 0; xx < out_w; ++xx)
          o[y * out_w + xx] = in[ty[static_cast<size_t>(y)] * sh + tx[static_cast<size_t>(xx)] * sw];
    });
  });
  return out;
}

// Bilinear taps of one axis: the lower source index, the step to the upper one (0 at the edge)
// and the weight of the upper one.
struct Taps {
  std::vector<int64_t> lo, step;
  std::vector<double> frac;
};

Taps bilinear_taps(int64_t in, int64_t out, bool align_corners, double scale) {
  Taps t;
  for (int64_t i = 0; i < out; ++i) {
    double src = bilinear_source(in, out, align_corners, scale, i);
    int64_t lo = static_cast<int64_t>(src);
    t.lo.push_back(lo);
    t.step.push_back(lo < in - 1 ? 1 : 0);
    t.frac.push_back(src - static_cast<double>(lo));
  }
  return t;
}

}  // namespace

StoragePtr CpuBackend::avg_pool2d(const View& x, const PoolParams& p) { return pool<false>(*this, x, p); }
StoragePtr CpuBackend::max_pool2d(const View& x, const PoolParams& p) { return pool<true>(*this, x, p); }

StoragePtr CpuBackend::upsample_nearest1d(const View& x, int64_t out_l) { return nearest(*this, x, 1, out_l, true); }

StoragePtr CpuBackend::upsample_nearest2d(const View& x, int64_t out_h, int64_t out_w) {
  return nearest(*this, x, out_h, out_w, false);
}

StoragePtr CpuBackend::upsample_bilinear2d(const View& x, const BilinearParams& p) {
  Shape out_shape = x.layout.shape();
  out_shape[2] = p.out_h;
  out_shape[3] = p.out_w;
  StoragePtr out = alloc(x.dtype, out_shape.numel());
  if (out_shape.numel() == 0) return out;
  const Taps ty = bilinear_taps(x.layout.dim(2), p.out_h, p.align_corners, p.scale_h);
  const Taps tx = bilinear_taps(x.layout.dim(3), p.out_w, p.align_corners, p.scale_w);
  const int64_t sh = x.layout.stride(2), sw = x.layout.stride(3);
  dispatch(x.dtype, [&]<typename T>() {
    using M = kernels::opmath_t<T>;
    if constexpr (kernels::is_float_v<T>) {
      for_each_plane<T>(x, out->as<T>(), p.out_h * p.out_w, [&](const T* in, T* o) {
        for (int64_t y = 0; y < p.out_h; ++y) {
          const size_t yi = static_cast<size_t>(y);
          const M h1 = static_cast<M>(ty.frac[yi]), h0 = M(1) - h1;
          const T* r0 = in + ty.lo[yi] * sh;
          const T* r1 = r0 + ty.step[yi] * sh;
          for (int64_t xx = 0; xx < p.out_w; ++xx) {
            const size_t xi = static_cast<size_t>(xx);
            const M w1 = static_cast<M>(tx.frac[xi]), w0 = M(1) - w1;
            const int64_t c0 = tx.lo[xi] * sw, c1 = c0 + tx.step[xi] * sw;
            auto v = [](const T* q) { return kernels::to_opmath(*q); };
            o[y * p.out_w + xx] = kernels::from_opmath<T>(h0 * (w0 * v(r0 + c0) + w1 * v(r0 + c1)) +
                                                          h1 * (w0 * v(r1 + c0) + w1 * v(r1 + c1)));
          }
        }
      });
    } else {
      throw_not_supported(*this, OpCode::UpsampleBilinear2d, x.dtype);
    }
  });
  return out;
}

}  // namespace wick::cpu
