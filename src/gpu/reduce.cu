// Reductions and cumsum on the GPU, deterministic (no atomics: every output is combined by one
// group of threads in a fixed order).
//
// A group of G threads (1, a logical warp of 32, or a block of 256) reduces one output element;
// with few outputs and long reductions, each output is split into S pieces whose partial results
// a second kernel folds in order. The host picks G from the layout (backend/reduce_plan.h): dense
// reduced runs get wide groups, outputs that are neighbours in memory (column sums) get one thread
// each so that loads coalesce across threads.
#include "backend/reduce_plan.h"
#include "core/dispatch.h"
#include "gpu/elementwise.cuh"
#include "gpu/gpu_backend.h"
#include "kernels/reduce.h"

namespace wick::gpu {

namespace {

template <typename A>
__device__ inline A shuffle_down(A a, unsigned off, int width) {
  return gpu::shfl_down(a, off, width);
}

template <typename M>
__device__ inline kernels::ArgAcc<M> shuffle_down(kernels::ArgAcc<M> a, unsigned off, int width) {
  return {gpu::shfl_down(a.v, off, width), gpu::shfl_down(a.i, off, width)};
}

// Combines the accumulators of a group of G threads; lane 0 of the group ends with the result.
// Every thread of a block calls it the same number of times (G = 256 groups are whole blocks).
template <typename R, int G>
__device__ inline typename R::Acc group_reduce(typename R::Acc acc) {
  using Acc = typename R::Acc;
  constexpr int W = G < 32 ? G : 32;
#pragma unroll
  for (int off = W / 2; off > 0; off /= 2) acc = R::combine(acc, shuffle_down(acc, off, W));
  if constexpr (G > 32) {
    __shared__ Acc partial[G / 32];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();
    if (lane == 0) partial[warp] = acc;
    __syncthreads();
    if (warp == 0) {
      acc = lane < G / 32 ? partial[lane] : R::init();
#pragma unroll
      for (int off = G / 64; off > 0; off /= 2) acc = R::combine(acc, shuffle_down(acc, off, 32));
    }
  }
  return acc;
}

// The reduction's chunks start at multiples of this many elements, so that a chunk of a dense,
// aligned run starts aligned for 16-byte loads.
inline constexpr int64_t kChunkAlign = 16;

// Elements of T in a 16-byte load.
template <typename T>
constexpr int pack_of() {
  return sizeof(T) >= 16 ? 1 : static_cast<int>(16 / sizeof(T));
}

template <typename T>
__device__ inline bool aligned16(const T* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// G threads per output (one group), each output's reduction split into `splits` chunks.
template <typename R, typename T, int G, typename I>
__global__ __launch_bounds__(kBlock) void reduce_kernel(const T* x, typename R::Out* out, typename R::Acc* partial,
                                                        StridedArgs<2, I> kept, StridedArgs<1, I> red, I nout, I nred,
                                                        I splits, I chunk) {
  constexpr int V = pack_of<T>();
  const I lane = threadIdx.x % G;
  const I groups = static_cast<I>(gridDim.x) * (blockDim.x / G);
  for (I g = (static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x) / G; g < nout * splits; g += groups) {
    const I o = g % nout, s = g / nout;  // neighbouring groups take neighbouring outputs
    I koff[2];
    offsets_at(kept, o, koff);
    const I begin = s * chunk < nred ? s * chunk : nred, end = begin + chunk < nred ? begin + chunk : nred;
    typename R::Acc acc = R::init();
    const T* base = x + koff[1];
    if (red.rank == 1) {  // the common case: one reduced dim, no division per element
      const I stride = red.strides[0][0];
      I e = begin + lane;
      if (V > 1 && stride == 1 && aligned16(base + begin)) {  // a dense run: 16-byte loads
        using P = Pack<T, V>;
        const P* run = reinterpret_cast<const P*>(base + begin);
        const I packs = (end - begin) / V;
#pragma unroll 2
        for (I v = lane; v < packs; v += G) {
          const P p = run[v];
#pragma unroll
          for (int j = 0; j < V; ++j) acc = R::accumulate(acc, p.v[j], static_cast<int64_t>(begin + v * V + j));
        }
        e = begin + packs * V + lane;
      }
      for (; e < end; e += G) acc = R::accumulate(acc, base[e * stride], static_cast<int64_t>(e));
    } else {
      for (I e = begin + lane; e < end; e += G) {
        I roff[1];
        offsets_at(red, e, roff);
        acc = R::accumulate(acc, base[roff[0]], static_cast<int64_t>(e));
      }
    }
    if constexpr (G > 1) acc = group_reduce<R, G>(acc);
    if (lane == 0) {
      if (splits == 1)
        out[koff[0]] = R::finish(acc);
      else
        partial[o * splits + s] = acc;
    }
  }
}

// Outputs that are neighbours in memory with a strided reduced dim (a sum over dim 0): each thread
// keeps V neighbouring outputs and reads V inputs per step in one 16-byte load. `kept` counts
// packs of V outputs; output o * V + j is output j of pack o.
template <typename R, typename T, int V, typename I>
__global__ __launch_bounds__(kBlock) void reduce_columns_kernel(const T* x, typename R::Out* out,
                                                                typename R::Acc* partial, StridedArgs<2, I> kept,
                                                                I stride, I npacks, I nred, I splits, I chunk) {
  using P = Pack<T, V>;
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I g = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; g < npacks * splits; g += step) {
    const I o = g % npacks, s = g / npacks;  // neighbouring threads read neighbouring 16 bytes
    I koff[2];
    offsets_at(kept, o, koff);
    const I begin = s * chunk < nred ? s * chunk : nred, end = begin + chunk < nred ? begin + chunk : nred;
    typename R::Acc acc[V];
#pragma unroll
    for (int j = 0; j < V; ++j) acc[j] = R::init();
    const T* base = x + koff[1];
#pragma unroll 4
    for (I e = begin; e < end; ++e) {
      const P p = *reinterpret_cast<const P*>(base + e * stride);
#pragma unroll
      for (int j = 0; j < V; ++j) acc[j] = R::accumulate(acc[j], p.v[j], static_cast<int64_t>(e));
    }
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if (splits == 1)
        out[koff[0] + j] = R::finish(acc[j]);
      else
        partial[(o * V + j) * splits + s] = acc[j];
    }
  }
}

// Folds each output's S partial results in order.
template <typename R, typename I>
__global__ __launch_bounds__(kBlock) void reduce_partials_kernel(const typename R::Acc* partial, typename R::Out* out,
                                                                 StridedArgs<2, I> kept, I nout, I splits) {
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I o = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; o < nout; o += step) {
    typename R::Acc acc = partial[o * splits];
    for (I s = 1; s < splits; ++s) acc = R::combine(acc, partial[o * splits + s]);
    I koff[2];
    offsets_at(kept, o, koff);
    out[koff[0]] = R::finish(acc);
  }
}

