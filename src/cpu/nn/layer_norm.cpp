// layer_norm over the last dim: each row's mean, its sum of squared deviations, then the outputs;
// dense rows of f32 and halves in vectorised loops (rows.h).
#include <optional>
#include <type_traits>

#include "core/dispatch.h"
#include "cpu/nn/nn_kernels.h"
#include "cpu/nn/rows.h"
#include "cpu/nn/slices.h"
#include "kernels/nn.h"

namespace wick::cpu {

StoragePtr CpuNnKernels::layer_norm(const View& x, const View& weight, const View* bias, double eps) const {
  StoragePtr out = backend_.alloc(x.dtype, x.layout.numel());
  dispatch(x.dtype, [&]<typename T>() {
    if constexpr (kernels::is_float_v<T>) {
      using M = kernels::opmath_t<T>;
      const T* in = static_cast<const T*>(x.storage.data());
      const T* w = static_cast<const T*>(weight.storage.data()) + weight.layout.offset();
      const T* b = bias ? static_cast<const T*>(bias->storage.data()) + bias->layout.offset() : nullptr;
      T* o = out->as<T>();
      const int last = x.layout.rank() - 1;
      const int64_t n = x.layout.dim(last), xs = x.layout.stride(last), ws = weight.layout.stride(0);
      const int64_t bs = bias ? bias->layout.stride(0) : 0;
      const M e = static_cast<M>(eps);
      if constexpr (rows::kTakes<T>) {
        if (xs == 1) {
          const rows::FeatureRow wf(w, n, ws);
          std::optional<rows::FeatureRow> bf;
          if (b) bf.emplace(b, n, bs);
          for_each_slice(x.layout, last, [&](int64_t xo, int64_t oo) {
            // Halves: the widened row, then the results, in the thread's buffer.
            float* buf = std::is_same_v<T, float> ? nullptr : rows::thread_buffer(2 * n);
            float* res = buf ? buf + n : nullptr;
            const float* row = rows::widen(in + xo, n, buf);
            const float mean = rows::sum_of(row, n) / static_cast<float>(n);
            const float scale = kernels::rms_scale(rows::sum_squared_deviations(row, n, mean), n, e);
            rows::affine(row, n, mean, scale, wf.data(), bf ? bf->data() : nullptr, rows::results(o + oo, res));
            rows::narrow(res, n, o + oo);
          });
          return;
        }
      }
      for_each_slice(x.layout, last, [&](int64_t xo, int64_t oo) {
        M sum = 0;
        for (int64_t i = 0; i < n; ++i) sum += kernels::to_opmath(in[xo + i * xs]);
        const M mean = sum / static_cast<M>(n);
        M deviations = 0;
        for (int64_t i = 0; i < n; ++i) {
          const M d = kernels::to_opmath(in[xo + i * xs]) - mean;
          deviations += d * d;
        }
        const M scale = kernels::rms_scale(deviations, n, e);
        for (int64_t i = 0; i < n; ++i) {
          o[oo + i] = kernels::from_opmath<T>(kernels::layer_norm_value(kernels::to_opmath(in[xo + i * xs]), mean,
                                                                        scale, kernels::to_opmath(w[i * ws]),
                                                                        b ? kernels::to_opmath(b[i * bs]) : M(0)));
        }
      });
    } else {
      throw_not_supported(backend_, NnOp::LayerNorm, x.dtype);
    }
  });
  return out;
}

}  // namespace wick::cpu
