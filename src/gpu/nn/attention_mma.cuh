// The matrix-unit attention kernel for f16 and bf16 (flash style). A block takes BM query rows of
// one (batch, key head): the rows of every query head of its GQA group, so that the group reads
// each key and value once (when decoding, the group's heads are the block's rows). The rows wait
// in shared memory; the keys and values the block may see stream through shared memory BN at a
// time: the next key tile is copied while P V is computed, the value tile while S = Q K^T and its
// softmax are (the first key and value tiles together). Each wave owns MT 16-row tiles of S and of
// the output accumulator, in registers; the online softmax keeps a running maximum and sum per
// row. When the blocks of rows alone would leave the device idle (decoding), the keys are split
// into ranges, one block each, whose unnormalised outputs a second kernel combines (flash
// decoding). Memory: O(BM + BN) rows of shared memory, never a t_q x t_kv score tensor. Written
// against gpu/mma.cuh only, so the same source runs on 32- and 64-lane waves.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "gpu/elementwise.cuh"
#include "gpu/gpu_backend.h"
#include "gpu/mma.cuh"
#include "gpu/nn/attention.cuh"
#include "kernels/nn.h"

namespace wick::gpu::nn {

struct MmaParams {
  float scale_log2;    // scale * log2(e): scores are taken to base 2 by one rounded product
  float cap_in, cap_out;  // soft-capping (0: none): a score s becomes tanh(s * cap_in) * cap_out, to base 2
  float log2e;         // a mask value joins a base-2 score as mask * log2(e)
  int64_t rows_kv;     // query rows per key head: group * t_q (row r is head r / t_q, query r % t_q)
  int64_t m_blocks;    // blocks of BM rows per (batch, key head)
  int64_t splits;      // key ranges per block of rows (1: the block writes the output)
  int64_t split_keys;  // keys per range, a multiple of BN
  int64_t out_rows;    // rows of the output, batch * heads * t_q
  float* part_o;       // splits > 1: (splits, out_rows, d) unnormalised outputs
  float* part_ml;      // (splits, out_rows, 2): each range's base-2 maximum and sum
};

// Where each of a block's rows lives, in shared memory beside the tiles: its offset in q (-1 for
// a row past rows_kv), its output row, its position among the keys and its offset in the mask.
struct MmaRow {
  int64_t q, out, pos, mask;
};

// A tile shape: D features (the head dim rounded up to one of these, a multiple of 16), W waves
// of MT 16-row tiles each, BN keys per step.
template <int D_, int MT_, int W_, int BN_>
struct MmaTile {
  static constexpr int D = D_, MT = MT_, W = W_, BN = BN_;
  static constexpr int BM = W * MT * 16;
  // Shared rows padded by 16 bytes: the 8 rows an ldmatrix reads start in 8 distinct bank groups.
  static constexpr int kLd = D + 8;
  template <typename T>
  static constexpr size_t smem_bytes() {
    return size_t(BM + 2 * BN) * kLd * sizeof(T) + BM * sizeof(MmaRow);
  }
};

using Chunk = Pack<uint32_t, 4>;  // 16 bytes

// ROWS rows of a (rows, d) matrix starting at `src` (strides row_stride, d_stride) into a shared
// tile of ROWS x (D + 8); rows from `rows` on and features past d become zeros. THREADS threads
// share the copy in chunks of 16 bytes. When rows are whole and dense, each thread keeps one
// column of chunks and walks down the tile, unrolled: a pointer increment per chunk.
template <typename T, int ROWS, int D, int THREADS>
__device__ inline void load_tile(T* tile, const T* src, int64_t rows, int64_t row_stride, int64_t d_stride, int64_t d,
                                 bool vec) {
  constexpr int kChunks = D / 8;
  if constexpr (THREADS % kChunks == 0) {
    if (vec && d == D) {
      constexpr int kStep = THREADS / kChunks;
      const int r0 = static_cast<int>(threadIdx.x) / kChunks, c = static_cast<int>(threadIdx.x) % kChunks;
      const int present = static_cast<int>(std::min<int64_t>(rows, ROWS));
      const T* from = src + r0 * row_stride + c * 8;
      T* dst = tile + r0 * (D + 8) + c * 8;
      const int64_t from_step = kStep * row_stride;
#pragma unroll
      for (int i = 0; i < (ROWS + kStep - 1) / kStep; ++i, from += from_step, dst += kStep * (D + 8)) {
        const int r = r0 + i * kStep;
        if (ROWS % kStep != 0 && r >= ROWS) break;
        if (r < present)
          mma::copy_async_16(dst, from);
        else
          *reinterpret_cast<Chunk*>(dst) = Chunk{};
      }
      return;
    }
  }
#pragma unroll 1
  for (int idx = static_cast<int>(threadIdx.x); idx < ROWS * kChunks; idx += THREADS) {
    const int r = idx / kChunks, c = idx % kChunks;
    T* dst = tile + r * (D + 8) + c * 8;
    if (r < rows && c * 8 < d) {
      const T* from = src + r * row_stride + c * 8 * d_stride;
      if (vec) {
        mma::copy_async_16(dst, from);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) dst[e] = c * 8 + e < d ? from[e * d_stride] : T{};
      }
    } else {
      *reinterpret_cast<Chunk*>(dst) = Chunk{};
    }
  }
}

