// rms_norm over the last dim: each group sums its row's squares, combines them, then writes; rows
// held in registers where rows.cuh takes them, else read twice. A weight of (m, d) gives row r of x
// its row r % m (WeightRows). add_rms_norm: where x and the residual are both such rows, one kernel
// adds them, writes the sum and normalises it from the registers; else the backend's add, then
// rms_norm of the sum.
#include "core/dispatch.h"
#include "gpu/nn/nn_kernels.h"
#include "gpu/nn/rows.cuh"
#include "gpu/nn/slices.cuh"
#include "kernels/nn.h"

namespace wick::gpu {

namespace {

// A norm's weight as rows: (d), one row, or (m, d), row r of x taking row r % m, `stride` apart.
struct WeightRows {
  int64_t m, stride;
  __device__ int64_t offset(int64_t row) const { return m == 1 ? 0 : row % m * stride; }
};

WeightRows weight_rows(const View& weight) {
  if (weight.layout.rank() != 2 || weight.layout.dim(0) == 1) return {1, 0};
  return {weight.layout.dim(0), weight.layout.stride(0)};
}

template <typename T, int G, typename I>
__global__ __launch_bounds__(kBlock) void rms_norm_kernel(nn::Slices<I> s, const T* x, const T* weight, WeightRows wr,
                                                          int64_t w_stride, kernels::opmath_t<T> eps, T* out) {
  using M = kernels::opmath_t<T>;
  start_after_inputs();
  for (I g = nn::first_slice<G, I>(); g < s.count; g += nn::slice_step<G, I>()) {
    I off[2];
    offsets_at(s.starts, g, off);
    const T* in = x + off[1];
    // The output is dense: the slice at off[0] is row off[0] / len of x's rows.
    const T* w = weight + wr.offset(static_cast<int64_t>(off[0] / s.len));
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

// A held row normalised by `scale` and the weight: held already where the block has room for it
// (nn::kWeightHeld), else read beside the stores.
template <int G, int N, typename T>
__device__ void store_normed(const nn::RowPacks<T, G, N>& held, const nn::RowPacks<T, G, N>& weight, const T* w,
                             kernels::opmath_t<T> scale, T* out) {
  using M = kernels::opmath_t<T>;
  auto normed = [&](M v, M wv) { return kernels::rms_norm_value(v, scale, wv); };
  if constexpr (nn::kWeightHeld<G, N>)
    held.store_held(out, normed, weight);
  else
    held.store(out, normed, w);
}

template <typename T, int G, int N>
__global__ __launch_bounds__(nn::kRowBlock<G>) void rms_norm_rows_kernel(nn::RowPlan r, const T* x, const T* weights,
                                                                         WeightRows wr, kernels::opmath_t<T> eps,
                                                                         T* out) {
  using M = kernels::opmath_t<T>;
  start_after_inputs();
  for (int64_t row = nn::first_row<G>(); row < r.rows; row += nn::row_step<G>()) {
    const T* w = weights + wr.offset(row);
    nn::RowPacks<T, G, N> held, weight;
    held.load(x + row * r.len, static_cast<int>(r.len));
    if constexpr (nn::kWeightHeld<G, N>) weight.load(w, static_cast<int>(r.len));
    M squares = 0;
    held.each([&](M v, int) { squares += v * v; });
    squares = nn::group_all<G>(squares, nn::ShuffleValue{}, [](M a, M b) { return a + b; });
    const M scale = kernels::rms_scale(squares, r.len, eps);
    store_normed<G, N>(held, weight, w, scale, out + row * r.len);
  }
}

// rms_norm_rows_kernel with the residual added first: the sum, rounded to T, is written and then
// normalised as rms_norm_rows_kernel normalises a row, so that the two give the same bits.
template <typename T, int G, int N>
__global__ __launch_bounds__(nn::kRowBlock<G>) void add_rms_norm_rows_kernel(nn::RowPlan r, const T* x,
                                                                             const T* residual, const T* w,
                                                                             kernels::opmath_t<T> eps, T* sum, T* out) {
  using M = kernels::opmath_t<T>;
  using Held = nn::RowPacks<T, G, N>;
  start_after_inputs();
  for (int64_t row = nn::first_row<G>(); row < r.rows; row += nn::row_step<G>()) {
    Held held, added, weight;
    held.load(x + row * r.len, static_cast<int>(r.len));
    added.load(residual + row * r.len, static_cast<int>(r.len));
    if constexpr (nn::kWeightHeld<G, N>) weight.load(w, static_cast<int>(r.len));
#pragma unroll
    for (int k = 0; k < N; ++k) {
      if (!Held::held(k, held.count)) continue;
#pragma unroll
      for (int j = 0; j < Held::V; ++j)
        held.p[k].v[j] =
            kernels::from_opmath<T>(kernels::to_opmath(held.p[k].v[j]) + kernels::to_opmath(added.p[k].v[j]));
    }
    held.store(sum + row * r.len, [](M v) { return v; });
    M squares = 0;
    held.each([&](M v, int) { squares += v * v; });
    squares = nn::group_all<G>(squares, nn::ShuffleValue{}, [](M a, M b) { return a + b; });
    const M scale = kernels::rms_scale(squares, r.len, eps);
    store_normed<G, N>(held, weight, w, scale, out + row * r.len);
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
      const WeightRows wr = weight_rows(weight);
      T* po = out->as<T>();
      if constexpr (!std::is_same_v<T, double>) {
        // A weight of rows read pack by pack: each row dense and 16-byte aligned.
        const bool packed = weight.layout.rank() == 1
                                ? nn::dense_param(weight)
                                : (weight.layout.stride(1) == 1 || weight.layout.dim(1) == 1) &&
                                      (wr.stride * dtype_size(weight.dtype)) % 16 == 0 && aligned(pw, 16);
        if (const std::optional<nn::RowPlan> rows = nn::plan_rows(x); rows && packed) {
          nn::launch_rows(*rows, [&]<int G, int N>(unsigned grid, int block) {
            b.launch_early(rms_norm_rows_kernel<T, G, N>, grid, block, 0, *rows, px + x.layout.offset(), pw, wr,
                           static_cast<M>(eps), po);
          });
          return;
        }
      }
      nn::launch_slices(plan, [&]<int G, typename I>(unsigned grid, const nn::Slices<I>& s) {
        b.launch_early(rms_norm_kernel<T, G, I>, grid, kBlock, 0, s, px, pw, wr,
                       weight.layout.stride(weight.layout.rank() - 1), static_cast<M>(eps), po);
      });
    } else {
      throw_not_supported(b, NnOp::RmsNorm, x.dtype);
    }
  });
  return out;
}

std::pair<StoragePtr, StoragePtr> GpuNnKernels::add_rms_norm(const View& x, const View& residual, const View& weight,
                                                             double eps) const {
  GpuBackend& b = backend_;
  b.activate();
  const std::optional<nn::RowPlan> rows = nn::plan_rows(x);
  const std::optional<nn::RowPlan> residual_rows = nn::plan_rows(residual);
  if (!rows || !residual_rows || !nn::dense_param(weight)) {
    StoragePtr sum = b.binary(BinaryOp::Add, x, residual);
    StoragePtr normed = rms_norm(View{*sum, Layout(x.layout.shape()), x.dtype}, weight, eps);
    return {std::move(sum), std::move(normed)};
  }
  StoragePtr sum = b.alloc(x.dtype, x.layout.numel());
  StoragePtr out = b.alloc(x.dtype, x.layout.numel());
  dispatch(x.dtype, [&]<typename T>() {
    if constexpr (kernels::is_float_v<T> && !std::is_same_v<T, double>) {
      using M = kernels::opmath_t<T>;
      const T* px = static_cast<const T*>(x.storage.data()) + x.layout.offset();
      const T* pr = static_cast<const T*>(residual.storage.data()) + residual.layout.offset();
      const T* pw = static_cast<const T*>(weight.storage.data()) + weight.layout.offset();
      nn::launch_rows(*rows, [&]<int G, int N>(unsigned grid, int block) {
        b.launch_early(add_rms_norm_rows_kernel<T, G, N>, grid, block, 0, *rows, px, pr, pw, static_cast<M>(eps),
                       sum->as<T>(), out->as<T>());
      });
    } else {
      throw_not_supported(b, NnOp::AddRmsNorm, x.dtype);
    }
  });
  return {std::move(sum), std::move(out)};
}

}  // namespace wick::gpu
