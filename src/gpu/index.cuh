// The GPU's indexed ops (index.cu: gather and index_select; index_scatter.cu: scatter_set;
// index_add.cu: scatter_add_set and index_add), with the same geometry as the CPU backend
// (src/cpu/index.cpp): a space of the index tensor's shape, the data operand's stride at `dim` set
// to 0. An index out of range is recorded in the device's error record and raised at the next
// synchronisation. The in-place ops check every index first and write nothing when one is bad;
// scatters walk whole fibers along `dim` on one thread, so colliding writes land in order (the last
// wins, sums add in order). Three translation units, as each instantiates every dtype and index type.
#pragma once

#include <limits>

#include "core/dispatch.h"
#include "gpu/elementwise.cuh"
#include "gpu/gpu_backend.h"
#include "kernels/binary.h"

namespace wick::gpu::indexed {

template <typename I>
__device__ inline bool skip(I v) {
  return v == std::numeric_limits<I>::max();
}

template <typename I>
__device__ inline bool out_of_range(I v, int64_t size) {
  return static_cast<int64_t>(v) < 0 || static_cast<int64_t>(v) >= size;
}

// Records the first index outside [0, size) among ids (any layout).
template <typename Ix, typename I>
__global__ __launch_bounds__(kBlock) void check_kernel(const Ix* ids, StridedArgs<1, I> a, I n, int64_t size, int dim,
                                                       KernelError* err, OpCode op) {
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    I off[1];
    offsets_at(a, i, off);
    const Ix v = ids[off[0]];
    if (!skip(v) && out_of_range(v, size))
      report_index_error(err, op, dim, static_cast<int64_t>(v), size, dtype_of<Ix>);
  }
}

// One element of a scatter: target = s, or target + s (rounded as the add op rounds it) when kAdd.
template <bool kAdd, typename T>
__device__ inline void scatter_one(T& target, T s) {
  if constexpr (kAdd)
    target =
        kernels::from_opmath<T>(kernels::Binary<BinaryOp::Add>{}(kernels::to_opmath(target), kernels::to_opmath(s)));
  else
    target = s;
}

// One thread per fiber along dim: dst[fiber + ids[j] * dst_stride] (+)= src[j] for j in order.
// Operands of the fiber space: 0 dst (stride 0 at dim), 1 ids, 2 src. Does nothing once an error
// is recorded (by the check kernel just before it).
template <bool kAdd, typename T, typename Ix, typename I>
__global__ __launch_bounds__(kBlock) void scatter_kernel(T* dst, const Ix* ids, const T* src, StridedArgs<3, I> a, I n,
                                                         int64_t len, int64_t dst_stride, int64_t ids_stride,
                                                         int64_t src_stride, const KernelError* err) {
  if (err->code != 0) return;
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    I off[3];
    offsets_at(a, i, off);
    for (int64_t j = 0; j < len; ++j) {
      const Ix v = ids[static_cast<int64_t>(off[1]) + j * ids_stride];
      if (skip(v)) continue;
      T& target = dst[static_cast<int64_t>(off[0]) + static_cast<int64_t>(v) * dst_stride];
      const T s = src[static_cast<int64_t>(off[2]) + j * src_stride];
      scatter_one<kAdd>(target, s);
    }
  }
}

// A scatter small enough for one block (a decode step's keys written into a cache): the block
// checks every index, then, when none is out of range and no error was recorded before, writes as
// scatter_kernel does. One launch where the check and the scatter take two; each thread's loads
// are all queued before any is used, so the block waits for memory twice.
inline constexpr int kOneBlock = 1024, kOneBlockFibers = 2, kOneBlockIds = 4;  // threads; per thread

