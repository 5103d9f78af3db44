// rope, rope_i and rope_thd on a GPU. x is read as rows (one head at one position, d features
// each) at any strides of its first three dims; the output is contiguous. Where the rows are
// dense along d and every pointer and stride allows it, a thread takes 16-byte packs: V pairs
// (the packs at j and j + d/2 of a row) or V interleaved features, with their packs of cos and
// sin, so that x is read once and the output written once, as a copy does (the tables, of t rows
// only, stay in cache). Anything else: a thread per pair. No kernel depends on the warp size.
#include <limits>

#include "core/dispatch.h"
#include "gpu/elementwise.cuh"
#include "gpu/gpu_backend.h"
#include "gpu/nn/nn_kernels.h"
#include "kernels/nn.h"

namespace wick::gpu {

namespace {

// The rows of x: row r is element (i0, i1, i2) of x's first three dims, in row-major order (the
// output's order); one of i1 (thd) or i2 is the position.
template <typename I>
struct RopeRows {
  I dims[3];
  I strides[3];  // x's, in elements
  I offset;      // x's
  I count;       // rows
  I d, half;
  I x_stride;   // along d (the per-pair kernel)
  int pos_dim;  // 1 or 2
};

// A table (t, d/2): element 0 of its view and its strides.
template <typename T, typename I>
struct RopeTable {
  const T* data;
  I stride_t, stride_i;
};

// x's offset of row r, and the row's position.
template <typename I>
__device__ inline I row_at(const RopeRows<I>& r, I row, I* pos) {
  const I i2 = row % r.dims[2], q = row / r.dims[2];
  const I i1 = q % r.dims[1], i0 = q / r.dims[1];
  *pos = r.pos_dim == 1 ? i1 : i2;
  return r.offset + i0 * r.strides[0] + i1 * r.strides[1] + i2 * r.strides[2];
}

template <typename I>
__device__ inline I first_item() {
  return static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x;
}
template <typename I>
__device__ inline I item_step() {
  return static_cast<I>(gridDim.x) * blockDim.x;
}

// A thread per pair: any strides.
template <typename T, typename I>
__global__ __launch_bounds__(kBlock) void rope_kernel(RopeRows<I> r, const T* x, RopeTable<T, I> c, RopeTable<T, I> s,
                                                      bool interleaved, T* out) {
  using M = kernels::opmath_t<T>;
  const I n = r.count * r.half;
  for (I w = first_item<I>(); w < n; w += item_step<I>()) {
    const I row = w / r.half, i = w - row * r.half;
    I pos;
    const T* in = x + row_at(r, row, &pos);
    const I j = kernels::rope_first(i, interleaved), k = kernels::rope_second(i, r.half, interleaved);
    const kernels::RopePair<M> v =
        kernels::rope_pair(kernels::to_opmath(in[j * r.x_stride]), kernels::to_opmath(in[k * r.x_stride]),
                           kernels::to_opmath(c.data[pos * c.stride_t + i * c.stride_i]),
                           kernels::to_opmath(s.data[pos * s.stride_t + i * s.stride_i]));
    T* o = out + row * r.d;
    o[j] = kernels::from_opmath<T>(v.a);
    o[k] = kernels::from_opmath<T>(v.b);
  }
}

// A thread per 16-byte pack of V features: rows dense along d, packs aligned. Halves: the packs
// at j and j + d/2 and V elements of each table; interleaved: one pack of V / 2 pairs and V / 2
// elements of each table.
template <typename T, int V, bool Interleaved, typename I>
__global__ __launch_bounds__(kBlock) void rope_packs_kernel(RopeRows<I> r, const T* x, RopeTable<T, I> c,
                                                            RopeTable<T, I> s, T* out) {
  using M = kernels::opmath_t<T>;
  constexpr int W = Interleaved ? V / 2 : V;  // pairs a thread turns
  using XPack = Pack<T, V>;
  using TPack = Pack<T, W>;
  const I per_row = (Interleaved ? r.d : r.half) / V;
  const I n = r.count * per_row;
  for (I w = first_item<I>(); w < n; w += item_step<I>()) {
    const I row = w / per_row, q = w - row * per_row;
    I pos;
    const T* in = x + row_at(r, row, &pos);
    T* o = out + row * r.d;
    const TPack cp = *reinterpret_cast<const TPack*>(c.data + pos * c.stride_t + q * W);
    const TPack sp = *reinterpret_cast<const TPack*>(s.data + pos * s.stride_t + q * W);
    if constexpr (Interleaved) {
      const XPack a = *reinterpret_cast<const XPack*>(in + q * V);
      XPack oa;
#pragma unroll
      for (int j = 0; j < W; ++j) {
        const kernels::RopePair<M> v =
            kernels::rope_pair(kernels::to_opmath(a.v[2 * j]), kernels::to_opmath(a.v[2 * j + 1]),
                               kernels::to_opmath(cp.v[j]), kernels::to_opmath(sp.v[j]));
        oa.v[2 * j] = kernels::from_opmath<T>(v.a);
        oa.v[2 * j + 1] = kernels::from_opmath<T>(v.b);
      }
      *reinterpret_cast<XPack*>(o + q * V) = oa;
    } else {
      const XPack a = *reinterpret_cast<const XPack*>(in + q * V);
      const XPack b = *reinterpret_cast<const XPack*>(in + r.half + q * V);
      XPack oa, ob;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const kernels::RopePair<M> v = kernels::rope_pair(kernels::to_opmath(a.v[j]), kernels::to_opmath(b.v[j]),
                                                          kernels::to_opmath(cp.v[j]), kernels::to_opmath(sp.v[j]));
        oa.v[j] = kernels::from_opmath<T>(v.a);
        ob.v[j] = kernels::from_opmath<T>(v.b);
      }
      *reinterpret_cast<XPack*>(o + q * V) = oa;
      *reinterpret_cast<XPack*>(o + r.half + q * V) = ob;
    }
  }
}

template <typename I>
RopeRows<I> rope_rows(const Layout& l, bool thd) {
  RopeRows<I> r{};
  for (int k = 0; k < 3; ++k) {
    r.dims[k] = static_cast<I>(l.dim(k));
    r.strides[k] = static_cast<I>(l.stride(k));
  }
  r.offset = static_cast<I>(l.offset());
  r.count = static_cast<I>(l.dim(0) * l.dim(1) * l.dim(2));
  r.d = static_cast<I>(l.dim(3));
  r.half = r.d / 2;
  r.x_stride = static_cast<I>(l.stride(3));
  r.pos_dim = thd ? 1 : 2;
  return r;
}

template <typename T, typename I>
RopeTable<T, I> rope_table(const View& v) {
  return {static_cast<const T*>(v.storage.data()) + v.layout.offset(), static_cast<I>(v.layout.stride(0)),
          static_cast<I>(v.layout.stride(1))};
}

// Whether the pack kernel can read x by packs of V elements and the tables by packs of W.
bool packs_fit(const View& x, const View& cos, const View& sin, const void* out, int v, int w, bool interleaved) {
  const Layout& l = x.layout;
  const int64_t size = dtype_size(x.dtype), d = l.dim(3);
  if (l.stride(3) != 1 || (interleaved ? d : d / 2) % v != 0 || !aligned(out, 16) ||
      !aligned(static_cast<const char*>(x.storage.data()) + l.offset() * size, 16))
    return false;
  for (int k = 0; k < 3; ++k)
    if (l.dim(k) != 1 && l.stride(k) % v != 0) return false;
  for (const View* t : {&cos, &sin}) {
    const Layout& tl = t->layout;
    if ((tl.dim(0) != 1 && tl.stride(0) % w != 0) || (tl.dim(1) != 1 && tl.stride(1) != 1) ||
        !aligned(static_cast<const char*>(t->storage.data()) + tl.offset() * size, static_cast<size_t>(w * size)))
      return false;
  }
  return true;
}

// Every offset the kernels form (x's, the output's, the tables') within 32-bit indexing.
bool fits_int32(const View& x, const View& cos, const View& sin) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  return x.layout.numel() <= kMax && x.layout.extent() <= kMax && cos.layout.extent() <= kMax &&
         sin.layout.extent() <= kMax;
}

}  // namespace

