// Paged attention (nn::paged_attention) on a GPU, as flash decoding: a thread block takes one query
// token, one KV head, some of that head's query heads and one split of the keys the token sees, and
// walks them through its sequence's block table with an online softmax. Two kernels:
//   paged_rows_kernel, for pools of the model's dtype (f32, f16, bf16) whose rows load 16 bytes at a
//     time and head dims up to kPagedMaxPacks packs a lane: attention.cu's rows design
//     (attention_rows.cuh), each group of 16 lanes taking a few keys a step straight from the pool
//     into registers, q and the output in registers;
//   paged_attention_kernel, for the rest (Q8_0 pools, f64, unaligned rows, longer heads): a tile's
//     block numbers are read first (one trip to memory), then its keys and values are staged
//     together in shared memory in the math type (16 bytes a load where the rows allow, every load
//     of a thread in flight before the first is used, rows padded by one value so that a warp's
//     dot products read distinct banks); each (head, key) score is one thread's dot product, and
//     each (head, feature) of the output one thread's weighted sum.
// A decode step's block has one step or a few: its time is the trips to memory in a row, so there
// are three (the token's sequence and position, the keys' blocks, their keys and values).
// Where the tokens and heads alone would not fill the device (a decode step of a few sequences),
// the keys are split over more blocks, whose partial sums a second kernel combines (in
// batch-invariant mode, splits that follow from each token's own keys). Nothing
// depends on the warp or wave size; indices are checked as they are read (KernelError, raised at
// the next wait).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/dispatch.h"
#include "gpu/gpu_backend.h"
#include "gpu/nn/attention.cuh"
#include "gpu/nn/attention_rows.cuh"
#include "gpu/nn/nn_kernels.h"
#include "kernels/numeric.h"
#include "kernels/quant.h"
#include "wick/device.h"

