// Copies, fills and casts.
#include <cstring>

#include "backend/scalar_cast.h"
#include "core/dispatch.h"
#include "cpu/cpu_backend.h"
#include "cpu/loops.h"
#include "kernels/cast.h"

namespace wick::cpu {

void CpuBackend::copy_strided(const View& src, const MutView& dst) {
  dispatch(src.dtype, [&]<typename T>() {
    T* out = mut_data<T>(dst);
    StridedSpace<2> s = collapse<2>({&dst.layout, &src.layout});
    const T* in = static_cast<const T*>(src.storage.data());
    for_each_run<2>(s, kParallelGrain, [&](const int64_t* off, int64_t n, const int64_t* st) {
      if (st[0] == 1 && st[1] == 1) {
        std::memcpy(out + off[0], in + off[1], static_cast<size_t>(n) * sizeof(T));
      } else {
        for (int64_t i = 0; i < n; ++i) out[off[0] + i * st[0]] = in[off[1] + i * st[1]];
      }
    });
  });
}

void CpuBackend::copy2d(const Storage& src, Storage& dst, DType dtype, const Copy2dParams& p) {
  const int64_t size = dtype_size(dtype);
  const auto* in = static_cast<const char*>(src.data());
  auto* out = static_cast<char*>(dst.data());
  parallel_for(p.rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(p.cols, 1)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t r = begin; r < end; ++r) {
                   std::memcpy(out + (p.dst_offset + r * p.dst_stride) * size,
                               in + (p.src_offset + r * p.src_stride) * size, static_cast<size_t>(p.cols * size));
                 }
               });
}

void CpuBackend::const_set(const MutView& dst, Scalar value) {
  dispatch(dst.dtype, [&]<typename T>() {
    const T v = scalar_as<T>(value);
    T* out = mut_data<T>(dst);
    StridedSpace<1> s = collapse<1>({&dst.layout});
    for_each_run<1>(s, kParallelGrain, [&](const int64_t* off, int64_t n, const int64_t* st) {
      for (int64_t i = 0; i < n; ++i) out[off[0] + i * st[0]] = v;
    });
  });
}

StoragePtr CpuBackend::cast(const View& x, DType to) {
  StoragePtr out = alloc(to, x.layout.numel());
  Layout out_layout(x.layout.shape());
  dispatch(x.dtype, [&]<typename From>() {
    dispatch(to, [&]<typename To>() {
      map_elementwise([](From v) { return kernels::cast<To>(v); }, out->as<To>(), out_layout, operand<From>(x));
    });
  });
  return out;
}

}  // namespace wick::cpu