StoragePtr GpuNnKernels::rope(const View& x, const View& cos, const View& sin, RopePairs pairs, bool thd) const {
  GpuBackend& b = backend_;
  b.activate();
  StoragePtr out = b.alloc(x.dtype, x.layout.numel());
  if (x.layout.numel() == 0) return out;
  const bool interleaved = pairs == RopePairs::Interleaved;
  dispatch(x.dtype, [&]<typename T>() {
    if constexpr (kernels::is_float_v<T> && sizeof(T) > 1) {
      constexpr int V = 16 / sizeof(T);
      const T* px = static_cast<const T*>(x.storage.data());
      T* po = out->as<T>();
      const bool packs = packs_fit(x, cos, sin, po, V, interleaved ? V / 2 : V, interleaved);
      const auto go = [&]<typename I>() {
        const RopeRows<I> r = rope_rows<I>(x.layout, thd);
        const RopeTable<T, I> c = rope_table<T, I>(cos), s = rope_table<T, I>(sin);
        if (!packs) {
          rope_kernel<T, I><<<grid_for(x.layout.numel() / 2), kBlock, 0, b.stream()>>>(r, px, c, s, interleaved, po);
        } else if (interleaved) {
          rope_packs_kernel<T, V, true, I><<<grid_for(x.layout.numel() / V), kBlock, 0, b.stream()>>>(r, px, c, s, po);
        } else {
          rope_packs_kernel<T, V, false, I>
              <<<grid_for(x.layout.numel() / (2 * V)), kBlock, 0, b.stream()>>>(r, px, c, s, po);
        }
      };
      if (fits_int32(x, cos, sin))
        go.template operator()<uint32_t>();
      else
        go.template operator()<uint64_t>();
      WICK_GPU_CHECK_LAUNCH();
    } else {
      throw_not_supported(b, thd ? NnOp::RopeThd : interleaved ? NnOp::RopeI : NnOp::Rope, x.dtype);
    }
  });
  return out;
}

}  // namespace wick::gpu