namespace wick::gpu {

namespace {

constexpr int kThreads = 128;
// Thread blocks of one launch: far below every GPU's grid limit (AMD's blocks x threads < 2^32).
constexpr int64_t kMaxPagedTasks = int64_t{1} << 24;
// The most runs a token's keys are split into in batch-invariant mode (wick::batch_invariant()).
constexpr int64_t kInvariantSplits = 16;

// The shared memory's shape for math type M and head dim d: the query heads a block takes, and
// the keys of a tile. q and the output's sums take 2 * heads * d values (at most 8 KiB), the keys
// and values of a tile 2 * tile * (d + 1) (a row padded by one value; about 32 KiB), the scores
// heads * tile, and three values per head: at most 44 KiB for d up to kPagedMaxHeadDim.
constexpr int64_t kMaxTile = 64;
template <typename M>
struct Tiling {
  int64_t heads, tile;
  Tiling(int64_t group, int64_t d) {
    const int64_t qa = 4096 / static_cast<int64_t>(sizeof(M)), keys = 16384 / static_cast<int64_t>(sizeof(M));
    heads = std::clamp<int64_t>(qa / d, 1, std::min<int64_t>(group, 128 / static_cast<int64_t>(sizeof(M))));
    tile = std::clamp<int64_t>(keys / d, 1, kMaxTile);
  }
  size_t bytes(int64_t d) const {
    return static_cast<size_t>((2 * heads * d + 2 * tile * (d + 1) + heads * tile + 3 * heads) *
                               static_cast<int64_t>(sizeof(M)));
  }
};

struct PagedShape {
  int64_t t, h, d, block_size, h_kv, blocks, seqs, max_blocks, window;
  int64_t qs0, qs1, qs2;  // q's strides
  int64_t heads;          // Tiling's (paged_attention_kernel)
  int64_t tile;           // keys a split is a whole number of: a tile, or a step of paged_rows_kernel
  int64_t splits, split_keys;  // the keys a token sees, split_keys at a time over `splits` blocks
  bool own_splits;             // split_keys from each token's own key count instead (see below)
  int64_t row_bytes;           // a row's bytes in Q8_0 pools
  double softcap;              // scores s become softcap * tanh(s / softcap); 0: none
};

// Batch-invariant splits: a token's keys in at most kInvariantSplits runs of whole tiles, their
// length from the count of its own keys alone.
__host__ __device__ inline int64_t own_split_keys(int64_t keys, int64_t tile) {
  const int64_t tiles = (keys + tile - 1) / tile;
  return (tiles + kInvariantSplits - 1) / kInvariantSplits * tile;
}

// With one split, the block writes the output; with more, its unnormalised sums acc and running
// maximum and sum (m, l) per head go to `part` for nn::launch_attention_combine.
// P: the pools' element, T's or uint8_t for Q8_0 pools (nn.h), whose rows are staged as
// quant::dequantize gives them (scale times value in f32), 8 values a step.
template <typename T, typename M, bool kVec, typename P = T>
__global__ __launch_bounds__(kThreads) void paged_attention_kernel(const T* q, const P* k_pool, const P* v_pool,
                                                                   const int32_t* tables, const int32_t* seqs,
                                                                   const int32_t* positions, PagedShape a, M scale,
                                                                   T* out, M* part, KernelError* err) {
  extern __shared__ unsigned char smem_raw[];
  M* q_s = reinterpret_cast<M*>(smem_raw);
  M* acc = q_s + a.heads * a.d;
  const int64_t ld = a.d + 1;  // a tile's row: one value of padding
  M* tile = acc + a.heads * a.d;  // the keys of a tile
  M* vals = tile + a.tile * ld;   // and their values
  M* sc = vals + a.tile * ld;
  M* m_s = sc + a.heads * a.tile;
  M* l_s = m_s + a.heads;
  M* f_s = l_s + a.heads;
  __shared__ int bad;
  __shared__ int64_t block_of[kMaxTile];  // the pool block of each key of the tile
  start_after_inputs();

  const int64_t group = a.h / a.h_kv, chunks = (group + a.heads - 1) / a.heads;
  const int64_t split = blockIdx.x % a.splits, task = blockIdx.x / a.splits;
  const int64_t i = task / (a.h_kv * chunks), g = task / chunks % a.h_kv, r0 = task % chunks * a.heads;
  const int64_t heads = a.heads < group - r0 ? a.heads : group - r0;
  const int64_t first_head = g * group + r0;
  const int tid = threadIdx.x;

  const int64_t s = seqs[i], p = positions[i];
  if (tid == 0) {
    bad = 0;
    if (s < 0 || s >= a.seqs) {
      report_paged_error(err, 0, s, a.seqs);
      bad = 1;
    } else if (p < 0 || p >= a.max_blocks * a.block_size) {
      report_paged_error(err, 1, p, a.max_blocks * a.block_size);
      bad = 1;
    }
  }
  for (int64_t e = tid; e < heads * a.d; e += kThreads) {
    const int64_t r = e / a.d, c = e % a.d;
    q_s[e] = kernels::to_opmath(q[i * a.qs0 + (first_head + r) * a.qs1 + c * a.qs2]);
    acc[e] = 0;
  }
  for (int64_t r = tid; r < heads; r += kThreads) {
    m_s[r] = -INFINITY;
    l_s[r] = 0;
  }
  __syncthreads();
  if (!bad) {
    const int32_t* table = tables + s * a.max_blocks;
    const int64_t lo = a.window > 0 ? (p - a.window + 1 > 0 ? p - a.window + 1 : 0) : 0;
    const int64_t split_keys = a.own_splits ? own_split_keys(p - lo + 1, a.tile) : a.split_keys;
    const int64_t first = lo + split * split_keys;
    const int64_t last = first + split_keys - 1 < p ? first + split_keys - 1 : p;
    for (int64_t j0 = first; j0 <= last; j0 += a.tile) {
      const int64_t n = a.tile < last - j0 + 1 ? a.tile : last - j0 + 1;
      // The row of position j in a pool: block table[j / block_size], slot j % block_size.
      for (int64_t jj = tid; jj < n; jj += kThreads) {
        int64_t b = table[(j0 + jj) / a.block_size];
        if (b < 0 || b >= a.blocks) {
          report_paged_error(err, 2, b, a.blocks);
          bad = 1;
          b = 0;
        }
        block_of[jj] = b;
      }
      __syncthreads();
      // Keys and values at once, kU loads of each a thread in flight before the first is used;
      // kVec moves 16 bytes (V values) a load.
      constexpr bool kQ8 = std::is_same_v<P, uint8_t>;
      constexpr int64_t V = kQ8 ? 8 : kVec ? 16 / static_cast<int64_t>(sizeof(T)) : 1;
      constexpr int kU = 4;
      using Raw = std::conditional_t<kQ8, uint4, std::conditional_t<kVec, uint4, P>>;
      const int64_t per_row = a.d / V, count = n * per_row;
      auto row_of = [&](int64_t e) {
        return (block_of[e / per_row] * a.block_size + (j0 + e / per_row) % a.block_size) * a.h_kv + g;
      };
      auto load = [&](const P* pool, int64_t e) {
        const int64_t c = e % per_row * V;
        Raw r;
        if constexpr (kQ8) {
          // Block c / 32 of the row: its f16 scale, then 32 values; these 8 as four 2-byte words
          // (a row, a block and these values all start on even bytes), the scale's bits in w.
          const uint8_t* blk = pool + row_of(e) * a.row_bytes + c / 32 * 34;
          const auto* words = reinterpret_cast<const uint16_t*>(blk + 2 + c % 32);
          r.x = uint32_t{words[0]} | uint32_t{words[1]} << 16;
          r.y = uint32_t{words[2]} | uint32_t{words[3]} << 16;
          r.z = *reinterpret_cast<const uint16_t*>(blk);
          r.w = 0;
        } else if constexpr (kVec) {
          r = *reinterpret_cast<const uint4*>(pool + row_of(e) * a.d + c);
        } else {
          r = pool[row_of(e) * a.d + c];
        }
        return r;
      };
      auto store = [&](M* dst_tile, int64_t e, const Raw& r) {
        M* dst = dst_tile + e / per_row * ld + e % per_row * V;
        if constexpr (kQ8) {
          const float unit = detail::f16_bits_to_f32(static_cast<uint16_t>(r.z));
          const uint32_t w[2] = {r.x, r.y};
#pragma unroll
          for (int x = 0; x < 8; ++x)
            dst[x] = static_cast<M>(unit * static_cast<float>(static_cast<int8_t>(w[x / 4] >> (8 * (x % 4)) & 0xff)));
        } else if constexpr (kVec) {
          union {
            uint4 raw;
            T v[V];
          } u;
          u.raw = r;
#pragma unroll
          for (int64_t x = 0; x < V; ++x) dst[x] = kernels::to_opmath(u.v[x]);
        } else {
          dst[0] = kernels::to_opmath(r);
        }
      };
      for (int64_t e0 = tid; e0 < count; e0 += kU * kThreads) {
        Raw kr[kU], vr[kU];
#pragma unroll
        for (int u = 0; u < kU; ++u) {
          const int64_t e = e0 + u * kThreads;
          if (e < count) {
            kr[u] = load(k_pool, e);
            vr[u] = load(v_pool, e);
          }
        }
#pragma unroll
        for (int u = 0; u < kU; ++u) {
          const int64_t e = e0 + u * kThreads;
          if (e < count) {
            store(tile, e, kr[u]);
            store(vals, e, vr[u]);
          }
        }
      }
      __syncthreads();
      for (int64_t e = tid; e < heads * n; e += kThreads) {
        const int64_t r = e / n, jj = e % n;
        const M* qr = q_s + r * a.d;
        const M* kr = tile + jj * ld;
        M dot = 0;
#pragma unroll 8
        for (int64_t c = 0; c < a.d; ++c) dot += qr[c] * kr[c];
        dot *= scale;
        sc[r * a.tile + jj] = a.softcap > 0 ? static_cast<M>(a.softcap) * tanh(dot / static_cast<M>(a.softcap)) : dot;
      }
      __syncthreads();
      // Per head: the new maximum, the tile's weights, the running sum, and the factor f of the
      // sums so far (0 on the first tile, whose m_s is -inf).
      for (int64_t r = tid; r < heads; r += kThreads) {
        M* sr = sc + r * a.tile;
        M mt = m_s[r];
        for (int64_t jj = 0; jj < n; ++jj) mt = sr[jj] > mt ? sr[jj] : mt;
        const M f = exp(m_s[r] - mt);
        M sum = 0;
        for (int64_t jj = 0; jj < n; ++jj) sum += sr[jj] = exp(sr[jj] - mt);
        l_s[r] = l_s[r] * f + sum;
        m_s[r] = mt;
        f_s[r] = f;
      }
      __syncthreads();
      for (int64_t e = tid; e < heads * a.d; e += kThreads) {
        const int64_t r = e / a.d, c = e % a.d;
        const M* sr = sc + r * a.tile;
        M o = acc[e] * f_s[r];
#pragma unroll 8
        for (int64_t jj = 0; jj < n; ++jj) o += sr[jj] * vals[jj * ld + c];
        acc[e] = o;
      }
      __syncthreads();
    }
  }
  if (a.splits == 1) {
    for (int64_t e = tid; e < heads * a.d; e += kThreads) {
      const int64_t r = e / a.d, c = e % a.d;
      const M v = bad || l_s[r] == 0 ? M(0) : acc[e] / l_s[r];
      out[(i * a.h + first_head + r) * a.d + c] = kernels::from_opmath<T>(v);
    }
    return;
  }
  // Partial sums in nn::launch_attention_combine's layout: (splits, t * h, d) sums, then (splits,
  // t * h, 2) maxima and sums.
  const int64_t rows = a.t * a.h;
  for (int64_t e = tid; e < heads * a.d; e += kThreads) {
    const int64_t r = e / a.d, c = e % a.d;
    part[(split * rows + i * a.h + first_head + r) * a.d + c] = bad ? M(0) : acc[e];
  }
  for (int64_t r = tid; r < heads; r += kThreads) {
    const int64_t at = split * rows + i * a.h + first_head + r;
    part[a.splits * rows * a.d + 2 * at] = bad ? M(-INFINITY) : m_s[r];
    part[a.splits * rows * a.d + 2 * at + 1] = bad ? M(0) : l_s[r];
  }
}

// The fast path for pools of the model's dtype whose rows load 16 bytes at a time (attention_rows.cuh):
// a block of kRowsBlock threads takes one token, R query heads of one KV head and one split of the
// keys, as paged_attention_kernel does, but each group of kRowLanes lanes takes C keys a step, their
// rows read straight from the pool into registers (each key's block number first, then its key and
// value packs, all C in flight), with q and the output in registers: no tile is staged and no dot
// product is one thread's loop. Splits write `part` as paged_attention_kernel's do.
// Keys per group and step: up to 4 packs each of K and V in flight per lane, fewer as the rows'
// queries and outputs take more registers. Measured on an H200 (bench_decode_ops, 16 and 64
// sequences of 4096 positions): a second step's keys and values loaded during a step's math took
// 228-255 registers and halved the blocks the device holds (1.4 and 1.5 times slower); two steps of
// two keys each, 1.8 and 1.9 times (each step's rescaling of the sums then serves half the keys).
template <int R, int P>
inline constexpr int kPagedStepKeys = std::max(1, (R * P <= 4 ? 4 : 2) / P);

template <typename T, int R, int P>
__global__ __launch_bounds__(nn::kRowsBlock) void paged_rows_kernel(const T* q, const T* k_pool, const T* v_pool,
                                                                    const int32_t* tables, const int32_t* seqs,
                                                                    const int32_t* positions, PagedShape a,
                                                                    kernels::opmath_t<T> scale, T* out,
                                                                    kernels::opmath_t<T>* part, KernelError* err) {
  using M = kernels::opmath_t<T>;
  using State = nn::RowsState<T, R, P>;
  using Row = Pack<T, State::E>;
  constexpr int E = State::E, C = kPagedStepKeys<R, P>, kLanes = nn::kRowLanes;
  const int grp = static_cast<int>(threadIdx.x) / kLanes, lane = static_cast<int>(threadIdx.x) % kLanes;
  const int64_t group = a.h / a.h_kv, chunks = (group + R - 1) / R;
  const int64_t split = blockIdx.x % a.splits, task = blockIdx.x / a.splits;
  start_after_inputs();
  const int64_t i = task / (a.h_kv * chunks), g = task / chunks % a.h_kv, r0 = task % chunks * R;
  const int heads = static_cast<int>(R < group - r0 ? R : group - r0);
  const int64_t first_head = g * group + r0;

  const int64_t s = seqs[i], p = positions[i];
  const bool bad_seq = s < 0 || s >= a.seqs, bad = bad_seq || p < 0 || p >= a.max_blocks * a.block_size;
  if (bad && threadIdx.x == 0) {
    if (bad_seq)
      report_paged_error(err, 0, s, a.seqs);
    else
      report_paged_error(err, 1, p, a.max_blocks * a.block_size);
  }
  // The lane's features of each query row (zeros past d and past the block's heads); a lane past d
  // reads feature 0 of each key, against those zeros.
  int64_t feat[P];
  M qr[R][P][E];
#pragma unroll
  for (int pk = 0; pk < P; ++pk) {
    const int64_t f = int64_t{lane + pk * kLanes} * E;
    feat[pk] = f < a.d ? f : 0;
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int e = 0; e < E; ++e)
        qr[r][pk][e] =
            r < heads && f < a.d ? nn::load_math(q[i * a.qs0 + (first_head + r) * a.qs1 + (f + e) * a.qs2]) : M(0);
  }
  State st;
  if (!bad) {
    const int32_t* table = tables + s * a.max_blocks;
    const int64_t lo = a.window > 0 ? (p - a.window + 1 > 0 ? p - a.window + 1 : 0) : 0;
    const int64_t split_keys = a.own_splits ? own_split_keys(p - lo + 1, a.tile) : a.split_keys;
    const int64_t first = lo + split * split_keys;
    const int64_t hi = first + split_keys < p + 1 ? first + split_keys : p + 1;
    const auto bs = static_cast<int32_t>(a.block_size);  // positions fit 32 bits: no 64-bit division
    const int64_t stride = int64_t{nn::kRowGroups} * C, own = int64_t{grp} * C;
    // The pool offsets of the group's keys k0 .. k0 + C - 1 of a step (a key past hi: key hi - 1
    // again, hidden), from their blocks in the table.
    auto locate = [&](int64_t k0, int64_t(&at)[C]) {
#pragma unroll
      for (int c = 0; c < C; ++c) {
        const auto key = static_cast<int32_t>(k0 + c < hi ? k0 + c : hi - 1);
        int64_t b = table[key / bs];
        if (b < 0 || b >= a.blocks) {
          if (lane == 0) report_paged_error(err, 2, b, a.blocks);
          b = 0;
        }
        at[c] = ((b * a.block_size + key % bs) * a.h_kv + g) * a.d;
      }
    };
    auto fetch = [&](const int64_t(&at)[C], Row(&kp)[C][P], Row(&vp)[C][P]) {
#pragma unroll
      for (int c = 0; c < C; ++c)
#pragma unroll
        for (int pk = 0; pk < P; ++pk) {
          kp[c][pk] = *reinterpret_cast<const Row*>(k_pool + at[c] + feat[pk]);
          vp[c][pk] = *reinterpret_cast<const Row*>(v_pool + at[c] + feat[pk]);
        }
    };
    // Each step's keys and values are loaded as one batch; the blocks of the next step's keys are
    // read from the table meanwhile. Every group makes the same steps (the shuffles need whole
    // groups).
    int64_t at[C];
    if (first < hi) locate(first + own, at);
    for (int64_t step = first; step < hi; step += stride) {
      Row kp[C][P], vp[C][P];
      fetch(at, kp, vp);
      if (step + stride < hi) locate(step + stride + own, at);
      M sc[R][C];
#pragma unroll
      for (int c = 0; c < C; ++c) {
        M kf[P][E];
        State::unpack(kp[c], kf);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const M x = kernels::attention_softcap(State::dot(qr[r], kf) * scale, static_cast<M>(a.softcap));
          sc[r][c] = step + own + c < hi ? x : kernels::attention_neg_inf<M>();
        }
      }
      st.fold(sc, vp);
    }
  }
  const int64_t rows = a.t * a.h;
  st.merge(grp, lane, (1u << heads) - 1, a.d, [&](int r, int c, M acc, M m, M l) {
    const int64_t row = i * a.h + first_head + r;
    if (a.splits == 1) {
      out[row * a.d + c] = kernels::from_opmath<T>(kernels::attention_output(acc, l));
    } else {
      const int64_t at = split * rows + row;
      part[at * a.d + c] = acc;
      if (c == 0) {
        part[a.splits * rows * a.d + 2 * at] = m;
        part[a.splits * rows * a.d + 2 * at + 1] = l;
      }
    }
  });
}

