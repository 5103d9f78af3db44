// softmax and log_softmax along any dim: each slice's maximum and sum of exponentials in one pass
// (kernels::SoftmaxAcc), then the outputs.
#include "core/dispatch.h"
#include "cpu/nn/nn_kernels.h"
#include "cpu/nn/slices.h"
#include "kernels/nn.h"

namespace wick::cpu {

StoragePtr CpuNnKernels::softmax(const View& x, int dim, bool log) const {
  StoragePtr out = backend_.alloc(x.dtype, x.layout.numel());
  dispatch(x.dtype, [&]<typename T>() {
    if constexpr (kernels::is_float_v<T>) {
      using M = kernels::opmath_t<T>;
      const T* in = static_cast<const T*>(x.storage.data());
      T* o = out->as<T>();
      const int64_t n = x.layout.dim(dim), xs = x.layout.stride(dim), os = Layout(x.layout.shape()).stride(dim);
      for_each_slice(x.layout, dim, [&](int64_t xo, int64_t oo) {
        kernels::SoftmaxAcc<M> acc = kernels::SoftmaxAcc<M>::init();
        for (int64_t i = 0; i < n; ++i) acc.add(kernels::to_opmath(in[xo + i * xs]));
        for (int64_t i = 0; i < n; ++i) {
          const M v = kernels::to_opmath(in[xo + i * xs]);
          o[oo + i * os] = kernels::from_opmath<T>(log ? kernels::log_softmax_value(v, acc) : kernels::softmax_value(v, acc));
        }
      });
    } else {
      throw_not_supported(backend_, log ? NnOp::LogSoftmax : NnOp::Softmax, x.dtype);
    }
  });
  return out;
}

}  // namespace wick::cpu