// A distance in positions, clamped into 32 bits: tiles are far shorter than kFar.
inline constexpr int kFar = 1 << 30;
__device__ inline int near_int(int64_t x) { return static_cast<int>(x < -kFar ? -kFar : x > kFar ? kFar : x); }

// Whether accumulator element e is the first of its row slot (mma.cuh): a loop over the elements
// that skips the others visits each of the lane's rows once.
__host__ __device__ constexpr bool first_in_slot(int e) {
  for (int j = 0; j < e; ++j)
    if (mma::accum_slot(j) == mma::accum_slot(e)) return false;
  return true;
}

// What a query row at position `pos` sees of the key tile starting at k0: key k0 + c is seen when
// c <= diag (causal) and c > low (window), besides c < the keys left. Distances from the tile,
// clamped into 32 bits (a tile spans far fewer than kFar keys).
struct RowLimits {
  int diag, low;
  __device__ bool sees(int c, int to_end) const { return c < to_end && c <= diag && c > low; }
};

__device__ inline RowLimits row_limits(int64_t pos, int64_t k0, const AttentionGeom& g) {
  const int64_t rel = pos - k0;
  return {g.causal ? near_int(rel) : kFar, g.window <= 0 || rel < g.window - kFar ? -kFar : near_int(rel - g.window)};
}

template <typename T>
__device__ inline float mask_value(T x) {
  if constexpr (std::is_same_v<T, f16>)
    return mma::f16_to_float(x.bits);
  else
    return static_cast<float>(x);
}

// Fills the block's row table (rows gr0 .. gr0 + BM - 1 of key head kvh of batch b) and copies
// its queries into the shared tile `sq` (zeros past rows_kv and d).
template <typename T, typename Tile>
__device__ inline void load_rows(MmaRow* rows, T* sq, const AttentionGeom& g, const MmaParams& p, int64_t b,
                                 int64_t kvh, int64_t gr0) {
  constexpr int BM = Tile::BM, kChunks = Tile::D / 8, kThreads = Tile::W * mma::kWave;
  for (int r = static_cast<int>(threadIdx.x); r < BM; r += kThreads) {
    const int64_t gr = gr0 + r, head = kvh * g.group + gr / g.t_q, i = gr % g.t_q;
    const bool valid = gr < p.rows_kv;
    rows[r].q = valid ? b * g.q_stride[0] + head * g.q_stride[1] + i * g.q_stride[2] : -1;
    rows[r].out = (b * g.heads + head) * g.t_q + i;
    rows[r].pos = kernels::attention_position(i, g.t_q, g.t_kv);
    rows[r].mask = b * g.mask_stride[0] + head * g.mask_stride[1] + i * g.mask_stride[2];
  }
  __syncthreads();
  const T* q = static_cast<const T*>(g.q);
#pragma unroll 1
  for (int idx = static_cast<int>(threadIdx.x); idx < BM * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = idx % kChunks;
    T* dst = sq + r * Tile::kLd + c * 8;
    if (rows[r].q >= 0 && c * 8 < g.d) {
      const T* from = q + rows[r].q + c * 8 * g.q_stride[3];
      if (g.vec_q) {
        mma::copy_async_16(dst, from);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) dst[e] = c * 8 + e < g.d ? from[e * g.q_stride[3]] : T{};
      }
    } else {
      *reinterpret_cast<Chunk*>(dst) = Chunk{};
    }
  }
}

// ---- a decoding step fused in front (RopeWriteGeom) ----------------------------------------------

// What each thread holds of the step: pairs j = thread, thread + threads, ... of the new key and of
// the value's features at the same places, the rope's angle of each pair, and the position.
template <typename T, typename Tile>
struct StepRow {
  static constexpr int kThreads = Tile::W * mma::kWave;
  static constexpr int kPairs = (Tile::D / 2 + kThreads - 1) / kThreads;
  T k[kPairs][2], v[kPairs][2], cos[kPairs], sin[kPairs];
  int64_t pos;

