// Products of a few dozen rows of x with a weight in a block format, on the matrix units (x in f16
// or bf16; the formats of kHasTileKernel). The work comes in items of kTileN weight rows and a
// range of k, against every row of x (at most kTileMaxRows), kTileK values of k per step:
//   - each step's weight blocks are copied into shared memory as they lie (aligned 16-byte words,
//     asynchronously, one step ahead of the one computed), and x's step beside them;
//   - each wave dequantizes its own 16 weight rows and half of the step into a tile of x's dtype,
//     kTilePiece values of one group at a time (TilePairs: on NVIDIA, for quants of at most 7 bits,
//     two values at a time in T's own arithmetic), and multiplies them by every 16-row tile of x
//     (gpu/mma.cuh: f32 accumulators), 16 values of k at a time; the two waves of each 16 rows add
//     their sums at the end of the item.
// The weight is read from memory once and unpacked once, however many rows x has; the integer-dot
// kernels unpack each unit once per row of x, and past a few rows their dot products, not memory,
// bound them. The grid holds as many blocks as the device runs at once, each taking items in turn
// with its copies running ahead across items; k is split into as many ranges as fill those blocks
// best (tile_splits), and a second kernel adds the ranges' f32 partial sums in a fixed order.
// Written against gpu/mma.cuh, so the same source runs on 32- and 64-lane waves.
#pragma once

#include <algorithm>
#include <type_traits>

#include "gpu/quant/qmatmul.cuh"