// Rows rounded to Q8_0 for the paged cache: a thread per block of 32 values (kernels/quant.h's
// quantize_q8_0, the bytes of quant::quantize).
template <typename T>
__global__ __launch_bounds__(kBlock) void quantize_q8_0_kernel(const T* x, int64_t blocks,
                                                               kernels::quant::BlockQ8_0* out) {
  for (int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; b < blocks; b += int64_t{gridDim.x} * blockDim.x) {
    float v[32];
#pragma unroll
    for (int c = 0; c < 32; ++c) v[c] = kernels::to_opmath(x[b * 32 + c]);
    kernels::quant::BlockQ8_0 blk;
    kernels::quant::quantize_q8_0(v, blk);
    out[b] = blk;
  }
}

// The most 16-byte packs of a row a lane of paged_rows_kernel holds: head dims up to 256 f32 or 512
// f16 / bf16 values.
constexpr int kPagedMaxPacks = 4;

// The splits' partial sums of each (token, head) merged into the output.
template <typename T>
void combine_splits(GpuBackend& b, const PagedShape& a, const kernels::opmath_t<T>* part, T* out) {
  const int64_t rows = a.t * a.h;
  nn::launch_attention_combine<T>(part, part + a.splits * rows * a.d, out, rows, a.d, a.splits, /*base2=*/false, b);
}

