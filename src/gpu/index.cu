// gather and index_select on the GPU (index.cuh).
#include "gpu/index.cuh"

namespace wick::gpu {

namespace {

using namespace indexed;

// out[e] = x[x'(e) + ids[e] * x_stride]; operands: 0 out, 1 ids, 2 x (stride 0 at dim).
template <typename T, typename Ix, typename I>
__global__ __launch_bounds__(kBlock) void gather_kernel(T* out, const Ix* ids, const T* x, StridedArgs<3, I> a, I n,
                                                        int64_t x_stride, int64_t size, int dim, KernelError* err,
                                                        OpCode op) {
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  start_after_inputs();
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    I off[3];
    offsets_at(a, i, off);
    const Ix v = ids[off[1]];
    T value{};
    if (!skip(v)) {
      if (out_of_range(v, size))
        report_index_error(err, op, dim, static_cast<int64_t>(v), size, dtype_of<Ix>);
      else
        value = x[static_cast<int64_t>(off[2]) + static_cast<int64_t>(v) * x_stride];
    }
    out[off[0]] = value;
  }
}

template <typename T, typename Ix>
void launch_gather(GpuBackend& b, T* out, const Ix* ids, const T* x, const StridedSpace<3>& s, int64_t x_stride,
                   int64_t x_extent, int64_t size, int dim, OpCode op) {
  const int64_t n = s.numel();
  if (small_space(s, x_extent)) {
    b.launch_early(gather_kernel<T, Ix, uint32_t>, grid_for(n), kBlock, 0, out, ids, x, strided_args<3, uint32_t>(s),
                   static_cast<uint32_t>(n), x_stride, size, dim, b.device_error(), op);
  } else {
    b.launch_early(gather_kernel<T, Ix, uint64_t>, grid_for(n), kBlock, 0, out, ids, x, strided_args<3, uint64_t>(s),
                   static_cast<uint64_t>(n), x_stride, size, dim, b.device_error(), op);
  }
}

template <typename T, typename Ix>
void gather_into(GpuBackend& b, T* out, const Shape& shape, const View& ids, const Layout& ids_l, const View& x,
                 const Layout& x_l, int dim, OpCode op) {
  const Layout out_l(shape);
  const StridedSpace<3> s = collapse<3>({&out_l, &ids_l, &x_l});
  if (s.numel() == 0) {
    // No element to gather, yet every index is still checked, as on the CPU: index_select from an
    // empty tensor with ids out of range is an error.
    check_indices<Ix>(b, ids, x.layout.dim(dim), dim, op);
    return;
  }
  const Ix* pi = static_cast<const Ix*>(ids.storage.data());
  const T* px = static_cast<const T*>(x.storage.data());
  int64_t stride = x.layout.stride(dim);
  const int64_t size = x.layout.dim(dim);
  StridedSpace<3> wide;
  if (as_16_bytes<T>(s, &stride, out, px, &wide)) {
    launch_gather(b, reinterpret_cast<Bytes16*>(out), pi, reinterpret_cast<const Bytes16*>(px), wide, stride,
                  x.layout.extent(), size, dim, op);
  } else {
    launch_gather(b, out, pi, px, s, x.layout.stride(dim), x.layout.extent(), size, dim, op);
  }
}

}  // namespace

StoragePtr GpuBackend::gather(const View& x, const View& ids, int dim) {
  activate();
  const Shape& shape = ids.layout.shape();
  StoragePtr out = alloc(x.dtype, shape.numel());
  dispatch_indexed(x.dtype, ids.dtype, [&]<typename T, typename Ix>() {
    gather_into<T, Ix>(*this, out->as<T>(), shape, ids, ids.layout, x, with_stride(x.layout, shape, dim, 0), dim,
                       OpCode::Gather);
  });
  return out;
}

StoragePtr GpuBackend::index_select(const View& x, const View& ids, int dim) {
  activate();
  Shape shape = x.layout.shape();
  shape[dim] = ids.layout.dim(0);
  StoragePtr out = alloc(x.dtype, shape.numel());
  dispatch_indexed(x.dtype, ids.dtype, [&]<typename T, typename Ix>() {
    gather_into<T, Ix>(*this, out->as<T>(), shape, ids, ids_along(ids.layout, shape, dim), x,
                       with_stride(x.layout, shape, dim, 0), dim, OpCode::IndexSelect);
  });
  return out;
}

}  // namespace wick::gpu