namespace wick::gpu::qmm {

constexpr int kTileN = 64;      // weight rows per block of the grid
constexpr int kTileHalves = 2;  // waves per 16 weight rows, each taking its share of a step's k
constexpr int kTileWaves = kTileN / 16 * kTileHalves;
constexpr int kTileK = 256;            // values of k per step: a K block, 8 blocks of the others
constexpr int kTileLd = kTileK + 8;    // shared rows of T padded by 16 bytes, for ldmatrix's banks
constexpr int kTilePiece = 16;         // values a thread dequantizes at a time, within one group
constexpr int kTileMaxRows = 64;       // rows of x
constexpr int kTileMinSplitSteps = 4;  // steps per range of k at the least, when k is split

// The formats with a tile kernel: those of the files people run (Q4_0, Q8_0 and the _K_M mixes).
template <QType Q>
inline constexpr bool kHasTileKernel =
    Q == QType::Q4_0 || Q == QType::Q8_0 || Q == QType::Q4_K || Q == QType::Q5_K || Q == QType::Q6_K;

template <QType Q, int MT>
struct TileShape {
  using F = kq::Format<Q>;
  using Block = typename F::Block;
  static_assert(kTileK % F::kValues == 0 && F::kGroup % kTilePiece == 0);
  static constexpr int kBlocks = kTileK / F::kValues;  // of a weight row per step
  static constexpr int kBytes = kBlocks * static_cast<int>(sizeof(Block));
  static constexpr int kWords = (kBytes + 30) / 16;  // 16-byte words covering a row's step at any alignment
  static constexpr int kRows = 16 * MT;              // rows of x held
  // Shared memory: x's step for two steps, the dequantized weight, the weight's words for two steps,
  // the hand-over of sums.
  template <typename T>
  static constexpr size_t x_bytes() {
    return size_t{kRows} * kTileLd * sizeof(T);
  }
  template <typename T>
  static constexpr size_t w_bytes() {
    return size_t{kTileN} * kTileLd * sizeof(T);
  }
  static constexpr size_t raw_bytes() { return size_t{kTileN} * kWords * 16; }
  // The second half's sums of each 16-row tile, handed to the first half's waves: 16 x 16 floats
  // per tile of x.
  static constexpr size_t hand_bytes() { return size_t{kTileN / 16} * MT * 256 * sizeof(float); }
  template <typename T>
  static constexpr size_t x_offset(int buffers) {
    return buffers * x_bytes<T>();
  }
  template <typename T>
  static constexpr size_t raw_offset() {
    return x_offset<T>(2) + w_bytes<T>();
  }
  template <typename T>
  static constexpr size_t hand_offset() {
    return raw_offset<T>() + 2 * raw_bytes();
  }
  template <typename T>
  static constexpr size_t smem_bytes() {
    return hand_offset<T>() + hand_bytes();
  }
};

#if WICK_GPU_MMA
// Byte i of a group word as a float, less the format's offset (kq::word_value, then the offset of
// kq::group_value), without an integer-to-float conversion (a quarter-rate instruction, once per
// weight: it bound the first version of this kernel): 2^23 + the byte has the byte in its low
// mantissa bits, and one exact subtraction takes away 2^23 and the offset.
template <QType Q>
__device__ inline float word_float(uint32_t word, int i) {
  using F = kq::Format<Q>;
  const uint32_t byte = (word >> (8 * i)) & 0xffu;
  constexpr float kBias = 8388608.f + static_cast<float>(F::kMin == kq::MinForm::None ? F::kOffset : 0);
  if constexpr (F::kSigned)
    return __uint_as_float(0x4B000000u | (byte ^ 0x80u)) - (kBias + 128.f);
  else
    return __uint_as_float(0x4B000000u | byte) - kBias;
}

// kq::group_value from word_float's u: the same value, rounded the same way.
template <QType Q>
__device__ inline float tile_value(kq::GroupScale s, float u) {
  using F = kq::Format<Q>;
  if constexpr (F::kMin == kq::MinForm::Add) return u * s.d + s.m;
  if constexpr (F::kMin == kq::MinForm::Sub) return s.d * u - s.m;
  return u * s.d;
}

// Four values of a group (one group word, value 4w + i in byte i) as two pairs of T, lo first.
// Where the device has paired fused multiply-adds (mma::fma2) and the quants are unsigned and
// below 128, in T's own arithmetic: one byte permutation puts two quants u into the low mantissa
// bits of two T holding 128 + u (bf16) or 1024 + u (f16), an exact fma2 takes away that base and
// the format's offset, and a second gives d * u - m (or d * u + m, d * u) rounded once from T's d
// and m: about 1.5 instructions per weight, against 3.5 through f32 (tile_value, one rounding
// from f32's d and m, as `dequantize` gives them).
template <QType Q, typename T>
struct TilePairs {
  using F = kq::Format<Q>;
  static constexpr bool kPacked = WICK_GPU_PAIRED_FMA && !F::kSigned;
  static constexpr bool kHalf = std::is_same_v<T, f16>;
  static constexpr uint32_t kMagic = kHalf ? 0x64646464u : 0x43434343u;
  static constexpr uint32_t kOne = kHalf ? 0x3C003C00u : 0x3F803F80u;
  uint32_t d2 = 0, m2 = 0, base2 = 0;  // packed: d, the added minimum (-m, m or -0) and -(base + offset)
  kq::GroupScale s{};
  __device__ explicit TilePairs(kq::GroupScale scale) : s(scale) {
    if constexpr (kPacked) {
      const float base = (kHalf ? 1024.f : 128.f) + static_cast<float>(F::kMin == kq::MinForm::None ? F::kOffset : 0);
      const float m = F::kMin == kq::MinForm::Sub ? -s.m : F::kMin == kq::MinForm::Add ? s.m : -0.f;
      d2 = mma::pack2<T>(s.d, s.d);
      m2 = mma::pack2<T>(m, m);
      base2 = mma::pack2<T>(-base, -base);
    }
  }
  __device__ void operator()(uint32_t word, uint32_t& lo, uint32_t& hi) const {
#if WICK_GPU_PAIRED_FMA
    if constexpr (kPacked) {
      lo = mma::fma2<T>(mma::fma2<T>(__byte_perm(word, kMagic, 0x5140), kOne, base2), d2, m2);
      hi = mma::fma2<T>(mma::fma2<T>(__byte_perm(word, kMagic, 0x5342), kOne, base2), d2, m2);
      return;
    }
#endif
    lo = mma::pack2<T>(tile_value<Q>(s, word_float<Q>(word, 0)), tile_value<Q>(s, word_float<Q>(word, 1)));
    hi = mma::pack2<T>(tile_value<Q>(s, word_float<Q>(word, 2)), tile_value<Q>(s, word_float<Q>(word, 3)));
  }
};
#endif  // WICK_GPU_MMA

struct TileArgs {
  const uint8_t* w;
  int64_t n, k, row_bytes;
  int m;
  uint32_t tiles;       // of kTileN weight rows
  uint32_t splits;      // ranges of k per tile (tiles * splits items: 32-bit divisions, not 64-bit calls)
  int64_t split_steps;  // steps per range (the last may have fewer)
  float* part;          // splits > 1: (splits, m, n) partial sums; else null and out is written
};

// out (m, n) = x (m, k) times w (n, k) transposed, m <= 16 * MT; x's rows 16-byte aligned. The work
// items are (tile, range of k) pairs, item i being tile i % tiles and range i / tiles; block b of
// the grid takes items b, b + gridDim.x, ... as one sequence of steps, the copies of the next step
// in flight while it computes one, across items too.
template <QType Q, int MT, typename T>
__global__ void tile_rows_kernel(TileArgs a, const T* __restrict__ x, T* __restrict__ out) {
#if WICK_GPU_MMA
  using S = TileShape<Q, MT>;
  using F = kq::Format<Q>;
  using Block = typename S::Block;
  extern __shared__ uint4 tile_smem[];
  uint8_t* base = reinterpret_cast<uint8_t*>(tile_smem);
  // The two buffers of x and of the weight's words as offsets from the first (an array of two
  // pointers indexed at run time would live in local memory).
  T* const xs0 = reinterpret_cast<T*>(base);
  T* const ws = reinterpret_cast<T*>(base + S::template x_offset<T>(2));
  uint4* const raw0 = reinterpret_cast<uint4*>(base + S::template raw_offset<T>());
  float* const hand = reinterpret_cast<float*>(base + S::template hand_offset<T>());
  auto xs = [&](int buf) { return xs0 + buf * (S::kRows * kTileLd); };
  auto raw = [&](int buf) { return raw0 + buf * (kTileN * S::kWords); };

  const int tid = static_cast<int>(threadIdx.x), threads = static_cast<int>(blockDim.x);
  const int lane = tid % mma::kWave, wave = tid / mma::kWave, live = (a.m + 15) / 16;
  const int ntile = wave % (kTileN / 16), half = wave / (kTileN / 16);  // the wave's 16 rows and half of k
  constexpr int kHalfK = kTileK / kTileHalves;
  const int64_t row_blocks = a.k / F::kValues, size = a.n * a.row_bytes;
  const int64_t steps = (a.k + kTileK - 1) / kTileK;
  const uint32_t items = a.tiles * a.splits, stride = gridDim.x;
  // A place in the block's sequence: an item, its first weight row and range of k, and a step of
  // it (divided out once per item, not per step).
  struct Cursor {
    uint32_t item;
    int64_t n0, split, step, last;
  };
  auto start = [&](Cursor& c) {
    if (c.item >= items) return;
    c.split = c.item / a.tiles;
    c.n0 = int64_t{c.item - static_cast<uint32_t>(c.split) * a.tiles} * kTileN;
    c.step = c.split * a.split_steps;
    c.last = std::min(steps, c.step + a.split_steps);
  };
  auto advance = [&](Cursor& c) {
    if (++c.step == c.last) {
      c.item += stride;
      start(c);
    }
  };

  // Step `step` of item `item`: its weight words and x into buffer `buf`, as one group of
  // asynchronous copies.
  auto issue = [&](const Cursor& c, int buf) {
    const int64_t n0 = c.n0, step = c.step;
    for (int i = tid; i < kTileN * S::kWords; i += threads) {
      const int64_t row = n0 + i / S::kWords;
      if (row >= a.n) continue;  // its tile row is never stored
      const int64_t from = ((row * a.row_bytes + step * S::kBytes) & ~int64_t{15}) + 16 * (i % S::kWords);
      if (from + 16 <= size)
        mma::copy_async_16(raw(buf) + i, a.w + from);
      else
        raw(buf)[i] = load_word(a.w, from, size);
    }
    constexpr int kChunks = kTileK / 8;  // 16-byte chunks of a row of x's step
    for (int i = tid; i < a.m * kChunks; i += threads) {
      const int t = i / kChunks, c = i % kChunks;
      const int64_t col = step * kTileK + 8 * c;
      T* dst = xs(buf) + t * kTileLd + 8 * c;
      if (col < a.k)
        mma::copy_async_16(dst, x + t * a.k + col);
      else
        *reinterpret_cast<uint4*>(dst) = uint4{0, 0, 0, 0};  // past k: zeros beside the weight's zeros
    }
    mma::copy_async_commit();
  };

  // The wave's own part of the weight tile (its 16 rows, its half of k) from buffer `buf` as T,
  // piece by piece; zeros past the row's blocks. No other wave reads it.
  auto dequantize = [&](const Cursor& c, int buf) {
    constexpr int kPieces = kHalfK / kTilePiece;  // per weight row
    const int64_t n0 = c.n0, step = c.step;
    for (int p = lane; p < 16 * kPieces; p += mma::kWave) {
      const int r = ntile * 16 + p / kPieces, v0 = half * kHalfK + p % kPieces * kTilePiece;
      const int64_t row = n0 + r;
      if (row >= a.n) continue;
      uint4 words[kTilePiece * sizeof(T) / 16] = {};  // zeros past the row's blocks
      const int bi = v0 / F::kValues;
      if (step * S::kBlocks + bi < row_blocks) {
        const int offset = static_cast<int>((row * a.row_bytes + step * S::kBytes) & 15);
        const auto* bytes = reinterpret_cast<const uint8_t*>(raw(buf) + r * S::kWords) + offset;
        const Block& b = reinterpret_cast<const Block*>(bytes)[bi];
        const int g = (v0 % F::kValues) / F::kGroup, w0 = (v0 % F::kGroup) / 4;
        const TilePairs<Q, T> pairs_of(kq::group_scale<Q>(b, g, FastHalf{}));
        uint32_t pairs[kTilePiece / 2];
#pragma unroll
        for (int j = 0; j < kTilePiece / 4; ++j)
          pairs_of(kq::group_word<Q>(b, g, w0 + j), pairs[2 * j], pairs[2 * j + 1]);
        __builtin_memcpy(words, pairs, sizeof pairs);
      }
      auto* to = reinterpret_cast<uint4*>(ws + r * kTileLd + v0);
#pragma unroll
      for (size_t j = 0; j < sizeof words / 16; ++j) to[j] = words[j];
    }
  };

  // kChains accumulators per tile of x, taking the 16-value slices of k in turn: the matrix unit's
  // latency is paid once per chain, not once per slice.
  constexpr int kChains = MT == 1 ? 4 : MT == 2 ? 2 : 1;
  static_assert(kHalfK / 16 % kChains == 0);
  mma::FragC acc[kChains][MT];
  auto zero = [&] {
#pragma unroll
    for (int c = 0; c < kChains; ++c)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) mma::zero(acc[c][mt]);
  };
  // The item's sums: the chains added, the second half's waves hand theirs to the first's, which
  // store them. Every thread of the block calls it at the same step.
  auto flush = [&](const Cursor& c) {
#pragma unroll
    for (int c = 1; c < kChains; ++c)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int i = 0; i < mma::kAccum; ++i) acc[0][mt].v[i] += acc[c][mt].v[i];
    auto slot = [&](int mt, int i) { return ((ntile * MT + mt) * mma::kAccum + i) * mma::kWave + lane; };
    if (half == 1) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int i = 0; i < mma::kAccum; ++i) hand[slot(mt, i)] = acc[0][mt].v[i];
    }
    __syncthreads();
    if (half == 0) {
      const int64_t n0 = c.n0, split = c.split;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if (mt >= live) continue;
#pragma unroll
        for (int i = 0; i < mma::kAccum; ++i) {
          const int t = mt * 16 + mma::accum_row(i);
          const int64_t col = n0 + ntile * 16 + mma::accum_col(i);
          if (t >= a.m || col >= a.n) continue;
          const float v = acc[0][mt].v[i] + hand[slot(mt, i)];
          if (a.part != nullptr)
            a.part[(split * a.m + t) * a.n + col] = v;
          else
            out[t * a.n + col] = mma::round_to<T>(v);
        }
      }
    }
    zero();
  };

  Cursor at{blockIdx.x, 0, 0, 0, 0};
  start(at);
  Cursor next = at;  // the next step to copy
  if (next.item < items) issue(next, 0), advance(next);
  zero();
  for (int buf = 0; at.item < items; buf ^= 1) {
    mma::copy_async_wait_all();  // this step's copies (the only ones in flight)
    __syncthreads();             // ...and every thread's; every wave is done with the other buffer
    if (next.item < items) issue(next, buf ^ 1), advance(next);
    dequantize(at, buf);
    group_sync();
    const T* wt = ws + ntile * 16 * kTileLd + half * kHalfK;
    const T* xt = xs(buf) + half * kHalfK;
#pragma unroll
    for (int kk = 0; kk < kHalfK; kk += 16) {
      mma::FragB<T> fb;
      mma::load_b_nk(fb, wt + kk, kTileLd);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if (mt < live) {
          mma::FragA<T> fa;
          mma::load_a(fa, xt + mt * 16 * kTileLd + kk, kTileLd);
          mma::mma(acc[(kk / 16) % kChains][mt], fa, fb);
        }
      }
    }
    if (at.step + 1 == at.last) flush(at);
    advance(at);
  }