// The keys of each token split over more thread blocks where the tokens and heads alone leave the
// device idle: about `splits` runs of split_keys keys (a whole number of `unit`s each) of the `keys`
// a token sees at most; in batch-invariant mode runs that follow from each token's own key count
// (own_split_keys), whatever the other tokens and the tables' width, so that a token's sums depend
// on its own keys alone (a token whose keys fill one run gets the same bits from the combining
// kernel as without it).
void plan_splits(PagedShape& a, int64_t splits, int64_t keys, int64_t unit) {
  a.tile = unit;
  a.split_keys = ((keys + splits - 1) / splits + unit - 1) / unit * unit;
  a.splits = (keys + a.split_keys - 1) / a.split_keys;
  if (batch_invariant()) {
    a.own_splits = true;
    a.splits = std::min<int64_t>(kInvariantSplits, (keys + unit - 1) / unit);
  }
}

// The keys a token sees at most: the tables' positions, or the window.
int64_t keys_seen(const PagedShape& a) {
  const int64_t held = a.max_blocks * a.block_size;
  return a.window > 0 && a.window < held ? a.window : held;
}

// Queues paged_rows_kernel<T, R, P> and, with splits, the combining kernel.
template <typename T, int R, int P>
void launch_paged_rows(GpuBackend& b, PagedShape a, const T* q, const T* k_pool, const T* v_pool, const int32_t* tables,
                       const int32_t* seqs, const int32_t* positions, double scale, T* out) {
  using M = kernels::opmath_t<T>;
  const auto kernel = paged_rows_kernel<T, R, P>;
  const int64_t chunks = (a.h / a.h_kv + R - 1) / R, blocks = a.t * a.h_kv * chunks;
  const int64_t capacity =
      int64_t{b.blocks_per_sm(reinterpret_cast<const void*>(kernel), nn::kRowsBlock, 0)} * b.props().multiprocessors;
  const int64_t keys = keys_seen(a);
  const int64_t step = int64_t{nn::kRowGroups} * kPagedStepKeys<R, P>;
  plan_splits(a, blocks < capacity ? nn::attention_splits(blocks, keys, capacity, std::max<int64_t>(step, 32)) : 1,
              keys, step);
  if (blocks * a.splits > kMaxPagedTasks)
    throw NotSupportedError(detail::str_cat("paged_attention: ", a.t, " tokens of ", a.h_kv, " KV heads in ", chunks,
                                            " parts each are more than the ", kMaxPagedTasks,
                                            " thread blocks of one launch (", b.name(), ")"));
  StoragePtr part;
  if (a.splits > 1) part = b.alloc(static_cast<size_t>(a.t * a.h * a.splits * (a.d + 2)) * sizeof(M));
  M* pp = part ? static_cast<M*>(part->data()) : nullptr;
  b.launch_early(kernel, static_cast<unsigned>(blocks * a.splits), nn::kRowsBlock, 0, q, k_pool, v_pool, tables, seqs,
                 positions, a, static_cast<M>(scale), out, pp, b.device_error());
  if (a.splits > 1) combine_splits(b, a, pp, out);
}

