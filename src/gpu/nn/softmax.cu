// softmax and log_softmax along any dim. Dense rows held in registers (rows.cuh): the row's
// maximum, then the sum of exp(x - max), each combined over the group, then the writes. Any other
// slice: the maximum and sum in one pass (kernels::SoftmaxAcc), combined, then a second read.
#include "core/dispatch.h"
#include "gpu/nn/nn_kernels.h"
#include "gpu/nn/rows.cuh"
#include "gpu/nn/slices.cuh"
#include "kernels/nn.h"

namespace wick::gpu {

namespace {

template <typename M>
struct ShuffleSoftmax {
  __device__ kernels::SoftmaxAcc<M> operator()(kernels::SoftmaxAcc<M> a, int mask, int width) const {
    return {shfl_xor(a.max, mask, width), shfl_xor(a.sum, mask, width)};
  }
};

template <typename T, int G, typename I>
__global__ __launch_bounds__(kBlock) void softmax_kernel(nn::Slices<I> s, const T* x, T* out, bool log) {
  using M = kernels::opmath_t<T>;
  using Acc = kernels::SoftmaxAcc<M>;
  for (I g = nn::first_slice<G, I>(); g < s.count; g += nn::slice_step<G, I>()) {
    I off[2];
    offsets_at(s.starts, g, off);
    const T* in = x + off[1];
    Acc acc = Acc::init();
    for (I i = nn::lane<G>(); i < s.len; i += G) acc.add(kernels::to_opmath(in[i * s.x_stride]));
    acc = nn::group_all<G>(acc, ShuffleSoftmax<M>{}, [](Acc a, Acc b) { return Acc::combine(a, b); });
    T* o = out + off[0];
    for (I i = nn::lane<G>(); i < s.len; i += G) {
      const M v = kernels::to_opmath(in[i * s.x_stride]);
      o[i * s.out_stride] =
          kernels::from_opmath<T>(log ? kernels::log_softmax_value(v, acc) : kernels::softmax_value(v, acc));
    }
  }
}

// exp(v - max). For halves, exp2 of a prescaled argument (one FMA and the hardware's exp2): its
// error, a few f32 ulps, vanishes in the rounding to 8 or 11 bits, and it halves the kernel's
// arithmetic, which bounds it for 2-byte elements; f32 and f64 keep the correctly rounded exp.
template <typename T, typename M>
__device__ inline M exp_shifted(M v, M max) {
  if constexpr (sizeof(T) == 2) {
    constexpr M kLog2e = M(1.4426950408889634);
    return exp2f(v * kLog2e - max * kLog2e);
  } else {
    return kernels::math::exp(v - max);
  }
}

template <typename T, int G, int N>
__global__ __launch_bounds__(nn::kRowBlock<G>) void softmax_rows_kernel(nn::RowPlan r, const T* x, T* out, bool log) {
  using M = kernels::opmath_t<T>;
  const auto add = [](M a, M b) { return a + b; };
  for (int64_t row = nn::first_row<G>(); row < r.rows; row += nn::row_step<G>()) {
    nn::RowPacks<T, G, N> held;
    held.load(x + row * r.len, static_cast<int>(r.len));
    M max = -std::numeric_limits<M>::infinity();
    held.each([&](M v, int) { max = v > max ? v : max; });
    max = nn::group_all<G>(max, nn::ShuffleValue{}, [](M a, M b) { return a > b ? a : b; });
    M sum = 0;
    held.each([&](M v, int) { sum += exp_shifted<T>(v, max); });
    sum = nn::group_all<G>(sum, nn::ShuffleValue{}, add);
    // One division per row: exp(x - max) * (1 / sum) is within an ulp of exp(x - max) / sum.
    const M inv = M(1) / sum, log_sum = kernels::math::log(sum);
    held.store(out + row * r.len,
               [&](M v) { return log ? (v - max) - log_sum : exp_shifted<T>(v, max) * inv; });
  }
}

}  // namespace

StoragePtr GpuNnKernels::softmax(const View& x, int dim, bool log) const {
  GpuBackend& b = backend_;
  b.activate();
  StoragePtr out = b.alloc(x.dtype, x.layout.numel());
  const nn::SlicePlan plan = nn::plan_slices(x, dim);
  if (plan.count == 0 || plan.len == 0) return out;
  const std::optional<nn::RowPlan> rows =
      dim == x.layout.rank() - 1 ? nn::plan_rows(x) : std::optional<nn::RowPlan>{};
  dispatch(x.dtype, [&]<typename T>() {
    if constexpr (kernels::is_float_v<T>) {
      const T* px = static_cast<const T*>(x.storage.data());
      T* po = out->as<T>();
      if constexpr (!std::is_same_v<T, double>) {
        if (rows) {
          nn::launch_rows(*rows, [&]<int G, int N>(unsigned grid, int block) {
            softmax_rows_kernel<T, G, N><<<grid, block, 0, b.stream()>>>(*rows, px + x.layout.offset(), po, log);
          });
          return;
        }
      }
      nn::launch_slices(plan, [&]<int G, typename I>(unsigned grid, const nn::Slices<I>& s) {
        softmax_kernel<T, G, I><<<grid, kBlock, 0, b.stream()>>>(s, px, po, log);
      });
    } else {
      throw_not_supported(b, log ? NnOp::LogSoftmax : NnOp::Softmax, x.dtype);
    }
  });
  return out;
}

}  // namespace wick::gpu