// Splits of each output's reduction so that `workers` threads per output fill the device, each
// chunk (a multiple of kChunkAlign elements) long enough to be worth a thread.
int64_t split_count(int64_t nout_workers, int64_t nred, int64_t per_thread, int multiprocessors) {
  const int64_t fill = int64_t(multiprocessors) * 2048;
  if (nout_workers >= fill) return 1;
  const int64_t want = (fill + nout_workers - 1) / nout_workers;
  return std::clamp<int64_t>(std::min(want, nred / per_thread), 1, 4096);
}

int64_t chunk_of(int64_t nred, int64_t splits) {
  const int64_t c = (nred + splits - 1) / splits;
  return splits == 1 ? c : (c + kChunkAlign - 1) / kChunkAlign * kChunkAlign;
}

template <typename R, typename I>
void fold_partials(GpuBackend& b, typename R::Acc* part, typename R::Out* out, const ReducePlan& plan, int64_t splits) {
  const int64_t nout = plan.kept_numel();
  reduce_partials_kernel<R, I><<<grid_for(nout), kBlock, 0, b.stream()>>>(part, out, strided_args<2, I>(plan.kept),
                                                                          static_cast<I>(nout), static_cast<I>(splits));
  WICK_GPU_CHECK_LAUNCH();
}