// paged_rows_kernel's instance for head dim d and `group` query heads per KV head: P packs a lane
// (the fewest that cover d), R query heads a block (up to 8 / P, the fewest that cover the group).
template <typename T>
void dispatch_paged_rows(GpuBackend& b, const PagedShape& a, const T* q, const T* k_pool, const T* v_pool,
                         const int32_t* tables, const int32_t* seqs, const int32_t* positions, double scale, T* out) {
  const int64_t packs = a.d / nn::kPackElems<T>, group = a.h / a.h_kv;
  int p = 1, r = 1;
  while (int64_t{p} * nn::kRowLanes < packs) p *= 2;
  while (r < group && r * p < 8) r *= 2;
  auto go = [&]<int R, int P>() {
    launch_paged_rows<T, R, P>(b, a, q, k_pool, v_pool, tables, seqs, positions, scale, out);
  };
  if (p == 1) {
    if (r == 8) return go.template operator()<8, 1>();
    if (r == 4) return go.template operator()<4, 1>();
    if (r == 2) return go.template operator()<2, 1>();
    return go.template operator()<1, 1>();
  }
  if (p == 2) {
    if (r == 4) return go.template operator()<4, 2>();
    if (r == 2) return go.template operator()<2, 2>();
    return go.template operator()<1, 2>();
  }
  if (r == 2) return go.template operator()<2, 4>();
  go.template operator()<1, 4>();
}

}  // namespace

