// The elementwise engine of the GPU backend: out[i] = f(in[i]...) over strided operands. The host
// collapses dims (backend/strided.h) and picks one of three kernels:
//   dense   every operand contiguous: grid-stride loop over 16-byte vectors when all pointers
//           are aligned for it, one element at a time otherwise;
//   tiled   the output runs along its last dim but an input runs along another (a transpose):
//           32 x 32 tiles, that input read along its own stride-1 dim into shared memory, so
//           that both the reads and the writes coalesce;
//   strided anything else: the multi-index divided out per element.
// The tiled and strided kernels index in 32-bit arithmetic when every offset fits, 64-bit
// otherwise.
// Shapes and strides travel by value in the kernel's parameters.
#pragma once

#include <array>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "backend/backend.h"
#include "backend/strided.h"
#include "gpu/gpu_backend.h"
#include "gpu/runtime.h"

namespace wick::gpu {

// N-operand strided geometry with index type I (uint32_t or uint64_t).
template <int N, typename I>
struct StridedArgs {
  int rank;
  I shape[kMaxRank];
  I strides[N][kMaxRank];
  I offsets[N];
};

template <int N, typename I>
StridedArgs<N, I> strided_args(const StridedSpace<N>& s) {
  StridedArgs<N, I> a{};
  a.rank = s.rank;
  for (int d = 0; d < s.rank; ++d) {
    a.shape[d] = static_cast<I>(s.shape[d]);
    for (int k = 0; k < N; ++k) a.strides[k][d] = static_cast<I>(s.strides[k][d]);
  }
  for (int k = 0; k < N; ++k) a.offsets[k] = static_cast<I>(s.offsets[k]);
  return a;
}

// Element offsets of every operand at flat index i.
template <int N, typename I>
__device__ inline void offsets_at(const StridedArgs<N, I>& a, I i, I (&off)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) off[k] = a.offsets[k];
#pragma unroll
  for (int d = kMaxRank - 1; d >= 0; --d) {
    if (d >= a.rank) continue;
    const I q = i / a.shape[d];
    const I r = i - q * a.shape[d];
    i = q;
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] += r * a.strides[k][d];
  }
}

// The inputs of a kernel as untyped pointers; In... gives their types.
template <int M>
struct Inputs {
  const void* p[M > 0 ? M : 1];
};

template <typename T>
__device__ inline const T& input(const void* p, uint64_t off) {
  return static_cast<const T*>(p)[off];
}

template <typename I, typename F, typename Out, typename... In, size_t... K>
__device__ inline void map_strided_body(const F& f, Out* out, const Inputs<sizeof...(In)>& in,
                                        const StridedArgs<1 + sizeof...(In), I>& a, I n, std::index_sequence<K...>) {
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    I off[1 + sizeof...(In)];
    offsets_at(a, i, off);
    out[off[0]] = f(input<In>(in.p[K], off[K + 1])...);
  }
}

template <typename I, typename F, typename Out, typename... In>
__global__ __launch_bounds__(kBlock) void map_strided_kernel(F f, Out* out, Inputs<sizeof...(In)> in,
                                                             StridedArgs<1 + sizeof...(In), I> a, I n) {
  map_strided_body<I, F, Out, In...>(f, out, in, a, n, std::index_sequence_for<In...>{});
}

// V consecutive elements of T, loaded and stored as one access of V * sizeof(T) bytes.
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

template <int V, typename F, typename Out, typename... In, size_t... K>
__device__ inline void map_dense_body(const F& f, Out* out, const Inputs<sizeof...(In)>& in, int64_t n,
                                      std::index_sequence<K...>) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if constexpr (V > 1) {
    const int64_t packs = n / V;
    for (int64_t v = tid; v < packs; v += step) {
      const std::tuple<Pack<In, V>...> loaded{static_cast<const Pack<In, V>*>(in.p[K])[v]...};
      Pack<Out, V> o;
#pragma unroll
      for (int j = 0; j < V; ++j) o.v[j] = f(std::get<K>(loaded).v[j]...);
      reinterpret_cast<Pack<Out, V>*>(out)[v] = o;
    }
    for (int64_t i = packs * V + tid; i < n; i += step) out[i] = f(input<In>(in.p[K], i)...);
  } else {
    for (int64_t i = tid; i < n; i += step) out[i] = f(input<In>(in.p[K], i)...);
  }
}

template <int V, typename F, typename Out, typename... In>
__global__ __launch_bounds__(kBlock) void map_dense_kernel(F f, Out* out, Inputs<sizeof...(In)> in, int64_t n) {
  start_after_inputs();
  map_dense_body<V, F, Out, In...>(f, out, in, n, std::index_sequence_for<In...>{});
}