#else
  (void)a;
  (void)x;
  (void)out;
#endif
}

// out = the sum of the `splits` partial products, in order, rounded to T.
template <typename T>
__global__ __launch_bounds__(kThreads) void tile_combine_kernel(const float* __restrict__ part, int splits,
                                                                int64_t count, T* __restrict__ out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    float s = 0.f;
    for (int j = 0; j < splits; ++j) s += part[j * count + i];
    out[i] = kernels::from_opmath<T>(s);
  }
}

// Ranges of k per tile of weight rows: the count whose work items (tiles x ranges, each at least
// kTileMinSplitSteps steps) best fill `capacity` resident blocks, round after round; a larger count
// only where it fills them a twentieth better, as each range adds a pass over its partial sums.
inline int64_t tile_splits(int64_t tiles, int64_t steps, int64_t capacity) {
  auto filled = [&](int64_t s) {
    const int64_t items = tiles * s, rounds = (items + capacity - 1) / capacity;
    return static_cast<double>(items) / static_cast<double>(rounds * capacity);
  };
  int64_t best = 1;
  for (int64_t s = 2; s <= std::max<int64_t>(1, steps / kTileMinSplitSteps); ++s)
    if (filled(s) > filled(best) + 0.05) best = s;
  return best;
}

// Queues the tile kernel for format Q, x of at most 16 * MT rows, and returns out (m, n); null
// where the device lacks the shared memory it takes or the items would not count in 32 bits.
template <QType Q, int MT, typename T>
StoragePtr launch_tiles(GpuBackend& b, QType qtype, const uint8_t* w, int64_t n, int64_t k, const T* x, int m) {
  const DeviceProps& props = b.props();
  const size_t smem = TileShape<Q, MT>::template smem_bytes<T>();
  if (smem > std::max(props.shared_per_block, props.shared_per_block_optin)) return nullptr;
  const auto kernel = tile_rows_kernel<Q, MT, T>;
  const int threads = kTileWaves * props.warp_size;
  // The limit first: asked before it is raised, the runtime would count 0 blocks (1 remembered).
  if (smem > props.shared_per_block)
    WICK_GPU_CHECK(kernel_set_shared_limit(reinterpret_cast<const void*>(kernel), static_cast<int>(smem)));
  const int per_sm = b.blocks_per_sm(reinterpret_cast<const void*>(kernel), threads, smem);
  const int64_t tiles = (n + kTileN - 1) / kTileN, steps = (k + kTileK - 1) / kTileK;
  const int64_t capacity = int64_t{per_sm} * std::max(1, props.multiprocessors);
  const int64_t wanted = tile_splits(tiles, steps, capacity), split_steps = (steps + wanted - 1) / wanted;
  const int64_t splits = (steps + split_steps - 1) / split_steps;  // each range holds a step
  if (tiles * splits > UINT32_MAX) return nullptr;
  TileArgs args{w,
                n,
                k,
                quant::row_bytes(qtype, k),
                m,
                static_cast<uint32_t>(tiles),
                static_cast<uint32_t>(splits),
                split_steps,
                nullptr};
  StoragePtr out = b.alloc(dtype_of<T>, m * n), part;
  if (splits > 1) {
    part = b.alloc(static_cast<size_t>(splits * m * n) * sizeof(float));
    args.part = part->as<float>();
  }
  kernel<<<static_cast<unsigned>(std::min(tiles * splits, capacity)), threads, smem, b.stream()>>>(args, x,
                                                                                                   out->as<T>());
  WICK_GPU_CHECK_LAUNCH();
  if (splits > 1) {
    const int64_t count = int64_t{m} * n;
    tile_combine_kernel<T><<<grid_for(count, kThreads), kThreads, 0, b.stream()>>>(args.part, static_cast<int>(splits),
                                                                                   count, out->as<T>());
    WICK_GPU_CHECK_LAUNCH();
  }
  return out;
}

