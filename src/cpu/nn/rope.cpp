// rope, rope_i and rope_thd: each head's row of d features turned pair by pair by the row's
// position (kernels::rope_pair), rows in parallel.
#include "core/dispatch.h"
#include "cpu/nn/nn_kernels.h"
#include "cpu/nn/slices.h"
#include "kernels/nn.h"

namespace wick::cpu {

namespace {

// The elements of a table (t, d/2) from element 0 of its storage.
template <typename T>
struct Table {
  const T* data;
  int64_t stride_t, stride_i;
};

template <typename T>
Table<T> table_of(const View& v) {
  return {static_cast<const T*>(v.storage.data()) + v.layout.offset(), v.layout.stride(0), v.layout.stride(1)};
}

}  // namespace

StoragePtr CpuNnKernels::rope(const View& x, const View& cos, const View& sin, RopePairs pairs, bool thd) const {
  StoragePtr out = backend_.alloc(x.dtype, x.layout.numel());
  dispatch(x.dtype, [&]<typename T>() {
    if constexpr (kernels::is_float_v<T>) {
      using M = kernels::opmath_t<T>;
      const T* in = static_cast<const T*>(x.storage.data());
      T* o = out->as<T>();
      const Table<T> c = table_of<T>(cos), s = table_of<T>(sin);
      const int64_t d = x.layout.dim(3), half = d / 2, xs = x.layout.stride(3);
      // The output is contiguous: row r = oo / d holds position (r / heads) % t, heads the dims
      // between t and d (h for thd, none otherwise).
      const int64_t t = x.layout.dim(thd ? 1 : 2), heads = thd ? x.layout.dim(2) : 1;
      const bool interleaved = pairs == RopePairs::Interleaved;
      const bool dense = xs == 1 && c.stride_i == 1 && s.stride_i == 1;
      for_each_slice(x.layout, 3, [&](int64_t xo, int64_t oo) {
        const int64_t p = oo / d / heads % t;
        const T* row = in + xo;
        const T* cp = c.data + p * c.stride_t;
        const T* sp = s.data + p * s.stride_t;
        T* orow = o + oo;
        // Dense rows: constant strides the compiler sees, so that it vectorises.
        if (dense && !interleaved) {
          for (int64_t i = 0; i < half; ++i) {
            const kernels::RopePair<M> r =
                kernels::rope_pair(kernels::to_opmath(row[i]), kernels::to_opmath(row[i + half]),
                                   kernels::to_opmath(cp[i]), kernels::to_opmath(sp[i]));
            orow[i] = kernels::from_opmath<T>(r.a);
            orow[i + half] = kernels::from_opmath<T>(r.b);
          }
          return;
        }
        if (dense) {
          for (int64_t i = 0; i < half; ++i) {
            const kernels::RopePair<M> r =
                kernels::rope_pair(kernels::to_opmath(row[2 * i]), kernels::to_opmath(row[2 * i + 1]),
                                   kernels::to_opmath(cp[i]), kernels::to_opmath(sp[i]));
            orow[2 * i] = kernels::from_opmath<T>(r.a);
            orow[2 * i + 1] = kernels::from_opmath<T>(r.b);
          }
          return;
        }
        for (int64_t i = 0; i < half; ++i) {
          const int64_t j = kernels::rope_first(i, interleaved), k = kernels::rope_second(i, half, interleaved);
          const kernels::RopePair<M> r =
              kernels::rope_pair(kernels::to_opmath(row[j * xs]), kernels::to_opmath(row[k * xs]),
                                 kernels::to_opmath(cp[i * c.stride_i]), kernels::to_opmath(sp[i * s.stride_i]));
          orow[j] = kernels::from_opmath<T>(r.a);
          orow[k] = kernels::from_opmath<T>(r.b);
        }
      });
    } else {
      throw_not_supported(backend_,
                          thd                               ? NnOp::RopeThd
                          : pairs == RopePairs::Interleaved ? NnOp::RopeI
                                                            : NnOp::Rope,
                          x.dtype);
    }
  });
  return out;
}

}  // namespace wick::cpu