  __device__ void load(const AttentionGeom& g, const RopeWriteGeom& rw, int64_t b, int64_t kvh) {
    const T* kn = static_cast<const T*>(rw.k) + b * rw.k_stride[0] + kvh * rw.k_stride[1];
    const T* vn = static_cast<const T*>(rw.v) + b * rw.v_stride[0] + kvh * rw.v_stride[1];
    const int64_t half = g.d / 2;
    pos = *rw.at;
#pragma unroll
    for (int i = 0; i < kPairs; ++i) {
      const int64_t j = threadIdx.x + int64_t{i} * kThreads;
      if (j >= half) break;
      const int64_t a = kernels::rope_first(j, rw.interleaved), c = kernels::rope_second(j, half, rw.interleaved);
      k[i][0] = kn[a * rw.k_stride[3]];
      k[i][1] = kn[c * rw.k_stride[3]];
      v[i][0] = vn[a * rw.v_stride[3]];
      v[i][1] = vn[c * rw.v_stride[3]];
      cos[i] = static_cast<const T*>(rw.cos)[j * rw.cos_stride];
      sin[i] = static_cast<const T*>(rw.sin)[j * rw.sin_stride];
    }
  }

  // Pair i turned, with rope_write_at's arithmetic (the same bits).
  __device__ void turn(int i, T& a, T& c) const {
    const kernels::RopePair<float> r = kernels::rope_pair(kernels::to_opmath(a), kernels::to_opmath(c),
                                                          kernels::to_opmath(cos[i]), kernels::to_opmath(sin[i]));
    a = kernels::from_opmath<T>(r.a);
    c = kernels::from_opmath<T>(r.b);
  }

  // The block's first `valid` query rows, landed in sq, turned in place: a batch of rows at a time
  // (eight pairs a thread), every load of a batch issued before the first is used.
  __device__ void turn_rows(const AttentionGeom& g, const RopeWriteGeom& rw, T* sq, int valid) const {
    constexpr int kBatch = kPairs >= 4 ? 1 : 8 / kPairs;
    const int64_t half = g.d / 2;
    for (int r0 = 0; r0 < valid; r0 += kBatch) {
      T x[kBatch][kPairs][2];
      // f(r, i, row, a, c) for row r of the batch and the thread's pair i (features a and c).
      auto each = [&](auto&& f) {
#pragma unroll
        for (int r = 0; r < kBatch; ++r)
#pragma unroll
          for (int i = 0; i < kPairs; ++i) {
            const int64_t j = threadIdx.x + int64_t{i} * kThreads;
            if (r0 + r < valid && j < half)
              f(r, i, sq + (r0 + r) * Tile::kLd, kernels::rope_first(j, rw.interleaved),
                kernels::rope_second(j, half, rw.interleaved));
          }
      };
      each([&](int r, int i, const T* row, int64_t a, int64_t c) {
        x[r][i][0] = row[a];
        x[r][i][1] = row[c];
      });
      each([&](int r, int i, T* row, int64_t a, int64_t c) {
        turn(i, x[r][i][0], x[r][i][1]);
        row[a] = x[r][i][0];
        row[c] = x[r][i][1];
      });
    }
  }

  // The new key turned and the value written into the caches at pos and staged in `staged` (two
  // rows of the tile's shape: key, value), by the block whose key range holds pos (the last
  // range's when pos is past the keys). A position out of range writes nothing and is reported
  // once; i64's maximum is skipped. Returns whether this block wrote.
  __device__ bool write(const AttentionGeom& g, const MmaParams& p, const RopeWriteGeom& rw, int64_t b, int64_t kvh,
                        int64_t split, T* staged) {
    constexpr int64_t kSkip = std::numeric_limits<int64_t>::max();
    if (pos == kSkip) return false;
    if (pos < 0 || pos >= rw.capacity) {
      if (blockIdx.x == 0 && threadIdx.x == 0) report_position_error(rw.err, rw.position_error, pos, rw.capacity);
      return false;
    }
    if (split != std::min(pos / p.split_keys, p.splits - 1)) return false;
    T* kc = static_cast<T*>(rw.k_cache) + b * g.k_stride[0] + kvh * g.k_stride[1] + pos * g.k_stride[2];
    T* vc = static_cast<T*>(rw.v_cache) + b * g.v_stride[0] + kvh * g.v_stride[1] + pos * g.v_stride[2];
    const int64_t half = g.d / 2;
#pragma unroll
    for (int i = 0; i < kPairs; ++i) {
      const int64_t j = threadIdx.x + int64_t{i} * kThreads;
      if (j >= half) break;
      const int64_t a = kernels::rope_first(j, rw.interleaved), c = kernels::rope_second(j, half, rw.interleaved);
      turn(i, k[i][0], k[i][1]);
      kc[a * g.k_stride[3]] = staged[a] = k[i][0];
      kc[c * g.k_stride[3]] = staged[c] = k[i][1];
      vc[a * g.v_stride[3]] = staged[Tile::kLd + a] = v[i][0];
      vc[c * g.v_stride[3]] = staged[Tile::kLd + c] = v[i][1];
    }
    return true;
  }
};