// out (m, n) = x (m, k) times w (n, k) transposed, queued through the tile kernel; null (nothing
// allocated or queued) where it does not apply: x not in f16 or bf16, m past kTileMaxRows, a format
// without the kernel, a device without matrix units or with too little shared memory, or x's rows
// not 16-byte aligned.
template <typename T>
StoragePtr launch_tile_rows(GpuBackend& b, QType qtype, const uint8_t* w, int64_t n, int64_t k, const T* x, int m) {
  if constexpr (!std::is_same_v<T, f16> && !std::is_same_v<T, bf16>) {
    return nullptr;
  } else {
    if (m < 1 || m > kTileMaxRows || n < 1 || !mma::available(b.props()) || reinterpret_cast<uintptr_t>(x) % 16 != 0 ||
        k % 8 != 0)
      return nullptr;
    StoragePtr out;
    kq::dispatch_qtype(qtype, [&]<QType Q>() {
      if constexpr (kHasTileKernel<Q>) {
        if (m <= 16)
          out = launch_tiles<Q, 1, T>(b, qtype, w, n, k, x, m);
        else if (m <= 32)
          out = launch_tiles<Q, 2, T>(b, qtype, w, n, k, x, m);
        else
          out = launch_tiles<Q, 4, T>(b, qtype, w, n, k, x, m);
      }
    });
    return out;
  }
}

extern template StoragePtr launch_tile_rows<f16>(GpuBackend&, QType, const uint8_t*, int64_t, int64_t, const f16*, int);
extern template StoragePtr launch_tile_rows<bf16>(GpuBackend&, QType, const uint8_t*, int64_t, int64_t, const bf16*,
                                                  int);

}  // namespace wick::gpu::qmm