template <bool kAdd, typename T, typename Ix>
__global__ __launch_bounds__(kOneBlock) void one_block_scatter_kernel(
    T* dst, const Ix* ids, const T* src, StridedArgs<1, uint32_t> ia, uint32_t n_ids, StridedArgs<3, uint32_t> a,
    uint32_t n, int64_t len, int64_t dst_stride, int64_t ids_stride, int64_t src_stride, int64_t size, int dim,
    KernelError* err, OpCode op) {
  __shared__ int bad;
  if (threadIdx.x == 0) bad = 0;
  Ix v[kOneBlockIds];
#pragma unroll
  for (int j = 0; j < kOneBlockIds; ++j) {
    const uint32_t i = threadIdx.x + j * kOneBlock;
    uint32_t off[1] = {0};
    if (i < n_ids) offsets_at(ia, i, off);
    v[j] = i < n_ids ? ids[off[0]] : Ix{0};
  }
  __syncthreads();  // bad is 0
#pragma unroll
  for (int j = 0; j < kOneBlockIds; ++j) {
    if (threadIdx.x + j * kOneBlock < n_ids && !skip(v[j]) && out_of_range(v[j], size)) {
      report_index_error(err, op, dim, static_cast<int64_t>(v[j]), size, dtype_of<Ix>);
      bad = 1;
    }
  }
  __syncthreads();
  if (bad || err->code != 0) return;
  uint32_t off[kOneBlockFibers][3];
#pragma unroll
  for (int f = 0; f < kOneBlockFibers; ++f) {
    const uint32_t i = threadIdx.x + f * kOneBlock;
    if (i < n) offsets_at(a, i, off[f]);
  }
  for (int64_t j = 0; j < len; ++j) {
    Ix w[kOneBlockFibers];
    T s[kOneBlockFibers];
#pragma unroll
    for (int f = 0; f < kOneBlockFibers; ++f) {
      const bool in = threadIdx.x + f * kOneBlock < n;
      w[f] = in ? ids[static_cast<int64_t>(off[f][1]) + j * ids_stride] : std::numeric_limits<Ix>::max();
      s[f] = in ? src[static_cast<int64_t>(off[f][2]) + j * src_stride] : T{};
    }
#pragma unroll
    for (int f = 0; f < kOneBlockFibers; ++f) {
      if (skip(w[f])) continue;
      T& target = dst[static_cast<int64_t>(off[f][0]) + static_cast<int64_t>(w[f]) * dst_stride];
      scatter_one<kAdd>(target, s[f]);
    }
  }
}

template <int N>
bool small_space(const StridedSpace<N>& s, int64_t extra_extent) {
  return s.fits_int32() && extra_extent < (int64_t(1) << 31);
}

template <typename F>
void dispatch_indexed(DType data, DType index, const F& f) {
  dispatch(index, [&]<typename Ix>() {
    if constexpr (std::is_integral_v<Ix>) {
      dispatch(data, [&]<typename T>() { f.template operator()<T, Ix>(); });
    }
  });
}

// Sixteen bytes moved as one element: whole rows of any dtype.
using Bytes16 = Pack<uint32_t, 4>;

// s in units of 16 bytes when out and x run contiguously along the last dim under one index
// (rows gathered whole, as an embedding lookup does) and every offset and stride of out and x
// is a whole number of such units; false otherwise.
template <typename T>
bool as_16_bytes(const StridedSpace<3>& s, int64_t* x_stride, const void* out, const void* x, StridedSpace<3>* w) {
  constexpr int64_t V = 16 / sizeof(T);
  const int last = s.rank - 1;
  if (sizeof(T) > 16 || last < 0 || s.strides[0][last] != 1 || s.strides[2][last] != 1 || s.strides[1][last] != 0 ||
      s.shape[last] % V != 0 || *x_stride % V != 0 || !aligned(out, 16) || !aligned(x, 16))
    return false;
  for (int k : {0, 2}) {
    if (s.offsets[k] % V != 0) return false;
    for (int d = 0; d < last; ++d)
      if (s.strides[k][d] % V != 0) return false;
  }
  *w = s;
  w->shape[last] /= V;
  for (int k : {0, 2}) {
    w->offsets[k] /= V;
    for (int d = 0; d <= last; ++d) w->strides[k][d] = d == last ? 1 : s.strides[k][d] / V;
  }
  *x_stride /= V;
  return true;
}

template <typename Ix>
void check_indices(GpuBackend& b, const View& ids, int64_t size, int dim, OpCode op) {
  const StridedSpace<1> s = collapse<1>({&ids.layout});
  const int64_t n = s.numel();
  if (n == 0) return;
  const Ix* p = static_cast<const Ix*>(ids.storage.data());
  if (s.fits_int32()) {
    check_kernel<Ix, uint32_t><<<grid_for(n), kBlock, 0, b.stream()>>>(
        p, strided_args<1, uint32_t>(s), static_cast<uint32_t>(n), size, dim, b.device_error(), op);
  } else {
    check_kernel<Ix, uint64_t><<<grid_for(n), kBlock, 0, b.stream()>>>(
        p, strided_args<1, uint64_t>(s), static_cast<uint64_t>(n), size, dim, b.device_error(), op);
  }
  WICK_GPU_CHECK_LAUNCH();
}

