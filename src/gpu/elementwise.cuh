// The elementwise engine of the GPU backend: out[i] = f(in[i]...) over strided operands. The host
// collapses dims (backend/strided.h) and picks one of two kernels:
//   dense   every operand contiguous: grid-stride loop over 16-byte vectors when all pointers
//           are aligned for it, one element at a time otherwise;
//   strided anything else: the multi-index divided out per element, in 32-bit arithmetic when
//           every offset fits and 64-bit otherwise.
// Shapes and strides travel by value in the kernel's parameters.
#pragma once

#include <array>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "backend/strided.h"
#include "gpu/runtime.h"

namespace wick::gpu {

// A typed operand: element 0 of its storage, and the layout over it.
template <typename T>
struct Operand {
  const T* data;
  const Layout* layout;
};

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
  map_dense_body<V, F, Out, In...>(f, out, in, n, std::index_sequence_for<In...>{});
}

template <typename... T>
constexpr int pack_width() {
  constexpr size_t largest = std::max({sizeof(T)...});
  return static_cast<int>(16 / largest > 0 ? 16 / largest : 1);
}

inline bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// out (any layout, no self-overlap) = f(in...), every operand of out's shape.
template <typename F, typename Out, typename... In>
void map_elementwise(Stream stream, const F& f, Out* out, const Layout& out_layout, Operand<In>... in) {
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
      map_dense_kernel<V, F, Out, In...><<<grid_for(n / V), kBlock, 0, stream>>>(f, o, ptrs, n);
    } else {
      map_dense_kernel<1, F, Out, In...><<<grid_for(n), kBlock, 0, stream>>>(f, o, ptrs, n);
    }
  } else {
    Inputs<sizeof...(In)> ptrs{{in.data...}};
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
