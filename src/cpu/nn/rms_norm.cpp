// rms_norm over the last dim: each row's sum of squares, then the scaled outputs; dense rows of
// f32 and halves in vectorised loops (rows.h). add_rms_norm: the backend's add, then rms_norm of
// the sum (two passes; a decode step's rows of the sum are still in the cache when the norm reads
// them).
#include <type_traits>
#include <utility>
#include <vector>

#include "core/dispatch.h"
#include "cpu/nn/nn_kernels.h"
#include "cpu/nn/rows.h"
#include "cpu/nn/slices.h"
#include "kernels/nn.h"

namespace wick::cpu {

StoragePtr CpuNnKernels::rms_norm(const View& x, const View& weight, double eps) const {
  StoragePtr out = backend_.alloc(x.dtype, x.layout.numel());
  dispatch(x.dtype, [&]<typename T>() {
    if constexpr (kernels::is_float_v<T>) {
      using M = kernels::opmath_t<T>;
      const T* in = static_cast<const T*>(x.storage.data());
      const T* w = static_cast<const T*>(weight.storage.data()) + weight.layout.offset();
      T* o = out->as<T>();
      const int last = x.layout.rank() - 1;
      const int64_t n = x.layout.dim(last), xs = x.layout.stride(last);
      // A weight of (m, d): output row r (at r * n) takes its row r % m.
      const bool per_row = weight.layout.rank() == 2;
      const int64_t m = per_row ? weight.layout.dim(0) : 1, ws = weight.layout.stride(per_row ? 1 : 0),
                    w_row = per_row ? weight.layout.stride(0) : 0;
      const M e = static_cast<M>(eps);
      if constexpr (rows::kTakes<T>) {
        if (xs == 1) {
          std::vector<rows::FeatureRow> wf;
          for (int64_t r = 0; r < m; ++r) wf.emplace_back(w + r * w_row, n, ws);
          for_each_slice(x.layout, last, [&](int64_t xo, int64_t oo) {
            // Halves: the widened row, then the results, in the thread's buffer.
            float* buf = std::is_same_v<T, float> ? nullptr : rows::thread_buffer(2 * n);
            float* res = buf ? buf + n : nullptr;
            const float* row = rows::widen(in + xo, n, buf);
            const float scale = kernels::rms_scale(rows::sum_squared_deviations(row, n, 0.f), n, e);
            rows::affine(row, n, 0.f, scale, wf[static_cast<size_t>(oo / n % m)].data(), nullptr,
                         rows::results(o + oo, res));
            rows::narrow(res, n, o + oo);
          });
          return;
        }
      }
      for_each_slice(x.layout, last, [&](int64_t xo, int64_t oo) {
        const T* wr = w + oo / n % m * w_row;
        M squares = 0;
        for (int64_t i = 0; i < n; ++i) {
          const M v = kernels::to_opmath(in[xo + i * xs]);
          squares += v * v;
        }
        const M scale = kernels::rms_scale(squares, n, e);
        for (int64_t i = 0; i < n; ++i) {
          o[oo + i] = kernels::from_opmath<T>(
              kernels::rms_norm_value(kernels::to_opmath(in[xo + i * xs]), scale, kernels::to_opmath(wr[i * ws])));
        }
      });
    } else {
      throw_not_supported(backend_, NnOp::RmsNorm, x.dtype);
    }
  });
  return out;
}

std::pair<StoragePtr, StoragePtr> CpuNnKernels::add_rms_norm(const View& x, const View& residual, const View& weight,
                                                             double eps) const {
  StoragePtr sum = backend_.binary(BinaryOp::Add, x, residual);
  StoragePtr normed = rms_norm(View{*sum, Layout(x.layout.shape()), x.dtype}, weight, eps);
  return {std::move(sum), std::move(normed)};
}

}  // namespace wick::cpu
