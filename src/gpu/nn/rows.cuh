// The fast path of the nn kernels over the last dim: dense rows of f32, f16 or bf16 held in
// registers. A group of G threads takes a row; its thread `lane` loads the 16-byte packs lane,
// lane + G, ..., lane + (N - 1) G of it once, so the input is read once and the output written
// once (the traffic of a copy), where the kernels of slices.cuh read a row twice. Rows up to
// kMaxPacks packs per thread x 1024 threads take this path (32768 f32 or 65536 half elements);
// longer ones, strided ones and f64 take the slice kernels.
#pragma once

#include <cstdint>
#include <algorithm>
#include <limits>
#include <optional>
#include <tuple>

#include "gpu/elementwise.cuh"
#include "gpu/nn/slices.cuh"
#include "kernels/numeric.h"

namespace wick::gpu::nn {

inline constexpr int kMaxPacks = 8;  // packs a thread holds: 8 x 16 bytes, 32 registers

// The rows of a contiguous x (each `len` elements) and the group that suits them.
struct RowPlan {
  int64_t rows;
  int64_t len;
  int group;  // 32 (a logical warp, several rows per block), 256, 512 or 1024 (a block per row)
  int packs;  // per thread: 1, 2 or 4 for a warp, 1 to 8 for 256 threads, 8 beyond
};

// Null where x is not a dense run of rows whose length is a whole number of 16-byte packs, at a
// 16-byte aligned address, short enough to be held, of a half or f32 dtype.
std::optional<RowPlan> plan_rows(const View& x);

// Whether a norm's weight or bias (1-D, of the row's length) can be read pack by pack.
bool dense_param(const View& p);

// The packs of one row a thread holds, raw (4 registers a pack whatever the dtype).
template <typename T, int G, int N>
struct RowPacks {
  static constexpr int V = 16 / static_cast<int>(sizeof(T));
  using M = kernels::opmath_t<T>;
  Pack<T, V> p[N];
  int count;  // packs in the row

  __device__ static bool held(int k, int count) { return lane<G>() + k * G < count; }

  __device__ void load(const T* row, int len) {
    count = len / V;
#pragma unroll
    for (int k = 0; k < N; ++k)
      if (held(k, count)) p[k] = reinterpret_cast<const Pack<T, V>*>(row)[lane<G>() + k * G];
  }

  // Calls f(value, element index) for every element held.
  template <typename F>
  __device__ void each(const F& f) const {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      if (!held(k, count)) continue;
#pragma unroll
      for (int j = 0; j < V; ++j) f(kernels::to_opmath(p[k].v[j]), (lane<G>() + k * G) * V + j);
    }
  }

  // out[i] = f(value i, pack of extra[i]...) for every element held; `extra` are rows of the same
  // length read pack by pack beside the held values (a norm's weight and bias).
  template <typename F, typename... E>
  __device__ void store(T* row, const F& f, const E*... extra) const {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      if (!held(k, count)) continue;
      const int at = at_of(k);
      const auto packs = std::make_tuple(reinterpret_cast<const Pack<E, V>*>(extra)[at]...);
      Pack<T, V> o;
#pragma unroll
      for (int j = 0; j < V; ++j)
        o.v[j] = std::apply([&](const auto&... e) { return kernels::from_opmath<T>(f(kernels::to_opmath(p[k].v[j]),
                                                                                   kernels::to_opmath(e.v[j])...)); },
                            packs);
      reinterpret_cast<Pack<T, V>*>(row)[at] = o;
    }
  }

  // store's form for an extra row held already (loaded with the input, before the row's sums: a
  // norm's weight then costs no second trip to memory after the reduction).
  template <typename F>
  __device__ void store_held(T* row, const F& f, const RowPacks& extra) const {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      if (!held(k, count)) continue;
      Pack<T, V> o;
#pragma unroll
      for (int j = 0; j < V; ++j)
        o.v[j] = kernels::from_opmath<T>(f(kernels::to_opmath(p[k].v[j]), kernels::to_opmath(extra.p[k].v[j])));
      reinterpret_cast<Pack<T, V>*>(row)[at_of(k)] = o;
    }
  }

  __device__ static int at_of(int k) { return lane<G>() + k * G; }
};

// The block size of a launch with groups of G threads.
template <int G>
inline constexpr int kRowBlock = G > kBlock ? G : kBlock;

// Whether a row kernel of groups of G threads holding N packs also holds its norm's weight from the
// start (RowPacks::store_held): blocks of at most 256 threads, whose registers have room for it.
template <int G, int N>
inline constexpr bool kWeightHeld = kRowBlock<G> <= 256 && N <= 4;

// The row a group takes first, and the step to its next row.
template <int G>
__device__ inline int64_t first_row() {
  return (static_cast<int64_t>(blockIdx.x) * kRowBlock<G> + threadIdx.x) / G;
}
template <int G>
__device__ inline int64_t row_step() {
  return static_cast<int64_t>(gridDim.x) * (kRowBlock<G> / G);
}

// Calls launch.template operator()<G, N>(grid, block) with the plan's group and packs.
template <typename Launch>
void launch_rows(const RowPlan& p, const Launch& launch) {
  auto go = [&]<int G, int N>() {
    constexpr int block = kRowBlock<G>;
    const int64_t blocks = (p.rows + block / G - 1) / (block / G);
    launch.template operator()<G, N>(static_cast<unsigned>(std::min<int64_t>(blocks, kMaxBlocks)), block);
  };
  switch (p.group * 16 + p.packs) {
    case 32 * 16 + 1: go.template operator()<32, 1>(); break;
    case 32 * 16 + 2: go.template operator()<32, 2>(); break;
    case 32 * 16 + 4: go.template operator()<32, 4>(); break;
    case 256 * 16 + 1: go.template operator()<256, 1>(); break;
    case 256 * 16 + 2: go.template operator()<256, 2>(); break;
    case 256 * 16 + 4: go.template operator()<256, 4>(); break;
    case 256 * 16 + 8: go.template operator()<256, 8>(); break;
    case 512 * 16 + 8: go.template operator()<512, 8>(); break;
    default: go.template operator()<1024, 8>(); break;
  }
  WICK_GPU_CHECK_LAUNCH();
}

}  // namespace wick::gpu::nn