StoragePtr GpuNnKernels::quantize_q8_0(const View& x) const {
  GpuBackend& b = backend_;
  b.activate();
  const int64_t n = x.layout.shape()[0], d = x.layout.shape()[1], blocks = n * (d / 32);
  StoragePtr out = b.alloc(DType::U8, static_cast<size_t>(blocks * 34));
  auto* dst = static_cast<kernels::quant::BlockQ8_0*>(out->data());
  dispatch(x.dtype, [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
      if (blocks == 0) return;
      const T* src = static_cast<const T*>(x.storage.data()) + x.layout.offset();
      quantize_q8_0_kernel<T><<<grid_for(blocks), kBlock, 0, b.stream()>>>(src, blocks, dst);
      WICK_GPU_CHECK_LAUNCH();
    } else {
      throw DTypeError(detail::str_cat("paged_write: Q8_0 rows from ", x.dtype, " (f32, f16 or bf16)"));
    }
  });
  return out;
}

StoragePtr GpuNnKernels::paged_attention(const View& q, const View& k_pool, const View& v_pool, const View& tables,
                                         const View& seqs, const View& positions, const AttentionArgs& args) const {
  GpuBackend& b = backend_;
  b.activate();
  StoragePtr out = b.alloc(q.dtype, q.layout.numel());
  const Shape& qs = q.layout.shape();
  const Shape& ps = k_pool.layout.shape();
  PagedShape a{qs[0],
               qs[1],
               qs[2],
               ps[1],
               ps[2],
               ps[0],
               tables.layout.shape()[0],
               tables.layout.shape()[1],
               args.window,
               q.layout.stride(0),
               q.layout.stride(1),
               q.layout.stride(2),
               0,
               0,
               1,
               0,
               false,
               ps[3],
               args.softcap};
  dispatch(q.dtype, [&]<typename T>() {
    if constexpr (kernels::is_float_v<T> && !std::is_same_v<T, f8e4m3>) {
      using M = kernels::opmath_t<T>;
      const T* qd = static_cast<const T*>(q.storage.data()) + q.layout.offset();
      const bool q8 = k_pool.dtype == DType::U8;
      const auto* kd =
          static_cast<const unsigned char*>(k_pool.storage.data()) + k_pool.layout.offset() * dtype_size(k_pool.dtype);
      const auto* vd =
          static_cast<const unsigned char*>(v_pool.storage.data()) + v_pool.layout.offset() * dtype_size(v_pool.dtype);
      const auto* td = static_cast<const int32_t*>(tables.storage.data()) + tables.layout.offset();
      const auto* sd = static_cast<const int32_t*>(seqs.storage.data()) + seqs.layout.offset();
      const auto* pd = static_cast<const int32_t*>(positions.storage.data()) + positions.layout.offset();
      const auto* kt = reinterpret_cast<const T*>(kd);
      const auto* vt = reinterpret_cast<const T*>(vd);
      // 16-byte loads of the pools' rows where every row starts on 16 bytes.
      const bool vec = a.d * static_cast<int64_t>(sizeof(T)) % 16 == 0 && reinterpret_cast<uintptr_t>(kd) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(vd) % 16 == 0;
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
        if (!q8 && vec && a.d <= int64_t{kPagedMaxPacks} * nn::kRowLanes * nn::kPackElems<T>) {
          dispatch_paged_rows<T>(b, a, qd, kt, vt, td, sd, pd, args.scale, out->as<T>());
          return;
        }
      }
      const Tiling<M> tiling(a.h / a.h_kv, a.d);
      a.heads = tiling.heads;
      const int64_t chunks = (a.h / a.h_kv + a.heads - 1) / a.heads;
      const int64_t blocks = a.t * a.h_kv * chunks;
      // Two blocks per multiprocessor wanted.
      const int64_t keys = keys_seen(a), wanted = 2 * int64_t{b.props().multiprocessors};
      plan_splits(a, std::clamp<int64_t>((wanted + blocks - 1) / blocks, 1, (keys + tiling.tile - 1) / tiling.tile),
                  keys, tiling.tile);
      const int64_t splits = a.splits;
      const int64_t tasks = blocks * splits;
      if (tasks > kMaxPagedTasks)
        throw NotSupportedError(detail::str_cat("paged_attention: ", a.t, " tokens of ", a.h_kv, " KV heads in ",
                                                chunks, " parts each are more than the ", kMaxPagedTasks,
                                                " thread blocks of one launch (", b.name(), ")"));
      StoragePtr part;
      if (splits > 1) part = b.alloc(static_cast<size_t>(a.t * a.h * splits * (a.d + 2)) * sizeof(M));
      M* pp = part ? static_cast<M*>(part->data()) : nullptr;
      const auto grid = static_cast<unsigned>(tasks);
      const size_t shared = tiling.bytes(a.d);
      if (q8)
        b.launch_early(paged_attention_kernel<T, M, false, uint8_t>, grid, kThreads, shared, qd, kd, vd, td, sd, pd, a,
                       static_cast<M>(args.scale), out->as<T>(), pp, b.device_error());
      else if (vec)
        b.launch_early(paged_attention_kernel<T, M, true>, grid, kThreads, shared, qd, kt, vt, td, sd, pd, a,
                       static_cast<M>(args.scale), out->as<T>(), pp, b.device_error());
      else
        b.launch_early(paged_attention_kernel<T, M, false>, grid, kThreads, shared, qd, kt, vt, td, sd, pd, a,
                       static_cast<M>(args.scale), out->as<T>(), pp, b.device_error());
      if (splits > 1) combine_splits(b, a, pp, out->as<T>());
    } else {
      throw_not_supported(b, NnOp::PagedAttention, q.dtype);
    }
  });
  return out;
}

}  // namespace wick::gpu
