// rope, rope_i and rope_thd on a GPU. x is read as rows (one head at one position, d features
// each) at any strides of its first three dims; the output is contiguous. Where the rows are
// dense along d and every pointer and stride allows it, a thread takes 16-byte packs: V pairs
// (the packs at j and j + d/2 of a row) or V interleaved features, with their packs of cos and
// sin, so that x is read once and the output written once, as a copy does (the tables, of t rows
// only, stay in cache). Anything else: a thread per pair. No kernel depends on the warp size.
// rope_write_at, a decoding step's rope of q and k and its KV-cache write, is one kernel of the
// same kind over the rows of q, k and v.
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

// ---- rope_write_at --------------------------------------------------------------------------------

// A decoding step's rows: q's and k's turned, v's copied; q's to the output (b, heads, t, d), k's
// and v's to the caches (b, kv_heads, capacity, d) at the positions `at` names.
template <typename T>
struct RopeWriteArgs {
  const T *q, *k, *v;
  int64_t q_strides[4], k_strides[4], v_strides[4];  // in elements
  int64_t batch, heads, kv_heads, t, d, capacity;
  RopeTable<T, int64_t> c, s;
  const int64_t* at;
  int64_t at_stride;
  T *out, *k_cache, *v_cache;
  int64_t k_cache_strides[3], v_cache_strides[3];  // batch, head, position (features contiguous)
  int position_error;  // how a position out of range is named (runtime.h's report_position_error)
  KernelError* err;
};

// V features of a row: one 16-byte load when Packed, else V loads `stride` apart.
template <typename T, int V, bool Packed>
__device__ inline Pack<T, V> load_run(const T* p, int64_t stride) {
  if constexpr (Packed) {
    return *reinterpret_cast<const Pack<T, V>*>(p);
  } else {
    Pack<T, V> r;
#pragma unroll
    for (int e = 0; e < V; ++e) r.v[e] = p[e * stride];
    return r;
  }
}
template <typename T, int V, bool Packed>
__device__ inline void store_run(T* p, const Pack<T, V>& x) {
  if constexpr (Packed) {
    *reinterpret_cast<Pack<T, V>*>(p) = x;
  } else {
#pragma unroll
    for (int e = 0; e < V; ++e) p[e] = x.v[e];
  }
}