// ---- tiled: transposing maps -------------------------------------------------------------------

inline constexpr int kTile = 32;                  // a tile is kTile x kTile elements
inline constexpr int kTileRows = kBlock / kTile;  // rows of a tile one pass of the block covers

// A collapsed space with two dims singled out: `inner`, the output's stride-1 dim (the last), and
// `across`, where the staged inputs have stride 1. The remaining dims form `outer`, one point per
// tile row of the grid.
template <int N, typename I>
struct TiledArgs {
  StridedArgs<N, I> outer;
  I n_inner, n_across, n_outer;
  I inner[N], across[N];  // strides of each operand along the two dims
  I tiles_inner, tiles_across;
  unsigned staged;  // bit k: input k goes through shared memory
};

template <typename T>
struct Tile {
  T v[kTile][kTile + 1];  // one column of padding: a column read hits every bank once
};

// The shared memory of a tiled map: one Tile per input, back to back (each a multiple of 16 bytes).
template <typename... In>
constexpr size_t tiles_bytes() {
  return (sizeof(Tile<In>) + ... + size_t(0));
}
template <size_t K, typename... In>
constexpr size_t tile_offset() {
  constexpr size_t sizes[] = {sizeof(Tile<In>)..., 0};
  size_t at = 0;
  for (size_t j = 0; j + 1 <= K; ++j) at += sizes[j];
  return at;
}

template <typename I, typename F, typename Out, typename... In, size_t... K>
__device__ inline void map_tiled_body(const F& f, Out* out, const Inputs<sizeof...(In)>& in,
                                      const TiledArgs<1 + sizeof...(In), I>& a, std::index_sequence<K...>) {
  constexpr int N = 1 + sizeof...(In);
  __shared__ alignas(16) unsigned char smem[tiles_bytes<In...>() > 0 ? tiles_bytes<In...>() : 1];
  const std::tuple<Tile<In>*...> tiles{reinterpret_cast<Tile<In>*>(smem + tile_offset<K, In...>())...};
  const int tx = threadIdx.x % kTile, ty = threadIdx.x / kTile;
  const I count = a.tiles_inner * a.tiles_across * a.n_outer;
  for (I t = blockIdx.x; t < count; t += gridDim.x) {
    const I ti = t % a.tiles_inner, rest = t / a.tiles_inner;
    const I i0 = ti * kTile, a0 = rest % a.tiles_across * kTile;
    I off[N];
    offsets_at(a.outer, rest / a.tiles_across, off);
    // Staged inputs: thread x walks `across`, where they are contiguous.
    (
        [&] {
          if (!(a.staged >> K & 1u)) return;
          const I c = a0 + tx;
          for (int j = ty; j < kTile; j += kTileRows) {
            const I r = i0 + j;
            if (r < a.n_inner && c < a.n_across)
              std::get<K>(tiles)->v[j][tx] = input<In>(in.p[K], off[K + 1] + r * a.inner[K + 1] + c * a.across[K + 1]);
          }
        }(),
        ...);
    __syncthreads();
    // Outputs and the other inputs: thread x walks `inner`.
    const I r = i0 + tx;
    for (int j = ty; j < kTile; j += kTileRows) {
      const I c = a0 + j;
      if (r < a.n_inner && c < a.n_across) {
        out[off[0] + r * a.inner[0] + c * a.across[0]] =
            f((a.staged >> K & 1u ? std::get<K>(tiles)->v[tx][j]
                                  : input<In>(in.p[K], off[K + 1] + r * a.inner[K + 1] + c * a.across[K + 1]))...);
      }
    }
    __syncthreads();
  }
}

template <typename I, typename F, typename Out, typename... In>
__global__ __launch_bounds__(kBlock) void map_tiled_kernel(F f, Out* out, Inputs<sizeof...(In)> in,
                                                           TiledArgs<1 + sizeof...(In), I> a) {
  map_tiled_body<I, F, Out, In...>(f, out, in, a, std::index_sequence_for<In...>{});
}

// The `across` dim for a tiled map of s, or -1 where none pays: the output must run along the
// last dim, and some input along another dim while not along the last.
template <int N>
int tiled_across_dim(const StridedSpace<N>& s, unsigned* staged) {
  const int last = s.rank - 1;
  if (s.rank < 2 || s.strides[0][last] != 1 || s.shape[last] < kTile / 2) return -1;
  int across = -1;
  *staged = 0;
  for (int k = 1; k < N; ++k) {
    if (s.strides[k][last] == 1 || s.strides[k][last] == 0) continue;
    for (int d = 0; d < last; ++d) {
      if (s.strides[k][d] != 1 || s.shape[d] < kTile / 2 || (across >= 0 && d != across)) continue;
      across = d;
      *staged |= 1u << (k - 1);
    }
  }
  return across;
}