template <typename R, typename T, int G, typename I>
void launch_reduce(GpuBackend& b, const T* x, typename R::Out* out, const ReducePlan& plan, int64_t splits) {
  const int64_t nout = plan.kept_numel(), nred = plan.reduced_numel();
  StoragePtr partial;
  if (splits > 1) partial = b.alloc(static_cast<size_t>(nout * splits) * sizeof(typename R::Acc));
  auto* part = splits > 1 ? partial->as<typename R::Acc>() : nullptr;
  reduce_kernel<R, T, G, I><<<grid_for(nout * splits * G), kBlock, 0, b.stream()>>>(
      x, out, part, strided_args<2, I>(plan.kept), strided_args<1, I>(plan.reduced), static_cast<I>(nout),
      static_cast<I>(nred), static_cast<I>(splits), static_cast<I>(chunk_of(nred, splits)));
  WICK_GPU_CHECK_LAUNCH();
  if (splits > 1) fold_partials<R, I>(b, part, out, plan, splits);
}

template <typename R, typename T, int G>
void launch_reduce(GpuBackend& b, const T* x, typename R::Out* out, const ReducePlan& plan, int64_t splits) {
  const bool small =
      plan.kept.fits_int32() && plan.reduced.fits_int32() && plan.kept_numel() * splits * G < (int64_t(1) << 31);
  if (small)
    launch_reduce<R, T, G, uint32_t>(b, x, out, plan, splits);
  else
    launch_reduce<R, T, G, uint64_t>(b, x, out, plan, splits);
}

// Whether the column kernel applies, with V = pack_of<T>() neighbouring outputs per thread: the kept
// space's last dim contiguous in input and output, one dim reduced, and every input stride and
// the start aligned for loads of V elements.
template <typename T>
bool columns_apply(const ReducePlan& plan, const void* data) {
  constexpr int V = pack_of<T>();
  const StridedSpace<2>& k = plan.kept;
  if (V < 2 || plan.reduced.rank != 1 || k.rank == 0) return false;
  const int last = k.rank - 1;
  bool ok = k.strides[0][last] == 1 && k.strides[1][last] == 1 && k.shape[last] % V == 0 && k.offsets[1] % V == 0 &&
            plan.reduced.strides[0][0] % V == 0 && reinterpret_cast<uintptr_t>(data) % 16 == 0;
  for (int d = 0; d < last && ok; ++d) ok = k.strides[1][d] % V == 0 && k.strides[0][d] % V == 0;
  return ok;
}

template <typename R, typename T, int V>
void launch_columns(GpuBackend& b, const T* x, typename R::Out* out, const ReducePlan& plan) {
  const int64_t nout = plan.kept_numel(), nred = plan.reduced_numel(), npacks = nout / V;
  StridedSpace<2> packs = plan.kept;
  const int last = packs.rank - 1;
  packs.shape[last] /= V;
  for (int k = 0; k < 2; ++k) packs.strides[k][last] *= V;
  const int64_t splits = split_count(npacks, nred, 64, b.props().multiprocessors);
  const int64_t chunk = chunk_of(nred, splits);
  StoragePtr partial;
  if (splits > 1) partial = b.alloc(static_cast<size_t>(nout * splits) * sizeof(typename R::Acc));
  auto* part = splits > 1 ? partial->as<typename R::Acc>() : nullptr;
  const auto launch = [&]<typename I>() {
    reduce_columns_kernel<R, T, V, I><<<grid_for(npacks * splits), kBlock, 0, b.stream()>>>(
        x, out, part, strided_args<2, I>(packs), static_cast<I>(plan.reduced.strides[0][0]), static_cast<I>(npacks),
        static_cast<I>(nred), static_cast<I>(splits), static_cast<I>(chunk));
    WICK_GPU_CHECK_LAUNCH();
    if (splits > 1) fold_partials<R, I>(b, part, out, plan, splits);
  };
  if (plan.kept.fits_int32() && plan.reduced.fits_int32() && nout * splits < (int64_t(1) << 31))
    launch.template operator()<uint32_t>();
  else
    launch.template operator()<uint64_t>();
}

}  // namespace