// A thread per item: V features of a row of v, copied; of q or k, V features turned with the V
// features d/2 further (halves) or V / 2 interleaved pairs. Every block reads every position
// before it writes: one out of range writes nothing (block 0 reports it). A position equal to
// i64's maximum is scatter_set's skip: its keys and values are not written.
template <typename T, int V, bool Interleaved, bool Packed>
__global__ __launch_bounds__(kBlock) void rope_write_kernel(RopeWriteArgs<T> a) {
  using M = kernels::opmath_t<T>;
  constexpr int64_t kSkip = std::numeric_limits<int64_t>::max();
  constexpr int W = Interleaved ? V / 2 : V;  // pairs an item turns
  start_after_inputs();
  __shared__ int bad;
  if (threadIdx.x == 0) bad = 0;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < a.t; i += blockDim.x) {
    const int64_t p = a.at[i * a.at_stride];
    if (p != kSkip && (p < 0 || p >= a.capacity)) {
      if (blockIdx.x == 0) report_position_error(a.err, a.position_error, p, a.capacity);
      bad = 1;
    }
  }
  __syncthreads();
  if (bad) return;
  const int64_t turn = (Interleaved ? a.d : a.d / 2) / V, copy = a.d / V;  // items per row
  const int64_t q_items = a.batch * a.heads * a.t * turn, k_items = a.batch * a.kv_heads * a.t * turn;
  const int64_t n = q_items + k_items + a.batch * a.kv_heads * a.t * copy;
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < n;
       w += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int part = w < q_items ? 0 : w < q_items + k_items ? 1 : 2;  // q, k, v
    const int64_t local = part == 0 ? w : part == 1 ? w - q_items : w - q_items - k_items;
    const int64_t per_row = part == 2 ? copy : turn, heads = part == 0 ? a.heads : a.kv_heads;
    const int64_t row = local / per_row, item = local - row * per_row;
    const int64_t pos = row % a.t, head = row / a.t % heads, b = row / a.t / heads;
    const int64_t* st = part == 0 ? a.q_strides : part == 1 ? a.k_strides : a.v_strides;
    const T* in = (part == 0 ? a.q : part == 1 ? a.k : a.v) + b * st[0] + head * st[1] + pos * st[2];
    const int64_t at = part == 0 ? 0 : a.at[pos * a.at_stride];
    if (at == kSkip) continue;
    const int64_t* cs = part == 1 ? a.k_cache_strides : a.v_cache_strides;
    T* o = part == 0 ? a.out + row * a.d : (part == 1 ? a.k_cache : a.v_cache) + b * cs[0] + head * cs[1] + at * cs[2];
    if (part == 2) {
      store_run<T, V, Packed>(o + item * V, load_run<T, V, Packed>(in + item * V * st[3], st[3]));
      continue;
    }
    const Pack<T, W> cp = load_run<T, W, Packed>(a.c.data + pos * a.c.stride_t + item * W * a.c.stride_i, a.c.stride_i);
    const Pack<T, W> sp = load_run<T, W, Packed>(a.s.data + pos * a.s.stride_t + item * W * a.s.stride_i, a.s.stride_i);
    const int64_t first = item * V, second = Interleaved ? first : a.d / 2 + first;
    const Pack<T, V> x = load_run<T, V, Packed>(in + first * st[3], st[3]);
    Pack<T, V> y = Interleaved ? x : load_run<T, V, Packed>(in + second * st[3], st[3]);
    Pack<T, V> ox, oy;
#pragma unroll
    for (int j = 0; j < W; ++j) {
      // Pair j: (x[2j], x[2j + 1]) interleaved, else (x[j], y[j]).
      const int ia = Interleaved ? 2 * j : j, ib = Interleaved ? 2 * j + 1 : j;
      const kernels::RopePair<M> r =
          kernels::rope_pair(kernels::to_opmath(x.v[ia]), kernels::to_opmath(Interleaved ? x.v[ib] : y.v[ib]),
                             kernels::to_opmath(cp.v[j]), kernels::to_opmath(sp.v[j]));
      ox.v[ia] = kernels::from_opmath<T>(r.a);
      (Interleaved ? ox : oy).v[ib] = kernels::from_opmath<T>(r.b);
    }
    store_run<T, V, Packed>(o + first, ox);
    if constexpr (!Interleaved) store_run<T, V, Packed>(o + second, oy);
  }
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

// KvCache's positions, checked on the device before a scatter writes them (the scatter skips
// nothing else, but would name itself in the error).
__global__ __launch_bounds__(kBlock) void check_positions_kernel(const int64_t* at, int64_t stride, int64_t t,
                                                                 int64_t capacity, bool rope, KernelError* err) {
  constexpr int64_t kSkip = std::numeric_limits<int64_t>::max();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < t; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t p = at[i * stride];
    if (p != kSkip && (p < 0 || p >= capacity))
      report_position_error(err, rope ? kPositionRope : kPositionWrite, p, capacity);
  }
}

void GpuNnKernels::check_positions(const View& at, int64_t capacity, bool rope) const {
  GpuBackend& b = backend_;
  b.activate();
  const int64_t t = at.layout.numel();
  const int64_t* p = static_cast<const int64_t*>(at.storage.data()) + at.layout.offset();
  check_positions_kernel<<<grid_for(t), kBlock, 0, b.stream()>>>(p, t > 1 ? at.layout.stride(0) : 0, t, capacity, rope,
                                                                 b.device_error());
  WICK_GPU_CHECK_LAUNCH();
}

