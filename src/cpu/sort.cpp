// argsort along the last dim: a stable sort per row. NaN sorts after every number ascending and
// before every number descending (it counts as the largest value), as in PyTorch.
#include <algorithm>
#include <numeric>

#include "core/dispatch.h"
#include "cpu/cpu_backend.h"
#include "cpu/loops.h"
#include "cpu/scratch.h"
#include "kernels/numeric.h"

namespace wick::cpu {

StoragePtr CpuBackend::argsort(const View& x, bool ascending) {
  const Layout& xl = x.layout;
  StoragePtr out = alloc(DType::U32, xl.numel());
  if (xl.numel() == 0) return out;
  const int last = xl.rank() - 1;
  const int64_t len = last >= 0 ? xl.dim(last) : 1, stride = last >= 0 ? xl.stride(last) : 1;
  const Layout rows_x = last >= 0 ? xl.narrow(last, 0, 1) : xl;
  const Layout rows_out = last >= 0 ? Layout(xl.shape()).narrow(last, 0, 1) : Layout(xl.shape());
  const StridedSpace<2> rows = collapse<2>({&rows_out, &rows_x});
  dispatch(x.dtype, [&]<typename T>() {
    using M = kernels::opmath_t<T>;
    const T* in = static_cast<const T*>(x.storage.data());
    uint32_t* o = out->as<uint32_t>();
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / (len * 8));
    for_each_run<2>(rows, grain, [&](const int64_t* off, int64_t n, const int64_t* st) {
      Scratch<M> key(len);
      for (int64_t r = 0; r < n; ++r) {
        const T* p = in + off[1] + r * st[1];
        uint32_t* idx = o + off[0] + r * st[0];
        for (int64_t i = 0; i < len; ++i) key[i] = kernels::to_opmath(p[i * stride]);
        std::iota(idx, idx + len, 0u);
        auto k = [&](uint32_t i) { return key[i]; };
        if (ascending) {
          std::stable_sort(idx, idx + len, [&](uint32_t a, uint32_t b) {
            return !kernels::is_nan(k(a)) && (kernels::is_nan(k(b)) || k(a) < k(b));
          });
        } else {
          std::stable_sort(idx, idx + len, [&](uint32_t a, uint32_t b) {
            return !kernels::is_nan(k(b)) && (kernels::is_nan(k(a)) || k(a) > k(b));
          });
        }
      }
    });
  });
  return out;
}

}  // namespace wick::cpu
