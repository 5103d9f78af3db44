// rms_norm over the last dim: each group sums its row's squares, combines them, then writes; rows
// held in registers where rows.cuh takes them, else read twice.
#include "core/dispatch.h"
#include "gpu/nn/nn_kernels.h"
#include "gpu/nn/rows.cuh"
#include "gpu/nn/slices.cuh"
#include "kernels/nn.h"

namespace wick::gpu {

namespace {

template <typename T, int G, typename I>
__global__ __launch_bounds__(kBlock) void rms_norm_kernel(nn::Slices<I> s, const T* x, const T* w, int64_t w_stride,
                                                          kernels::opmath_t<T> eps, T* out) {
  using M = kernels::opmath_t<T>;
  for (I g = nn::first_slice<G, I>(); g < s.count; g += nn::slice_step<G, I>()) {
    I off[2];
    offsets_at(s.starts, g, off);
    const T* in = x + off[1];
    M squares = 0;
    for (I i = nn::lane<G>(); i < s.len; i += G) {
      const M v = kernels::to_opmath(in[i * s.x_stride]);
      squares += v * v;
    }
    squares = nn::group_all<G>(squares, nn::ShuffleValue{}, [](M a, M b) { return a + b; });
    const M scale = kernels::rms_scale(squares, static_cast<int64_t>(s.len), eps);
    T* o = out + off[0];
    for (I i = nn::lane<G>(); i < s.len; i += G) {
      o[i * s.out_stride] = kernels::from_opmath<T>(kernels::rms_norm_value(
          kernels::to_opmath(in[i * s.x_stride]), scale, kernels::to_opmath(w[static_cast<int64_t>(i) * w_stride])));
    }
  }
}

template <typename T, int G, int N>
__global__ __launch_bounds__(nn::kRowBlock<G>) void rms_norm_rows_kernel(nn::RowPlan r, const T* x, const T* w,
                                                                         kernels::opmath_t<T> eps, T* out) {
  using M = kernels::opmath_t<T>;
  for (int64_t row = nn::first_row<G>(); row < r.rows; row += nn::row_step<G>()) {
    nn::RowPacks<T, G, N> held;
    held.load(x + row * r.len, static_cast<int>(r.len));
    M squares = 0;
    held.each([&](M v, int) { squares += v * v; });
    squares = nn::group_all<G>(squares, nn::ShuffleValue{}, [](M a, M b) { return a + b; });
    const M scale = kernels::rms_scale(squares, r.len, eps);
    held.store(out + row * r.len, [&](M v, M weight) { return kernels::rms_norm_value(v, scale, weight); }, w);
  }
}

}  // namespace

StoragePtr GpuNnKernels::rms_norm(const View& x, const View& weight, double eps) const {
  GpuBackend& b = backend_;
  b.activate();
  StoragePtr out = b.alloc(x.dtype, x.layout.numel());
  const nn::SlicePlan plan = nn::plan_slices(x, x.layout.rank() - 1);
  if (plan.count == 0 || plan.len == 0) return out;
  dispatch(x.dtype, [&]<typename T>() {
    if constexpr (kernels::is_float_v<T>) {
      using M = kernels::opmath_t<T>;
      const T* px = static_cast<const T*>(x.storage.data());
      const T* pw = static_cast<const T*>(weight.storage.data()) + weight.layout.offset();
      T* po = out->as<T>();
      if constexpr (!std::is_same_v<T, double>) {
        if (const std::optional<nn::RowPlan> rows = nn::plan_rows(x); rows && nn::dense_param(weight)) {
          nn::launch_rows(*rows, [&]<int G, int N>(unsigned grid, int block) {
            rms_norm_rows_kernel<T, G, N>
                <<<grid, block, 0, b.stream()>>>(*rows, px + x.layout.offset(), pw, static_cast<M>(eps), po);
          });
          return;
        }
      }
      nn::launch_slices(plan, [&]<int G, typename I>(unsigned grid, const nn::Slices<I>& s) {
        rms_norm_kernel<T, G, I><<<grid, kBlock, 0, b.stream()>>>(s, px, pw, weight.layout.stride(0),
                                                                   static_cast<M>(eps), po);
      });
    } else {
      throw_not_supported(b, NnOp::RmsNorm, x.dtype);
    }
  });
  return out;
}

}  // namespace wick::gpu
