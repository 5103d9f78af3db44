// layer_norm over the last dim: each group finds its row's mean, then the sum of squared
// deviations from it (two combines over the group), then writes; rows held in registers where
// rows.cuh takes them, else read three times.
#include "core/dispatch.h"
#include "gpu/nn/nn_kernels.h"
#include "gpu/nn/rows.cuh"
#include "gpu/nn/slices.cuh"
#include "kernels/nn.h"

namespace wick::gpu {

namespace {

template <typename T>
struct Affine {
  const T* w;
  int64_t w_stride;
  const T* b;  // null: no bias
  int64_t b_stride;
};

template <typename T, int G, typename I>
__global__ __launch_bounds__(kBlock) void layer_norm_kernel(nn::Slices<I> s, const T* x, Affine<T> a,
                                                            kernels::opmath_t<T> eps, T* out) {
  using M = kernels::opmath_t<T>;
  const auto add = [](M p, M q) { return p + q; };
  for (I g = nn::first_slice<G, I>(); g < s.count; g += nn::slice_step<G, I>()) {
    I off[2];
    offsets_at(s.starts, g, off);
    const T* in = x + off[1];
    M sum = 0;
    for (I i = nn::lane<G>(); i < s.len; i += G) sum += kernels::to_opmath(in[i * s.x_stride]);
    const M mean = nn::group_all<G>(sum, nn::ShuffleValue{}, add) / static_cast<M>(s.len);
    M deviations = 0;
    for (I i = nn::lane<G>(); i < s.len; i += G) {
      const M d = kernels::to_opmath(in[i * s.x_stride]) - mean;
      deviations += d * d;
    }
    deviations = nn::group_all<G>(deviations, nn::ShuffleValue{}, add);
    const M scale = kernels::rms_scale(deviations, static_cast<int64_t>(s.len), eps);
    T* o = out + off[0];
    for (I i = nn::lane<G>(); i < s.len; i += G) {
      const int64_t j = static_cast<int64_t>(i);
      const M bias = a.b ? kernels::to_opmath(a.b[j * a.b_stride]) : M(0);
      o[i * s.out_stride] = kernels::from_opmath<T>(kernels::layer_norm_value(
          kernels::to_opmath(in[i * s.x_stride]), mean, scale, kernels::to_opmath(a.w[j * a.w_stride]), bias));
    }
  }
}

template <typename T, int G, int N>
__global__ __launch_bounds__(nn::kRowBlock<G>) void layer_norm_rows_kernel(nn::RowPlan r, const T* x, Affine<T> a,
                                                                           kernels::opmath_t<T> eps, T* out) {
  using M = kernels::opmath_t<T>;
  const auto add = [](M p, M q) { return p + q; };
  for (int64_t row = nn::first_row<G>(); row < r.rows; row += nn::row_step<G>()) {
    nn::RowPacks<T, G, N> held;
    held.load(x + row * r.len, static_cast<int>(r.len));
    M sum = 0;
    held.each([&](M v, int) { sum += v; });
    const M mean = nn::group_all<G>(sum, nn::ShuffleValue{}, add) / static_cast<M>(r.len);
    M deviations = 0;
    held.each([&](M v, int) { deviations += (v - mean) * (v - mean); });
    const M scale = kernels::rms_scale(nn::group_all<G>(deviations, nn::ShuffleValue{}, add), r.len, eps);
    T* o = out + row * r.len;
    if (a.b) {
      held.store(o, [&](M v, M w, M b) { return kernels::layer_norm_value(v, mean, scale, w, b); }, a.w, a.b);
    } else {
      held.store(o, [&](M v, M w) { return kernels::layer_norm_value(v, mean, scale, w, M(0)); }, a.w);
    }
  }
}

}  // namespace

StoragePtr GpuNnKernels::layer_norm(const View& x, const View& weight, const View* bias, double eps) const {
  GpuBackend& b = backend_;
  b.activate();
  StoragePtr out = b.alloc(x.dtype, x.layout.numel());
  const nn::SlicePlan plan = nn::plan_slices(x, x.layout.rank() - 1);
  if (plan.count == 0 || plan.len == 0) return out;
  dispatch(x.dtype, [&]<typename T>() {
    if constexpr (kernels::is_float_v<T>) {
      using M = kernels::opmath_t<T>;
      const Affine<T> a{static_cast<const T*>(weight.storage.data()) + weight.layout.offset(), weight.layout.stride(0),
                        bias ? static_cast<const T*>(bias->storage.data()) + bias->layout.offset() : nullptr,
                        bias ? bias->layout.stride(0) : 0};
      const T* px = static_cast<const T*>(x.storage.data());
      T* po = out->as<T>();
      if constexpr (!std::is_same_v<T, double>) {
        const std::optional<nn::RowPlan> rows = nn::plan_rows(x);
        if (rows && nn::dense_param(weight) && (!bias || nn::dense_param(*bias))) {
          nn::launch_rows(*rows, [&]<int G, int N>(unsigned grid, int block) {
            layer_norm_rows_kernel<T, G, N>
                <<<grid, block, 0, b.stream()>>>(*rows, px + x.layout.offset(), a, static_cast<M>(eps), po);
          });
          return;
        }
      }
      nn::launch_slices(plan, [&]<int G, typename I>(unsigned grid, const nn::Slices<I>& s) {
        layer_norm_kernel<T, G, I><<<grid, kBlock, 0, b.stream()>>>(s, px, a, static_cast<M>(eps), po);
      });
    } else {
      throw_not_supported(b, NnOp::LayerNorm, x.dtype);
    }
  });
  return out;
}

}  // namespace wick::gpu