// Row `row` of a shared tile takes the staged row (the key or the value the block wrote): the
// tile was copied from the cache while the write was in flight.
template <typename T, typename Tile>
__device__ inline void patch_row(T* tile, int64_t row, const T* staged, int64_t d) {
  for (int64_t f = threadIdx.x; f < d; f += Tile::W * mma::kWave) tile[row * Tile::kLd + f] = staged[f];
}

// ---- the kernel ----------------------------------------------------------------------------------

// kRope: the decoding step of `rw` too. Its loads are in flight beside the block's first copies; the
// queries are turned once they land; the block whose keys hold the new position writes the new key
// and value to the caches and stages them in shared memory (past the value tile), and patches them
// into its tiles, which were copied from the caches before the write.
template <typename T, typename Tile, bool kRope>
__global__ __launch_bounds__(Tile::W* mma::kWave) void attention_mma_kernel(AttentionGeom g, MmaParams p,
                                                                            RopeWriteGeom rw) {
#if WICK_GPU_MMA
  constexpr int D = Tile::D, MT = Tile::MT, BN = Tile::BN, BM = Tile::BM, kLd = Tile::kLd;
  constexpr int ND = D / 16, NN = BN / 16, kSlots = mma::kRowSlots, kThreads = Tile::W * mma::kWave;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  extern __shared__ Chunk attention_smem[];
  MmaRow* rows = reinterpret_cast<MmaRow*>(attention_smem);
  T* sq = reinterpret_cast<T*>(rows + BM);
  T* sk = sq + BM * kLd;
  T* sv = sk + BN * kLd;
  const int row_base = static_cast<int>(threadIdx.x) / mma::kWave * MT * 16;  // the wave's first row
  start_after_inputs();
  const T* k_all = static_cast<const T*>(g.k);
  const T* v_all = static_cast<const T*>(g.v);
  const T* mask = static_cast<const T*>(g.mask);
  const int64_t bkv_count = g.batch * g.kv_heads;
  const int64_t total = p.splits * p.m_blocks * bkv_count;

  for (int64_t blk = blockIdx.x; blk < total; blk += gridDim.x) {
    // Blocks of the last rows first: under a causal mask they see the most keys.
    const int64_t split = blk % p.splits, rest = blk / p.splits;
    const int64_t mb = p.m_blocks - 1 - rest / bkv_count, bkv = rest % bkv_count;
    const int64_t b = bkv / g.kv_heads, kvh = bkv % g.kv_heads;
    const int64_t gr0 = mb * BM, gr1 = std::min(gr0 + BM, p.rows_kv) - 1;
    // The positions the block's rows take: a range of one head's queries, or every query when the
    // rows reach into the next head.
    const bool one_head = gr0 / g.t_q == gr1 / g.t_q;
    const int64_t first = kernels::attention_position(one_head ? gr0 % g.t_q : 0, g.t_q, g.t_kv);
    const int64_t last = kernels::attention_position(one_head ? gr1 % g.t_q : g.t_q - 1, g.t_q, g.t_kv);
    const int64_t key_lo = std::max(kernels::attention_keys_begin(first, g.window), split * p.split_keys);
    const int64_t key_hi = std::min(kernels::attention_keys_end(last, g.causal, g.t_kv), (split + 1) * p.split_keys);
    const T* kb = k_all + b * g.k_stride[0] + kvh * g.k_stride[1];
    const T* vb = v_all + b * g.v_stride[0] + kvh * g.v_stride[1];

    // The step's loads first, so that their trips to memory overlap the copies below; after the
    // copies where its rows take many registers (head dims past 128, whose kernels hold 250).
    [[maybe_unused]] StepRow<T, Tile> step;
    constexpr bool kStepFirst = StepRow<T, Tile>::kPairs <= 2;
    if constexpr (kRope && kStepFirst) step.load(g, rw, b, kvh);
    __syncthreads();  // the last block is done with the row table and sq
    load_rows<T, Tile>(rows, sq, g, p, b, kvh, gr0);
    mma::copy_async_commit();
    const int64_t tile_first = key_lo / BN;
    const int64_t tiles = key_hi > key_lo ? (key_hi + BN - 1) / BN - tile_first : 0;
    if (tiles > 0) {  // the first K and V tiles at once: a decoding block may have only one
      const int64_t k0 = tile_first * BN;
      load_tile<T, BN, D, kThreads>(sk, kb + k0 * g.k_stride[2], g.t_kv - k0, g.k_stride[2], g.k_stride[3], g.d,
                                    g.vec_k);
      load_tile<T, BN, D, kThreads>(sv, vb + k0 * g.v_stride[2], g.t_kv - k0, g.v_stride[2], g.v_stride[3], g.d,
                                    g.vec_v);
      mma::copy_async_commit();
    }
    // The new position's row in the block's tiles (-1: none).
    int64_t patch = -1;
    if constexpr (kRope) {
      if constexpr (!kStepFirst) step.load(g, rw, b, kvh);
      if (tiles > 0)  // the queries have landed; the tiles may still be in flight
        mma::copy_async_wait<1>();
      else
        mma::copy_async_wait_all();
      __syncthreads();
      // Before any wave reads them: the steps below wait at a barrier first.
      step.turn_rows(g, rw, sq, static_cast<int>(std::min<int64_t>(p.rows_kv - gr0, BM)));
      if (step.write(g, p, rw, b, kvh, split, sv + BN * kLd) && step.pos >= key_lo && step.pos < key_hi)
        patch = step.pos;
    }

    mma::FragC o[MT][ND];
    float m[MT][kSlots], l[MT][kSlots];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int nd = 0; nd < ND; ++nd) mma::zero(o[mt][nd]);
#pragma unroll
      for (int sl = 0; sl < kSlots; ++sl) {
        m[mt][sl] = kNegInf;
        l[mt][sl] = 0.f;
      }
    }

    for (int64_t jt = 0; jt < tiles; ++jt) {
      const int64_t k0 = (tile_first + jt) * BN;
      mma::copy_async_wait_all();  // K (and, first time, Q and V) has landed
      __syncthreads();             // ... for every thread; every wave is done with the last V
      const bool patched = kRope && patch >= k0 && patch < k0 + BN;
      if (patched) {
        patch_row<T, Tile>(sk, patch - k0, sv + BN * kLd, g.d);
        __syncthreads();
      }
      if (jt > 0) {
        load_tile<T, BN, D, kThreads>(sv, vb + k0 * g.v_stride[2], g.t_kv - k0, g.v_stride[2], g.v_stride[3], g.d,
                                      g.vec_v);
        mma::copy_async_commit();
      }

      // S = Q K^T.
      mma::FragC s[MT][NN];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NN; ++nt) mma::zero(s[mt][nt]);
