// What attention's rows kernels share: attention.cu's over keys in a tensor and paged_attention.cu's
// over a pool's blocks. A block of kRowsBlock threads is kRowGroups groups of kRowLanes lanes; the
// groups take keys in turn, a key's row of features spread over a group's lanes, 16 bytes (a pack)
// per lane and load. Each lane holds its packs of every query row the block takes and of their
// outputs in registers (RowsState), each group keeps its own online softmax per row, and at the end
// the groups' states meet in shared memory (RowsState::merge). Nothing depends on the warp or wave
// size: a group's lanes sum by shuffles within the group.
#pragma once

#include <cstdint>
#include <type_traits>

#include "gpu/elementwise.cuh"
#include "gpu/mma.cuh"
#include "kernels/nn.h"
#include "kernels/numeric.h"

namespace wick::gpu::nn {

inline constexpr int kRowsBlock = 128;
inline constexpr int kRowLanes = 16;  // lanes of the group that takes one key
inline constexpr int kRowGroups = kRowsBlock / kRowLanes;

template <typename T>
inline constexpr int kPackElems = 16 / static_cast<int>(sizeof(T));

template <typename T>
__device__ inline kernels::opmath_t<T> load_math(T x) {
  if constexpr (std::is_same_v<T, f16>)
    return mma::f16_to_float(x.bits);
  else
    return kernels::to_opmath(x);
}

// The state of R query rows in one lane: P packs of E features of each row's output, and each row's
// running maximum and sum (those of the lane's group: every lane of a group holds the same).
template <typename T, int R, int P>
struct RowsState {
  using M = kernels::opmath_t<T>;
  static constexpr int E = kPackElems<T>;
  static constexpr int F = kRowLanes * P * E;  // features a group covers
  M mx[R], sum[R], o[R][P][E];

  __device__ RowsState() {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      mx[r] = kernels::attention_neg_inf<M>();
      sum[r] = M(0);
#pragma unroll
      for (int pk = 0; pk < P; ++pk)
#pragma unroll
        for (int e = 0; e < E; ++e) o[r][pk][e] = M(0);
    }
  }

  // A key's packs in the math type.
  __device__ static void unpack(const Pack<T, E> (&p)[P], M (&f)[P][E]) {
#pragma unroll
    for (int pk = 0; pk < P; ++pk)
#pragma unroll
      for (int e = 0; e < E; ++e) f[pk][e] = load_math(p[pk].v[e]);
  }

  // The dot product of a query row and a key, summed over the group's lanes (every lane gets it).
  __device__ static M dot(const M (&q)[P][E], const M (&k)[P][E]) {
    M acc = M(0);
#pragma unroll
    for (int pk = 0; pk < P; ++pk)
#pragma unroll
      for (int e = 0; e < E; ++e) acc = kernels::attention_fma(q[pk][e], k[pk][e], acc);
#pragma unroll
    for (int off = kRowLanes / 2; off > 0; off /= 2) acc += shfl_xor(acc, off, kRowLanes);
    return acc;
  }

  // Folds C keys into every row: s[r][c] the scaled scores (-inf where row r does not see key c;
  // overwritten by their weights), vp the keys' values.
  template <int C>
  __device__ void fold(M (&s)[R][C], const Pack<T, E> (&vp)[C][P]) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      M m_new = mx[r];
#pragma unroll
      for (int c = 0; c < C; ++c) m_new = s[r][c] > m_new ? s[r][c] : m_new;
      const M corr = kernels::attention_rescale(mx[r], m_new);
      M added = M(0);
#pragma unroll
      for (int c = 0; c < C; ++c) {
        s[r][c] = kernels::attention_weight(s[r][c], m_new);
        added += s[r][c];
      }
      sum[r] = sum[r] * corr + added;
      mx[r] = m_new;
#pragma unroll
      for (int pk = 0; pk < P; ++pk)
#pragma unroll
        for (int e = 0; e < E; ++e) o[r][pk][e] *= corr;
    }
#pragma unroll
    for (int c = 0; c < C; ++c) {
      M vf[P][E];
      unpack(vp[c], vf);
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int pk = 0; pk < P; ++pk)
#pragma unroll
          for (int e = 0; e < E; ++e) o[r][pk][e] = kernels::attention_fma(s[r][c], vf[pk][e], o[r][pk][e]);
    }
  }

  // Merges the block's groups, each rescaled to the block's maximum of its row, and calls
  // emit(r, feature, acc, max, sum) once per row r in `rows` (a bit per row) and feature below d,
  // spread over the block's threads: acc the unnormalised output, max and sum the row's. Every
  // thread of the block calls it (two barriers inside); the caller orders any later reuse.
  template <typename Emit>
  __device__ void merge(int grp, int lane, unsigned rows, int64_t d, Emit&& emit) const {
    __shared__ M sh_max[kRowGroups][R], sh_sum[kRowGroups][R];
    __shared__ M sh_o[kRowGroups][R][F];
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        sh_max[grp][r] = mx[r];
        sh_sum[grp][r] = sum[r];
      }
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < R; ++r) {
      M block_max = kernels::attention_neg_inf<M>();
      for (int gi = 0; gi < kRowGroups; ++gi) block_max = sh_max[gi][r] > block_max ? sh_max[gi][r] : block_max;
      const M f = kernels::attention_rescale(mx[r], block_max);
#pragma unroll
      for (int pk = 0; pk < P; ++pk)
#pragma unroll
        for (int e = 0; e < E; ++e) sh_o[grp][r][(lane + pk * kRowLanes) * E + e] = o[r][pk][e] * f;
    }
    __syncthreads();
    for (int idx = static_cast<int>(threadIdx.x); idx < R * F; idx += kRowsBlock) {
      const int r = idx / F, feat = idx % F;
      if (!(rows >> r & 1u) || feat >= d) continue;
      M block_max = kernels::attention_neg_inf<M>();
      for (int gi = 0; gi < kRowGroups; ++gi) block_max = sh_max[gi][r] > block_max ? sh_max[gi][r] : block_max;
      M total_sum = M(0), acc = M(0);
      for (int gi = 0; gi < kRowGroups; ++gi) {
        total_sum += sh_sum[gi][r] * kernels::attention_rescale(sh_max[gi][r], block_max);
        acc += sh_o[gi][r][feat];
      }
      emit(r, feat, acc, block_max, total_sum);
    }
  }
};

}  // namespace wick::gpu::nn