StoragePtr GpuNnKernels::rope_write_at(const View& q, const View& k, const View& v, const View& cos, const View& sin,
                                       RopePairs pairs, const View& at, const MutView& k_cache, const MutView& v_cache,
                                       bool paged) const {
  GpuBackend& b = backend_;
  b.activate();
  StoragePtr out = b.alloc(q.dtype, q.layout.numel());
  const bool interleaved = pairs == RopePairs::Interleaved;
  dispatch(q.dtype, [&]<typename T>() {
    if constexpr (kernels::is_float_v<T> && sizeof(T) > 1) {
      constexpr int V = 16 / sizeof(T);
      RopeWriteArgs<T> a{};
      a.q = static_cast<const T*>(q.storage.data()) + q.layout.offset();
      a.k = static_cast<const T*>(k.storage.data()) + k.layout.offset();
      a.v = static_cast<const T*>(v.storage.data()) + v.layout.offset();
      for (int i = 0; i < 4; ++i) {
        a.q_strides[i] = q.layout.stride(i);
        a.k_strides[i] = k.layout.stride(i);
        a.v_strides[i] = v.layout.stride(i);
      }
      a.batch = q.layout.dim(0);
      a.heads = q.layout.dim(1);
      a.kv_heads = k.layout.dim(1);
      a.t = q.layout.dim(2);
      a.d = q.layout.dim(3);
      a.capacity = k_cache.layout.dim(2);
      a.c = rope_table<T, int64_t>(cos);
      a.s = rope_table<T, int64_t>(sin);
      a.at = static_cast<const int64_t*>(at.storage.data()) + at.layout.offset();
      a.at_stride = at.layout.numel() > 1 ? at.layout.stride(0) : 0;
      a.out = out->as<T>();
      a.k_cache = static_cast<T*>(k_cache.storage.data()) + k_cache.layout.offset();
      a.v_cache = static_cast<T*>(v_cache.storage.data()) + v_cache.layout.offset();
      bool rows_packed = true;  // every cache row starts on a whole pack
      for (int i = 0; i < 3; ++i) {
        a.k_cache_strides[i] = k_cache.layout.stride(i);
        a.v_cache_strides[i] = v_cache.layout.stride(i);
        rows_packed = rows_packed && a.k_cache_strides[i] % V == 0 && a.v_cache_strides[i] % V == 0;
      }
      a.err = b.device_error();
      a.position_error = paged ? kPositionPagedRope : kPositionRope;
      const int w = interleaved ? V / 2 : V;
      const bool packs = rows_packed && packs_fit(q, cos, sin, a.out, V, w, interleaved) &&
                         packs_fit(k, cos, sin, a.k_cache, V, w, interleaved) &&
                         packs_fit(v, cos, sin, a.v_cache, V, w, interleaved);
      const int per = packs ? V : interleaved ? 2 : 1;  // features an item reads of each run
      const int64_t rows_q = a.batch * a.heads * a.t, rows_kv = a.batch * a.kv_heads * a.t;
      const int64_t turn = (interleaved ? a.d : a.d / 2) / per;
      const unsigned grid = grid_for((rows_q + rows_kv) * turn + rows_kv * (a.d / per));
      if (packs && interleaved)
        b.launch_early(rope_write_kernel<T, V, true, true>, grid, kBlock, 0, a);
      else if (packs)
        b.launch_early(rope_write_kernel<T, V, false, true>, grid, kBlock, 0, a);
      else if (interleaved)
        b.launch_early(rope_write_kernel<T, 2, true, false>, grid, kBlock, 0, a);
      else
        b.launch_early(rope_write_kernel<T, 1, false, false>, grid, kBlock, 0, a);
    } else {
      throw_not_supported(b, NnOp::RopeWriteAt, q.dtype);
    }
  });
  return out;
}

}  // namespace wick::gpu
