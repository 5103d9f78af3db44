// softmax and log_softmax along any dim. Dense rows of f32 and halves: the maximum, the
// exponentials and their sum, then one scaling, in vectorised loops (rows.h). Other slices: the
// maximum and sum of exponentials in one pass (kernels::SoftmaxAcc), then the outputs.
#include <cmath>
#include <type_traits>

#include "core/dispatch.h"
#include "cpu/nn/nn_kernels.h"
#include "cpu/nn/rows.h"
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
      if constexpr (rows::kTakes<T>) {
        if (xs == 1 && os == 1) {
          for_each_slice(x.layout, dim, [&](int64_t xo, int64_t oo) {
            // Halves: the widened row, then the results, in the thread's buffer.
            float* buf = std::is_same_v<T, float> ? nullptr : rows::thread_buffer(2 * n);
            float* res = buf ? buf + n : nullptr;
            const float* row = rows::widen(in + xo, n, buf);
            float* r = rows::results(o + oo, res);
            const float max = rows::max_of(row, n);
            if (log) {
              const float log_sum = std::log(rows::sum_exp(row, n, max, nullptr));
              rows::subtract(row, n, max, r);
              rows::subtract(r, n, log_sum, r);
            } else {
              rows::scale(r, n, 1.f / rows::sum_exp(row, n, max, r));
            }
            rows::narrow(res, n, o + oo);
          });
          return;
        }
      }
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
