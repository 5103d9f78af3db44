// softmax and log_softmax along any dim: each group finds its slice's maximum and sum of
// exponentials in one pass (kernels::SoftmaxAcc), combines them over the group, then writes.
#include "core/dispatch.h"
#include "gpu/nn/nn_kernels.h"
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

}  // namespace

StoragePtr GpuNnKernels::softmax(const View& x, int dim, bool log) const {
  GpuBackend& b = backend_;
  b.activate();
  StoragePtr out = b.alloc(x.dtype, x.layout.numel());
  const nn::SlicePlan plan = nn::plan_slices(x, dim);
  if (plan.count == 0 || plan.len == 0) return out;
  dispatch(x.dtype, [&]<typename T>() {
    if constexpr (kernels::is_float_v<T>) {
      const T* px = static_cast<const T*>(x.storage.data());
      T* po = out->as<T>();
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