// Queues the scatter of `fibers` (operands 0 dst with stride 0 at dim, 1 ids, 2 src; each fiber
// `len` long along dim): one block where it is small, else the check of every index among ids_l,
// then the scatter.
template <bool kAdd, typename T, typename Ix>
void launch_scatter(GpuBackend& b, T* dst, const Ix* ids, const T* src, const StridedSpace<3>& fibers, int64_t len,
                    int64_t dst_stride, int64_t ids_stride, int64_t src_stride, const View& ids_all, int64_t size,
                    int64_t extent, int dim, OpCode op) {
  const int64_t n = fibers.numel();
  if (n <= kOneBlock * kOneBlockFibers && ids_all.layout.numel() <= kOneBlock * kOneBlockIds &&
      small_space(fibers, extent)) {
    const StridedSpace<1> all = collapse<1>({&ids_all.layout});
    one_block_scatter_kernel<kAdd, T, Ix><<<1, kOneBlock, 0, b.stream()>>>(
        dst, ids, src, strided_args<1, uint32_t>(all), static_cast<uint32_t>(all.numel()),
        strided_args<3, uint32_t>(fibers), static_cast<uint32_t>(n), len, dst_stride, ids_stride, src_stride, size, dim,
        b.device_error(), op);
    WICK_GPU_CHECK_LAUNCH();
    return;
  }
  check_indices<Ix>(b, ids_all, size, dim, op);
  if (small_space(fibers, extent)) {
    scatter_kernel<kAdd, T, Ix, uint32_t><<<grid_for(n), kBlock, 0, b.stream()>>>(
        dst, ids, src, strided_args<3, uint32_t>(fibers), static_cast<uint32_t>(n), len, dst_stride, ids_stride,
        src_stride, b.device_error());
  } else {
    scatter_kernel<kAdd, T, Ix, uint64_t><<<grid_for(n), kBlock, 0, b.stream()>>>(
        dst, ids, src, strided_args<3, uint64_t>(fibers), static_cast<uint64_t>(n), len, dst_stride, ids_stride,
        src_stride, b.device_error());
  }
  WICK_GPU_CHECK_LAUNCH();
}

// dst (layout dst_l, size `size` along dim) gets src scattered by ids (both of src's layout shape).
// Where every index covers whole 16-byte runs of contiguous elements in dst and src (a key cache's
// rows written at positions), those runs move as single elements.
template <bool kAdd, typename T, typename Ix>
void scatter(GpuBackend& b, T* dst, const Layout& dst_l, const View& ids, const Layout& ids_l, const View& src, int dim,
             OpCode op) {
  const int64_t len = src.layout.dim(dim), size = dst_l.dim(dim);
  const View ids_all{ids.storage, ids_l, ids.dtype};
  if (len == 0 || src.layout.numel() == 0) {  // nothing to write, every index still checked
    check_indices<Ix>(b, ids_all, size, dim, op);
    return;
  }
  const Ix* pi = static_cast<const Ix*>(ids.storage.data());
  const T* ps = static_cast<const T*>(src.storage.data());
  const Layout d = with_stride(dst_l, src.layout.shape(), dim, 0).narrow(dim, 0, 1);
  const Layout i = ids_l.narrow(dim, 0, 1), s_l = src.layout.narrow(dim, 0, 1);
  const StridedSpace<3> fibers = collapse<3>({&d, &i, &s_l});
  const int64_t extent = std::max({dst_l.extent(), ids_l.extent(), src.layout.extent()});
  const int64_t src_stride = len > 1 ? src.layout.stride(dim) : 0;
  if constexpr (!kAdd && sizeof(T) <= 16) {
    constexpr int64_t V = 16 / sizeof(T);
    int64_t dst_stride = dst_l.stride(dim);
    StridedSpace<3> wide;
    if (src_stride % V == 0 && as_16_bytes<T>(fibers, &dst_stride, dst, ps, &wide)) {
      launch_scatter<false>(b, reinterpret_cast<Bytes16*>(dst), pi, reinterpret_cast<const Bytes16*>(ps), wide, len,
                            dst_stride, ids_l.stride(dim), src_stride / V, ids_all, size, extent, dim, op);
      return;
    }
  }
  launch_scatter<kAdd>(b, dst, pi, ps, fibers, len, dst_l.stride(dim), ids_l.stride(dim), src_stride, ids_all, size,
                       extent, dim, op);
}

}  // namespace wick::gpu::indexed
