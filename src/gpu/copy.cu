// Copies, fills and casts.
#include "backend/scalar_cast.h"
#include "core/dispatch.h"
#include "gpu/elementwise.cuh"
#include "gpu/gpu_backend.h"
#include "kernels/cast.h"

namespace wick::gpu {

namespace {

template <typename T>
struct Identity {
  __device__ T operator()(T v) const { return v; }
};

template <typename T>
struct Constant {
  T value;
  __device__ T operator()() const { return value; }
};

template <typename To, typename From>
struct Cast {
  __device__ To operator()(From v) const { return kernels::cast<To>(v); }
};

}  // namespace

void GpuBackend::copy_strided(const View& src, const MutView& dst) {
  activate();
  dispatch(src.dtype, [&]<typename T>() {
    map_elementwise(*this, Identity<T>{}, static_cast<T*>(dst.storage.data()), dst.layout,
                    Operand<T>{static_cast<const T*>(src.storage.data()), &src.layout});
  });
}

void GpuBackend::copy2d(const Storage& src, Storage& dst, DType dtype, const Copy2dParams& p) {
  activate();
  if (p.rows == 0 || p.cols == 0) return;
  if (p.src_stride < p.cols || p.dst_stride < p.cols) {  // rows that overlap: not a pitched copy
    const Layout from({p.rows, p.cols}, {p.src_stride, 1}, p.src_offset),
        to({p.rows, p.cols}, {p.dst_stride, 1}, p.dst_offset);
    copy_strided(View{src, from, dtype}, MutView{dst, to, dtype});
    return;
  }
  const size_t size = static_cast<size_t>(dtype_size(dtype));
  if ((p.src_stride == p.cols && p.dst_stride == p.cols) || p.rows == 1) {  // one run: a plain copy, faster
    WICK_GPU_CHECK(copy_d2d_async(static_cast<char*>(dst.data()) + p.dst_offset * size,
                                  static_cast<const char*>(src.data()) + p.src_offset * size, p.rows * p.cols * size,
                                  stream_));
    return;
  }
  WICK_GPU_CHECK(copy2d_d2d_async(static_cast<char*>(dst.data()) + p.dst_offset * size, p.dst_stride * size,
                                  static_cast<const char*>(src.data()) + p.src_offset * size, p.src_stride * size,
                                  p.cols * size, p.rows, stream_));
}

void GpuBackend::const_set(const MutView& dst, Scalar value) {
  activate();
  dispatch(dst.dtype, [&]<typename T>() {
    map_elementwise(*this, Constant<T>{scalar_as<T>(value)}, static_cast<T*>(dst.storage.data()), dst.layout);
  });
}

StoragePtr GpuBackend::cast(const View& x, DType to) {
  StoragePtr out = alloc(to, x.layout.numel());
  const Layout out_layout(x.layout.shape());
  dispatch(x.dtype, [&]<typename From>() {
    dispatch(to, [&]<typename To>() {
      map_elementwise(*this, Cast<To, From>{}, out->as<To>(), out_layout,
                      Operand<From>{static_cast<const From*>(x.storage.data()), &x.layout});
    });
  });
  return out;
}

}  // namespace wick::gpu