#pragma unroll
      for (int kk = 0; kk < ND; ++kk) {
        mma::FragA<T> qa[MT];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) mma::load_a(qa[mt], sq + (row_base + mt * 16) * kLd + kk * 16, kLd);
#pragma unroll
        for (int nt = 0; nt < NN; ++nt) {
          mma::FragB<T> kf;
          mma::load_b_nk(kf, sk + nt * 16 * kLd + kk * 16, kLd);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) mma::mma(s[mt][nt], qa[mt], kf);
        }
      }

      // Scores to base 2: x * scale * log2(e), one rounded product (never contracted into a later
      // subtraction), so that the row's maximum gives exactly 2^0 and every other key 2^(<= 0),
      // however large the scores are.
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NN; ++nt)
#pragma unroll
          for (int e = 0; e < mma::kAccum; ++e)
            s[mt][nt].v[e] =
                p.cap_out > 0 ? tanhf(s[mt][nt].v[e] * p.cap_in) * p.cap_out : __fmul_rn(s[mt][nt].v[e], p.scale_log2);

      // Hidden keys become -inf; the mask joins as mask * log2(e). Tiles inside every row's range
      // (no mask, no end of the keys, no diagonal or window edge) skip this.
      const bool inside =
          !mask && k0 + BN <= g.t_kv && (!g.causal || k0 + BN - 1 <= first) && (g.window <= 0 || k0 > last - g.window);
      if (!inside) {
        const int to_end = near_int(g.t_kv - k0);
        if constexpr (MT == 1) {
          // One 16-row tile a wave (decoding): each of the lane's rows once, then every mask value
          // of the tile loaded before any is used (0 where none is read).
          RowLimits lim[kSlots];
          const T* mask_row[kSlots] = {};  // null: no mask, or not a query row
#pragma unroll
          for (int e = 0; e < mma::kAccum; ++e) {
            if (!first_in_slot(e)) continue;
            const MmaRow& row = rows[row_base + mma::accum_row(e)];
            lim[mma::accum_slot(e)] = row_limits(row.pos, k0, g);
            if (mask && row.q >= 0) mask_row[mma::accum_slot(e)] = mask + row.mask + k0 * g.mask_stride[3];
          }
          float added[NN][mma::kAccum] = {};
          if (mask) {
#pragma unroll
            for (int nt = 0; nt < NN; ++nt)
#pragma unroll
              for (int e = 0; e < mma::kAccum; ++e) {
                const int c = nt * 16 + mma::accum_col(e), sl = mma::accum_slot(e);
                if (mask_row[sl] && lim[sl].sees(c, to_end))
                  added[nt][e] = mask_value(mask_row[sl][c * g.mask_stride[3]]);
              }
          }
#pragma unroll
          for (int nt = 0; nt < NN; ++nt)
#pragma unroll
            for (int e = 0; e < mma::kAccum; ++e)
              s[0][nt].v[e] = lim[mma::accum_slot(e)].sees(nt * 16 + mma::accum_col(e), to_end)
                                  ? fmaf(added[nt][e], p.log2e, s[0][nt].v[e])
                                  : kNegInf;
        } else {
          // Two 16-row tiles a wave (prefill): element by element, each element's row read again
          // from shared memory, which holds fewer registers.
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int e = 0; e < mma::kAccum; ++e) {
              const MmaRow& row = rows[row_base + mt * 16 + mma::accum_row(e)];
              const RowLimits lim = row_limits(row.pos, k0, g);
#pragma unroll
              for (int nt = 0; nt < NN; ++nt) {
                const int c = nt * 16 + mma::accum_col(e);
                const bool seen = lim.sees(c, to_end);
                float x = s[mt][nt].v[e];
                if (mask && seen && row.q >= 0)
                  x = fmaf(mask_value(mask[row.mask + (k0 + c) * g.mask_stride[3]]), p.log2e, x);
                s[mt][nt].v[e] = seen ? x : kNegInf;
              }
            }
        }
      }

      // Online softmax: new maxima, rescale what was accumulated, then P = 2^(S - max). While a row
      // has seen nothing its maximum is -inf; the base 0 then keeps every step finite.
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        float mx[kSlots], base[kSlots], corr[kSlots];
#pragma unroll
        for (int sl = 0; sl < kSlots; ++sl) mx[sl] = kNegInf;