StoragePtr GpuBackend::reduce(ReduceOp op, const View& x, std::span<const int> dims) {
  activate();
  const ReducePlan plan = make_reduce_plan(x.layout, dims);
  const bool arg = op == ReduceOp::ArgMin || op == ReduceOp::ArgMax;
  StoragePtr out = alloc(arg ? DType::U32 : x.dtype, plan.out_shape.numel());
  const int64_t nout = plan.kept_numel(), nred = plan.reduced_numel();
  if (nout == 0) return out;
  // Group size: wide groups for dense runs, one thread per output where outputs are neighbours.
  const bool dense_runs = plan.reduced.dense(0);
  const int group = dense_runs ? (nred >= 4096 ? 256 : nred >= 64 ? 32 : 1) : 1;
  const int64_t splits = split_count(nout * group, nred, group * 16, props_.multiprocessors);
  dispatch(x.dtype, [&]<typename T>() {
    kernels::dispatch_reduce<T>(op, [&]<typename R>() {
      const T* in = static_cast<const T*>(x.storage.data());
      auto* o = static_cast<typename R::Out*>(out->data());
      if (group == 1 && columns_apply<T>(plan, in))
        launch_columns<R, T, pack_of<T>()>(*this, in, o, plan);
      else if (group == 256)
        launch_reduce<R, T, 256>(*this, in, o, plan, splits);
      else if (group == 32)
        launch_reduce<R, T, 32>(*this, in, o, plan, splits);
      else
        launch_reduce<R, T, 1>(*this, in, o, plan, splits);
    });
  });
  return out;
}

namespace {

// One thread per line along dim, in order: the same sums, in the same order, as the CPU.
template <typename T, typename I>
__global__ __launch_bounds__(kBlock) void cumsum_kernel(const T* x, T* out, StridedArgs<2, I> lines, I nlines, I len,
                                                        I xs, I os) {
  using Acc = kernels::sum_acc_t<T>;
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I l = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; l < nlines; l += step) {
    I off[2];
    offsets_at(lines, l, off);
    Acc acc = Acc(0);
    for (I i = 0; i < len; ++i) {
      acc += kernels::to_acc<Acc>(x[off[1] + i * xs]);
      if constexpr (kernels::is_float_v<T>)
        out[off[0] + i * os] = kernels::from_opmath<T>(acc);
      else
        out[off[0] + i * os] = static_cast<T>(acc);
    }
  }
}

}  // namespace

StoragePtr GpuBackend::cumsum(const View& x, int dim) {
  activate();
  const Layout& xl = x.layout;
  StoragePtr out = alloc(x.dtype, xl.numel());
  const int64_t len = xl.dim(dim);
  if (xl.numel() == 0) return out;
  const Strides out_strides = contiguous_strides(xl.shape());
  const Layout line_x = xl.narrow(dim, 0, 1), line_out = Layout(xl.shape(), out_strides, 0).narrow(dim, 0, 1);
  const StridedSpace<2> lines = collapse<2>({&line_out, &line_x});
  const int64_t nlines = lines.numel();
  const bool small = lines.fits_int32() && xl.extent() < (int64_t(1) << 31) && xl.numel() < (int64_t(1) << 31);
  dispatch(x.dtype, [&]<typename T>() {
    const T* in = static_cast<const T*>(x.storage.data());
    if (small) {
      cumsum_kernel<T, uint32_t><<<grid_for(nlines), kBlock, 0, stream_>>>(
          in, out->as<T>(), strided_args<2, uint32_t>(lines), static_cast<uint32_t>(nlines), static_cast<uint32_t>(len),
          static_cast<uint32_t>(xl.stride(dim)), static_cast<uint32_t>(out_strides[dim]));
    } else {
      cumsum_kernel<T, uint64_t><<<grid_for(nlines), kBlock, 0, stream_>>>(
          in, out->as<T>(), strided_args<2, uint64_t>(lines), static_cast<uint64_t>(nlines), static_cast<uint64_t>(len),
          static_cast<uint64_t>(xl.stride(dim)), static_cast<uint64_t>(out_strides[dim]));
    }
    WICK_GPU_CHECK_LAUNCH();
  });
  return out;
}

}  // namespace wick::gpu