template <int N, typename I>
TiledArgs<N, I> tiled_args(const StridedSpace<N>& s, int across, unsigned staged) {
  const int last = s.rank - 1;
  StridedSpace<N> outer;
  outer.rank = 0;
  for (int k = 0; k < N; ++k) outer.offsets[k] = s.offsets[k];
  for (int d = 0; d < last; ++d) {
    if (d == across) continue;
    outer.shape[outer.rank] = s.shape[d];
    for (int k = 0; k < N; ++k) outer.strides[k][outer.rank] = s.strides[k][d];
    ++outer.rank;
  }
  TiledArgs<N, I> a{};
  a.outer = strided_args<N, I>(outer);
  a.n_inner = static_cast<I>(s.shape[last]);
  a.n_across = static_cast<I>(s.shape[across]);
  a.n_outer = static_cast<I>(s.numel() / (s.shape[last] * s.shape[across]));
  for (int k = 0; k < N; ++k) {
    a.inner[k] = static_cast<I>(s.strides[k][last]);
    a.across[k] = static_cast<I>(s.strides[k][across]);
  }
  a.tiles_inner = static_cast<I>((s.shape[last] + kTile - 1) / kTile);
  a.tiles_across = static_cast<I>((s.shape[across] + kTile - 1) / kTile);
  a.staged = staged;
  return a;
}

// ---- dispatch -----------------------------------------------------------------------------------

// A view as an input of map_elementwise.
template <typename T>
Operand<T> operand(const View& v) {
  return {static_cast<const T*>(v.storage.data()), &v.layout};
}

template <typename... T>
constexpr int pack_width() {
  constexpr size_t largest = std::max({sizeof(T)...});
  return static_cast<int>(16 / largest > 0 ? 16 / largest : 1);
}

inline bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// out (any layout, no self-overlap) = f(in...), every operand of out's shape, on b's stream (the
// dense kernel starting early: GpuBackend::launch_early).
template <typename F, typename Out, typename... In>
void map_elementwise(const GpuBackend& b, const F& f, Out* out, const Layout& out_layout, Operand<In>... in) {
  const Stream stream = b.stream();
  constexpr int N = 1 + sizeof...(In);
  const StridedSpace<N> s = collapse<N>(std::array<const Layout*, N>{&out_layout, in.layout...});
  const int64_t n = s.numel();
  if (n == 0) return;
  if (s.all_dense()) {
    Out* o = out + s.offsets[0];
    int k = 1;
    Inputs<sizeof...(In)> ptrs{{(in.data + s.offsets[k++])...}};
    constexpr int V = pack_width<Out, In...>();
    bool vec = V > 1 && aligned(o, sizeof(Out) * V);
    int j = 0;
    ((vec = vec && aligned(ptrs.p[j++], sizeof(In) * V)), ...);
    if (vec) {
      b.launch_early(map_dense_kernel<V, F, Out, In...>, grid_for(n / V), kBlock, 0, f, o, ptrs, n);
    } else {
      b.launch_early(map_dense_kernel<1, F, Out, In...>, grid_for(n), kBlock, 0, f, o, ptrs, n);
    }
    return;
  }
  Inputs<sizeof...(In)> ptrs{{in.data...}};
  unsigned staged = 0;
  if (const int across = tiled_across_dim(s, &staged); across >= 0) {
    const auto launch = [&]<typename I>() {
      const TiledArgs<N, I> a = tiled_args<N, I>(s, across, staged);
      const int64_t tiles = static_cast<int64_t>(a.tiles_inner) * a.tiles_across * a.n_outer;
      map_tiled_kernel<I, F, Out, In...>
          <<<static_cast<unsigned>(std::min<int64_t>(tiles, kMaxBlocks)), kBlock, 0, stream>>>(f, out, ptrs, a);
    };
    if (s.fits_int32())
      launch.template operator()<uint32_t>();
    else
      launch.template operator()<uint64_t>();
  } else {
    if (s.fits_int32()) {
      map_strided_kernel<uint32_t, F, Out, In...>
          <<<grid_for(n), kBlock, 0, stream>>>(f, out, ptrs, strided_args<N, uint32_t>(s), static_cast<uint32_t>(n));
    } else {
      map_strided_kernel<uint64_t, F, Out, In...>
          <<<grid_for(n), kBlock, 0, stream>>>(f, out, ptrs, strided_args<N, uint64_t>(s), static_cast<uint64_t>(n));
    }
  }
  WICK_GPU_CHECK_LAUNCH();
}

}  // namespace wick::gpu