#pragma unroll
        for (int nt = 0; nt < NN; ++nt)
#pragma unroll
          for (int e = 0; e < mma::kAccum; ++e) mx[mma::accum_slot(e)] = fmaxf(mx[mma::accum_slot(e)], s[mt][nt].v[e]);
#pragma unroll
        for (int sl = 0; sl < kSlots; ++sl) {
          const float m_new = fmaxf(m[mt][sl], mma::row_max(mx[sl]));
          base[sl] = m_new == kNegInf ? 0.f : m_new;
          corr[sl] = mma::exp2_fast(m[mt][sl] - base[sl]);  // 0 while m was -inf
          m[mt][sl] = m_new;
          l[mt][sl] *= corr[sl];
        }
#pragma unroll
        for (int nd = 0; nd < ND; ++nd)
#pragma unroll
          for (int e = 0; e < mma::kAccum; ++e) o[mt][nd].v[e] *= corr[mma::accum_slot(e)];
#pragma unroll
        for (int nt = 0; nt < NN; ++nt)
#pragma unroll
          for (int e = 0; e < mma::kAccum; ++e) {
            const float pr = mma::exp2_fast(s[mt][nt].v[e] - base[mma::accum_slot(e)]);
            s[mt][nt].v[e] = pr;
            l[mt][mma::accum_slot(e)] += pr;
          }
      }

      mma::copy_async_wait_all();  // V has landed
      __syncthreads();             // ... for every thread; every wave is done with K
      if (patched) {
        patch_row<T, Tile>(sv, patch - k0, sv + (BN + 1) * kLd, g.d);
        __syncthreads();
      }
      if (jt + 1 < tiles) {
        load_tile<T, BN, D, kThreads>(sk, kb + (k0 + BN) * g.k_stride[2], g.t_kv - k0 - BN, g.k_stride[2],
                                      g.k_stride[3], g.d, g.vec_k);
        mma::copy_async_commit();
      }

      // O += P V.
#pragma unroll
      for (int kt = 0; kt < NN; ++kt) {
        mma::FragA<T> pa[MT];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) pa[mt] = mma::to_a<T>(s[mt][kt]);
