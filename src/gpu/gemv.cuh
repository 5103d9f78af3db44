// A few rows times a weight's transpose, as a model's linear layers decode: the body of
// gpu/matmul.cu's product of a few rows and of nn::matmul_grouped's (gpu/nn/moe.cu), each of whose
// blocks takes the rows of one group's expert.
#pragma once

#include <algorithm>
#include <cstdint>

#include "gpu/elementwise.cuh"
#include "gpu/gpu_backend.h"
#include "kernels/numeric.h"

namespace wick::gpu::gemv {

// rows_times_weight: out (rows, n) = x (rows, k) times w (n, k) transposed, rows <= kMaxRows, x's
// rows and w's rows contiguous and 16-byte aligned. Each group of 32 lanes takes kR rows of w and
// walks its share of k (all of it, or a part where the groups of a block split k) in 16-byte
// words, 4 words per row in flight per lane (2 past 2 rows of x); x's words come through the cache
// (every group reads the same x). Sums in f32, as the BLAS's products of halves.
constexpr int kMaxRows = 8;
constexpr int kLanes = 32;  // a group of lanes: a warp on NVIDIA, half a wave on AMD's wave64 parts
constexpr int kR = 2;
constexpr int kGroups = kBlock / kLanes;  // of a block

// The 16-byte words the kernel reads: Pack (elementwise.cuh) of 4 f32 or 8 halves.
template <typename T>
using Word = Pack<T, 16 / static_cast<int>(sizeof(T))>;

// The passes of block `block` of `blocks` over n (a grid-stride loop: whole blocks take each
// kGroups / splits * kR rows, so barriers are uniform).
template <typename T, int M>
__device__ __forceinline__ void rows_times_weight(const T* __restrict__ x, int64_t ldx, int rows,
                                                  const T* __restrict__ w, int64_t ldw, int64_t n, int64_t k,
                                                  int splits, T* __restrict__ out, int64_t block, int64_t blocks) {
  constexpr int kV = 16 / static_cast<int>(sizeof(T));
  constexpr int kUnroll = M <= 2 ? 4 : 2;
  __shared__ float partial[kGroups][kR][M];
  const int lane = static_cast<int>(threadIdx.x % kLanes), group = static_cast<int>(threadIdx.x / kLanes);
  // The block's groups: kGroups / splits sets of kR rows, each set's k split over `splits` groups.
  const int split = group % splits, set = group / splits;
  const int rows_per_block = kGroups / splits * kR;
  const int64_t words = k / kV, step = int64_t{kLanes} * kUnroll;  // words a group reads per row and pass
  // Whole blocks take each rows_per_block rows (a grid-stride loop), so barriers are uniform.
  for (int64_t block_first = block * rows_per_block; block_first < n; block_first += blocks * rows_per_block) {
    const int64_t first = block_first + int64_t{set} * kR;
    float acc[kR][M] = {};
    for (int64_t base = split * step + lane; base < words; base += step * splits) {
      Word<T> wv[kUnroll][kR];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t word = base + int64_t{u} * kLanes;
#pragma unroll
        for (int r = 0; r < kR; ++r) {
          const int64_t row = first + r < n ? first + r : block_first;  // a missing row re-reads one present
          wv[u][r] = word < words ? reinterpret_cast<const Word<T>*>(w + row * ldw)[word] : Word<T>{};
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t word = base + int64_t{u} * kLanes;
        if (word >= words) break;
        float wf[kR][kV];  // widened once, used by every row of x
#pragma unroll
        for (int r = 0; r < kR; ++r)
#pragma unroll
          for (int i = 0; i < kV; ++i) wf[r][i] = kernels::to_opmath(wv[u][r].v[i]);
#pragma unroll
        for (int t = 0; t < M; ++t) {
          if (t < rows) {
            const Word<T> xv = reinterpret_cast<const Word<T>*>(x + t * ldx)[word];
#pragma unroll
            for (int r = 0; r < kR; ++r)
#pragma unroll
              for (int i = 0; i < kV; ++i) acc[r][t] = fmaf(wf[r][i], kernels::to_opmath(xv.v[i]), acc[r][t]);
          }
        }
      }
    }
    // Each group's sums over its lanes, then over the groups of its set.
#pragma unroll
    for (int r = 0; r < kR; ++r)
#pragma unroll
      for (int t = 0; t < M; ++t) {
        float v = acc[r][t];
#pragma unroll
        for (int mask = kLanes / 2; mask > 0; mask /= 2) v += shfl_xor(v, mask, kLanes);
        if (lane == 0) partial[group][r][t] = v;
      }
    __syncthreads();
    if (static_cast<int>(threadIdx.x) < rows_per_block * M) {
      const int local = static_cast<int>(threadIdx.x) / M, t = static_cast<int>(threadIdx.x) % M;
      const int s0 = local / kR * splits, r = local % kR;
      float v = 0.f;
      for (int i = 0; i < splits; ++i) v += partial[s0 + i][r][t];
      const int64_t row = block_first + local;
      if (t < rows && row < n) out[t * n + row] = kernels::from_opmath<T>(v);
    }
    __syncthreads();  // partial is read before the next rows write it
  }
}

// How a product of n weight rows is laid out, one of `parts` launched together
// (nn::matmul_grouped's groups): k split over `splits` groups of a block (1, 2, 4 or 8: the fewest
// that give the device 4 blocks per multiprocessor over the parts, so that a weight of few rows,
// 4096 x 14336, still has enough loads in flight) and `blocks` blocks a part.
struct Plan {
  int splits;
  unsigned blocks;
};
inline Plan plan_for(const GpuBackend& backend, int64_t n, int64_t parts = 1) {
  const int64_t enough = (4 * int64_t{backend.props().multiprocessors} + parts - 1) / parts;
  int splits = 1;
  while (splits < kGroups && (n + kGroups / splits * kR - 1) / (kGroups / splits * kR) < enough) splits *= 2;
  const int64_t rows_per_block = kGroups / splits * kR;
  return {splits, static_cast<unsigned>(std::min<int64_t>((n + rows_per_block - 1) / rows_per_block, kMaxBlocks))};
}

// f.template operator()<M>() for the fewest of 1, 2, 4 and 8 rows of x that hold m.
template <typename F>
void by_rows(int m, F&& f) {
  if (m <= 1)
    f.template operator()<1>();
  else if (m == 2)
    f.template operator()<2>();
  else if (m <= 4)
    f.template operator()<4>();
  else
    f.template operator()<8>();
}

}  // namespace wick::gpu::gemv
