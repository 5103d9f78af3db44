// The slices the nn kernels work on (every position of x but `dim`, each a run along dim), and the
// groups of threads that take one slice each: G = 1 (one thread; neighbouring threads take
// neighbouring slices, so that a strided reduced dim still reads coalesced), a logical warp of 32,
// or a block of 256 for long rows. A group combines its threads' accumulators in a fixed order and
// every thread ends with the result; logical warps of 32 behave alike on 32- and 64-wide hardware.
#pragma once

#include <cstdint>

#include "gpu/elementwise.cuh"
#include "gpu/gpu_backend.h"

namespace wick::gpu::nn {

// Where the slices are and how each is walked. Operand 0 of `starts` is the output (contiguous),
// operand 1 the input; element i of a slice is at start + i * stride.
template <typename I>
struct Slices {
  StridedArgs<2, I> starts;
  I count;       // slices
  I len;         // elements per slice
  I x_stride;    // of the input along dim
  I out_stride;  // of the output along dim
};

// The host's view of the slices of x along dim, and the group size that suits them.
struct SlicePlan {
  StridedSpace<2> starts;
  int64_t count, len, x_stride, out_stride;
  int group;
  bool small;  // every offset fits 32-bit indexing
};

SlicePlan plan_slices(const View& x, int dim);

template <typename I>
Slices<I> slices_args(const SlicePlan& p) {
  return {strided_args<2, I>(p.starts), static_cast<I>(p.count), static_cast<I>(p.len), static_cast<I>(p.x_stride),
          static_cast<I>(p.out_stride)};
}

// Calls launch.template operator()<G, I>(grid, slices) with the plan's group size G and index
// type I, for a launch of one group per slice; the caller launches its kernel<T, G, I> there.
template <typename Launch>
void launch_slices(const SlicePlan& p, const Launch& launch) {
  auto go = [&]<int G>() {
    const unsigned grid = grid_for(p.count * G);
    if (p.small)
      launch.template operator()<G, uint32_t>(grid, slices_args<uint32_t>(p));
    else
      launch.template operator()<G, uint64_t>(grid, slices_args<uint64_t>(p));
  };
  if (p.group == 256)
    go.template operator()<256>();
  else if (p.group == 32)
    go.template operator()<32>();
  else
    go.template operator()<1>();
  WICK_GPU_CHECK_LAUNCH();
}

// The slice a group takes in each round, and the thread's lane in its group. Every thread of a
// group sees the same slices; with G = 256 the whole block does, so __syncthreads is safe inside.
template <int G, typename I>
__device__ inline I first_slice() {
  return (static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x) / G;
}
template <int G, typename I>
__device__ inline I slice_step() {
  return static_cast<I>(gridDim.x) * (blockDim.x / G);
}
template <int G>
__device__ inline int lane() {
  return static_cast<int>(threadIdx.x % G);
}

// Combines one value per thread over the group; every thread gets the same bits. Shuffle(a, mask,
// width) exchanges an accumulator between lanes. The butterfly pairs neighbours first and always
// calls combine(lower lane's, upper lane's), so every lane builds the same tree: Combine need not
// be commutative. Beyond a warp (G > 32, G the block size), each warp's result goes through shared
// memory and every warp combines the G / 32 of them the same way.
template <int W, typename A, typename Shuffle, typename Combine>
__device__ inline A butterfly(A a, int lane, const Shuffle& shuffle, const Combine& combine) {
#pragma unroll
  for (int mask = 1; mask < W; mask *= 2) {
    const A other = shuffle(a, mask, W);
    a = lane & mask ? combine(other, a) : combine(a, other);
  }
  return a;
}

template <int G, typename A, typename Shuffle, typename Combine>
__device__ inline A group_all(A a, const Shuffle& shuffle, const Combine& combine) {
  constexpr int W = G < 32 ? G : 32;
  a = butterfly<W>(a, static_cast<int>(threadIdx.x % W), shuffle, combine);
  if constexpr (G > 32) {
    constexpr int P = G / 32;
    __shared__ A partial[P];
    __syncthreads();  // the previous round's reads of `partial` are done
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = a;
    __syncthreads();
    const int lane = static_cast<int>(threadIdx.x % P);
    a = butterfly<P>(partial[lane], lane, shuffle, combine);
  }
  return a;
}

// A plain number's shuffle.
struct ShuffleValue {
  template <typename M>
  __device__ M operator()(M v, int mask, int width) const {
    return shfl_xor(v, mask, width);
  }
};

}  // namespace wick::gpu::nn