#pragma unroll
        for (int nd = 0; nd < ND; ++nd) {
          mma::FragB<T> vf;
          mma::load_b_kn(vf, sv + kt * 16 * kLd + nd * 16, kLd);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) mma::mma(o[mt][nd], pa[mt], vf);
        }
      }
    }

    mma::copy_async_wait_all();
    __syncthreads();  // every wave is done with sq

    if (p.splits > 1) {
      // A key range: its unnormalised output, maximum and sum, for attention_combine. Each wave
      // stages its 16-row tiles one at a time in its own rows of shared memory (floats, over the
      // tiles the block is done with), then writes the tile's query rows as 16-byte words.
      constexpr int kStageLd = D + 4;  // floats: the lanes' columns spread over the banks
      static_assert(Tile::W * 16 * kStageLd * sizeof(float) <= size_t(BM + 2 * BN) * kLd * sizeof(T),
                    "a wave's staged tile must fit in the tiles' shared memory");
      float* stage = reinterpret_cast<float*>(sq) + row_base / MT * kStageLd;
      const int lane = mma::lane_id();
      const int64_t part = split * p.out_rows;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        float sum[kSlots];
#pragma unroll
        for (int sl = 0; sl < kSlots; ++sl) sum[sl] = mma::row_sum(l[mt][sl]);
#pragma unroll
        for (int e = 0; e < mma::kAccum; ++e) {
#pragma unroll
          for (int nd = 0; nd < ND; ++nd)
            stage[mma::accum_row(e) * kStageLd + nd * 16 + mma::accum_col(e)] = o[mt][nd].v[e];
          const MmaRow& row = rows[row_base + mt * 16 + mma::accum_row(e)];
          if (mma::accum_col(e) == 0 && row.q >= 0) {
            p.part_ml[(part + row.out) * 2] = m[mt][mma::accum_slot(e)];
            p.part_ml[(part + row.out) * 2 + 1] = sum[mma::accum_slot(e)];
          }
        }
        __syncthreads();  // the stage is written (every wave walks the same tiles)
        // The tile's query rows are its first n (rows past rows_kv come last).
        const int first = row_base + mt * 16;
        const int n = static_cast<int>(std::clamp<int64_t>(p.rows_kv - gr0 - first, 0, 16));
        if (g.d % 4 == 0) {
          constexpr int kWords = D / 4;
          for (int idx = lane; idx < n * kWords; idx += mma::kWave) {
            const int r = idx / kWords, c = idx % kWords;
            if (c * 4 < g.d)
              *reinterpret_cast<float4*>(p.part_o + (part + rows[first + r].out) * g.d + c * 4) =
                  *reinterpret_cast<const float4*>(stage + r * kStageLd + c * 4);
          }
        } else {
          for (int idx = lane; idx < n * D; idx += mma::kWave) {
            const int r = idx / D, c = idx % D;
            if (c < g.d) p.part_o[(part + rows[first + r].out) * g.d + c] = stage[r * kStageLd + c];
          }
        }
        __syncthreads();  // the stage is read before the next tile is written
      }
      continue;
    }

    // O / sum (zeros for a row that saw nothing), staged in the wave's own rows of sq.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      float inv[kSlots];
#pragma unroll
      for (int sl = 0; sl < kSlots; ++sl) {
        const float sum = mma::row_sum(l[mt][sl]);
        inv[sl] = sum == 0.f ? 0.f : 1.f / sum;
      }
#pragma unroll
      for (int nd = 0; nd < ND; ++nd)
#pragma unroll
        for (int e = 0; e < mma::kAccum; ++e)
          sq[(row_base + mt * 16 + mma::accum_row(e)) * kLd + nd * 16 + mma::accum_col(e)] =
              mma::round_to<T>(o[mt][nd].v[e] * inv[mma::accum_slot(e)]);
    }
    __syncthreads();
    constexpr int kChunks = D / 8;
    T* out = static_cast<T*>(g.out);
    for (int idx = static_cast<int>(threadIdx.x); idx < BM * kChunks; idx += kThreads) {
      const int r = idx / kChunks, c = idx % kChunks;
      const int64_t f = int64_t(c) * 8;
      if (rows[r].q < 0 || f >= g.d) continue;
      const T* src = sq + r * kLd + c * 8;
      T* dst = out + rows[r].out * g.d + f;
      if (g.vec_out) {
        *reinterpret_cast<Chunk*>(dst) = *reinterpret_cast<const Chunk*>(src);
      } else {
        for (int e = 0; e < 8 && f + e < g.d; ++e) dst[e] = src[e];
      }
    }
  }
#else
  (void)g;
  (void)p;
  (void)rw;
#endif
}

// Queues the kernel with tile shape Tile if the device gives its shared memory: the rows of each
// key head in blocks of BM, the keys split into ranges when those blocks alone would leave the
// device idle.
template <typename T, typename Tile, bool kRope = false>
bool launch_mma_tile(const AttentionGeom& g, GpuBackend& backend, const RopeWriteGeom* rope = nullptr) {
  const DeviceProps& props = backend.props();
  // kRope: two more rows, the new key and value (StepRow::write).
  const size_t smem = Tile::template smem_bytes<T>() + (kRope ? 2 * Tile::kLd * sizeof(T) : 0);
  if (smem > std::max(props.shared_per_block, props.shared_per_block_optin)) return false;
  const auto kernel = attention_mma_kernel<T, Tile, kRope>;
  const int threads = Tile::W * props.warp_size;
  if (smem > props.shared_per_block)
    WICK_GPU_CHECK(kernel_set_shared_limit(reinterpret_cast<const void*>(kernel), static_cast<int>(smem)));
  const int per_sm = backend.blocks_per_sm(reinterpret_cast<const void*>(kernel), threads, smem);
  MmaParams p{};
  p.scale_log2 = static_cast<float>(g.scale * 1.4426950408889634);
  // Soft-capped: softcap * tanh(s * scale / softcap), to base 2.
  p.cap_in = g.softcap > 0 ? static_cast<float>(g.scale / g.softcap) : 0.f;
  p.cap_out = g.softcap > 0 ? static_cast<float>(g.softcap * 1.4426950408889634) : 0.f;
  p.log2e = 1.4426950408889634f;
  p.rows_kv = g.group * g.t_q;
  p.m_blocks = (p.rows_kv + Tile::BM - 1) / Tile::BM;
  p.out_rows = g.batch * g.heads * g.t_q;
  const int64_t base = p.m_blocks * g.batch * g.kv_heads;
  const int64_t capacity = int64_t(per_sm) * std::max(1, props.multiprocessors);
  const int64_t splits = base < capacity ? attention_splits(base, g.t_kv, capacity, Tile::BN) : 1;
  p.split_keys = (g.t_kv + splits - 1) / splits;
  p.split_keys = (p.split_keys + Tile::BN - 1) / Tile::BN * Tile::BN;
  p.splits = (g.t_kv + p.split_keys - 1) / p.split_keys;
  StoragePtr part;
  if (p.splits > 1) {
    const int64_t o_elems = p.splits * p.out_rows * g.d;
    part = backend.alloc(static_cast<size_t>(o_elems + p.splits * p.out_rows * 2) * sizeof(float));
    p.part_o = part->as<float>();
    p.part_ml = p.part_o + o_elems;
  }
  const int64_t blocks = p.splits * base;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(blocks, int64_t(1) << 22));
  backend.launch_early(kernel, grid, threads, smem, g, p, rope != nullptr ? *rope : RopeWriteGeom{});
  if (p.splits > 1)
    launch_attention_combine<T>(p.part_o, p.part_ml, static_cast<T*>(g.out), p.out_rows, g.d, p.splits,
                                /*base2=*/true, backend);
  return true;
}

// Head dims up to 128, prefill: blocks of 128 rows, two 16-row tiles a wave, so that every K and V
// fragment read from shared memory serves 32 rows; 64 takes 128 keys a step, to halve the steps'
// fixed costs. 256: one tile a wave (its accumulator is twice as wide), eight waves. Decoding (a
// key head's rows fit 16): one wave of one tile, the keys split across blocks in ranges of 32 keys
// or more (up to head dim 128), so that each block's one wave has little to do in sequence: at 256
// keys of Llama 3 8B's shape a call took 10.2 us in a recorded step against 12.6 with ranges of 64
// and 9.4 with 16, which was slower at long contexts (bench/decode_ops.cpp). Smaller tiles where
// shared memory is short (64 KiB on AMD).
template <typename T, bool kRope>
bool launch_decode_tile(const AttentionGeom& g, GpuBackend& backend, const RopeWriteGeom* rope) {
  if (g.d <= 64) return launch_mma_tile<T, MmaTile<64, 1, 1, 32>, kRope>(g, backend, rope);
  if (g.d <= 80) return launch_mma_tile<T, MmaTile<80, 1, 1, 32>, kRope>(g, backend, rope);
  if (g.d <= 96) return launch_mma_tile<T, MmaTile<96, 1, 1, 32>, kRope>(g, backend, rope);
  if (g.d <= 128) return launch_mma_tile<T, MmaTile<128, 1, 1, 32>, kRope>(g, backend, rope);
  if (g.d <= 256)
    return launch_mma_tile<T, MmaTile<256, 1, 1, 64>, kRope>(g, backend, rope) ||
           launch_mma_tile<T, MmaTile<256, 1, 1, 32>, kRope>(g, backend, rope);
  return false;
}

template <typename T>
bool launch_attention_mma(const AttentionGeom& g, GpuBackend& backend, const RopeWriteGeom* rope) {
  if (rope != nullptr) return g.t_q == 1 && g.group <= 16 && launch_decode_tile<T, true>(g, backend, rope);
  if (g.group * g.t_q <= 16) return launch_decode_tile<T, false>(g, backend, nullptr);
  if (g.d <= 64)
    return launch_mma_tile<T, MmaTile<64, 2, 4, 128>>(g, backend) ||
           launch_mma_tile<T, MmaTile<64, 2, 4, 64>>(g, backend);
  if (g.d <= 80) return launch_mma_tile<T, MmaTile<80, 2, 4, 64>>(g, backend);
  if (g.d <= 96) return launch_mma_tile<T, MmaTile<96, 2, 4, 64>>(g, backend);
  if (g.d <= 128)
    return launch_mma_tile<T, MmaTile<128, 2, 4, 64>>(g, backend) ||
           launch_mma_tile<T, MmaTile<128, 2, 4, 32>>(g, backend);
  if (g.d <= 256)
    return launch_mma_tile<T, MmaTile<256, 1, 8, 64>>(g, backend) ||
           launch_mma_tile<T, MmaTile<256, 1, 2, 32>>(g, backend);
  return false;
}

}  // namespace wick::gpu::nn
