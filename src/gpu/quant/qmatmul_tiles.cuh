// Products of a few dozen rows of x with a weight in a block format, on the matrix units (x in f16
// or bf16; the formats of kHasTileKernel). Each block of the grid takes kTileN weight rows and every
// row of x (at most kTileMaxRows), kTileK values of k per step:
//   - the step's weight blocks are copied into shared memory as they lie (aligned 16-byte words,
//     asynchronously, two steps ahead), and x's step beside them;
//   - all the block's threads dequantize the words into a tile of x's dtype, kTilePiece values of
//     one group at a time (tile_pairs: on NVIDIA, for quants of at most 7 bits, two values at a
//     time in T's own arithmetic);
//   - each wave multiplies 16 weight rows by every 16-row tile of x over half of the step's k
//     (gpu/mma.cuh: f32 accumulators), 16 values of k at a time; the two waves of each 16 rows add
//     their sums at the end.
// The weight is read from memory once and unpacked once, however many rows x has; the integer-dot
// kernels unpack each unit once per row of x, and past a few rows their dot products, not memory,
// bound them. Where the weight's row blocks alone would leave multiprocessors idle, k is split over
// blocks of the grid as well, and a second kernel adds their f32 partial sums in a fixed order.
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
constexpr int kTileMinSplitSteps = 4;  // steps per block of the grid at the least, when k is split

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
  // Shared memory: x's step for two steps, the dequantized weight, the weight's words for two steps.
  template <typename T>
  static constexpr size_t x_bytes() {
    return size_t{kRows} * kTileLd * sizeof(T);
  }
  template <typename T>
  static constexpr size_t w_bytes() {
    return size_t{kTileN} * kTileLd * sizeof(T);
  }
  static constexpr size_t raw_bytes() { return size_t{kTileN} * kWords * 16; }
  template <typename T>
  static constexpr size_t smem_bytes() {
    return 2 * x_bytes<T>() + w_bytes<T>() + 2 * raw_bytes();
  }
};

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

// Two floats as T, rounded to nearest even, `lo` in the low half: one conversion for the pair on
// NVIDIA.
template <typename T>
__device__ inline uint32_t tile_pack(float lo, float hi) {
#if WICK_GPU_MMA && defined(__CUDA_ARCH__)
  return mma::pack2<T>(lo, hi);
#elif WICK_GPU_MMA
  return static_cast<uint32_t>(mma::round_to<T>(lo).bits) | static_cast<uint32_t>(mma::round_to<T>(hi).bits) << 16;
#else
  (void)lo;
  (void)hi;
  return 0;  // not reached: the kernels' bodies need the matrix units
#endif
}

// Four values of a group (one group word, value 4w + i in byte i) as two pairs of T, lo first.
// On NVIDIA, where the quants are unsigned and below 128, in T's paired arithmetic: one byte
// permutation puts two quants u into the low mantissa bits of two T holding 128 + u (bf16) or
// 1024 + u (f16), an exact fused multiply-add takes away that base and the format's offset, and a
// second gives d * u - m (or d * u + m, d * u) rounded once from T's d and m: about 1.5
// instructions per weight, against 3.5 through f32 (tile_value, one rounding from f32's d and m,
// as `dequantize` gives them).
template <QType Q, typename T>
struct TilePairs {
  using F = kq::Format<Q>;
#if WICK_GPU_MMA && defined(__CUDA_ARCH__)
  static constexpr bool kPacked = !F::kSigned;
  static constexpr bool kHalf = std::is_same_v<T, f16>;
  static constexpr uint32_t kMagic = kHalf ? 0x64646464u : 0x43434343u;
  static constexpr uint32_t kOne = kHalf ? 0x3C003C00u : 0x3F803F80u;
  __device__ static uint32_t fma2(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t d;
    if constexpr (kHalf)
      asm("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    else
      asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
  }
#else
  static constexpr bool kPacked = false;
#endif
  uint32_t d2 = 0, m2 = 0, base2 = 0;  // packed: d, the added minimum (-m, m or -0) and -(base + offset)
  kq::GroupScale s{};
  __device__ explicit TilePairs(kq::GroupScale scale) : s(scale) {
#if WICK_GPU_MMA && defined(__CUDA_ARCH__)
    if constexpr (kPacked) {
      const float base = (kHalf ? 1024.f : 128.f) + static_cast<float>(F::kMin == kq::MinForm::None ? F::kOffset : 0);
      const float m = F::kMin == kq::MinForm::Sub ? -s.m : F::kMin == kq::MinForm::Add ? s.m : -0.f;
      d2 = mma::pack2<T>(s.d, s.d);
      m2 = mma::pack2<T>(m, m);
      base2 = mma::pack2<T>(-base, -base);
    }
#endif
  }
  __device__ void operator()(uint32_t word, uint32_t& lo, uint32_t& hi) const {
#if WICK_GPU_MMA && defined(__CUDA_ARCH__)
    if constexpr (kPacked) {
      lo = fma2(fma2(__byte_perm(word, kMagic, 0x5140), kOne, base2), d2, m2);
      hi = fma2(fma2(__byte_perm(word, kMagic, 0x5342), kOne, base2), d2, m2);
      return;
    }
#endif
    lo = tile_pack<T>(tile_value<Q>(s, word_float<Q>(word, 0)), tile_value<Q>(s, word_float<Q>(word, 1)));
    hi = tile_pack<T>(tile_value<Q>(s, word_float<Q>(word, 2)), tile_value<Q>(s, word_float<Q>(word, 3)));
  }
};

struct TileArgs {
  const uint8_t* w;
  int64_t n, k, row_bytes;
  int m;
  int64_t split_steps;  // steps of each block of the grid along k (gridDim.y blocks)
  float* part;          // k split: (gridDim.y, m, n) partial sums; else null and out is written
};

// out (m, n) = x (m, k) times w (n, k) transposed, m <= 16 * MT; x's rows 16-byte aligned.
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
  T* const ws = reinterpret_cast<T*>(base + 2 * S::template x_bytes<T>());
  uint4* const raw0 = reinterpret_cast<uint4*>(base + 2 * S::template x_bytes<T>() + S::template w_bytes<T>());
  auto xs = [&](int buf) { return xs0 + buf * (S::kRows * kTileLd); };
  auto raw = [&](int buf) { return raw0 + buf * (kTileN * S::kWords); };

  const int tid = static_cast<int>(threadIdx.x), threads = static_cast<int>(blockDim.x);
  const int64_t n0 = int64_t{blockIdx.x} * kTileN;
  const int64_t row_blocks = a.k / F::kValues, size = a.n * a.row_bytes;
  const int64_t first = int64_t{blockIdx.y} * a.split_steps;
  const int64_t last = std::min((a.k + kTileK - 1) / kTileK, first + a.split_steps);

  // Step `step`'s weight words and x into buffer `buf`, as one group of asynchronous copies (an
  // empty one past the last step, so that every step waits for the same count).
  auto issue = [&](int64_t step, int buf) {
    if (step < last) {
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
    }
    mma::copy_async_commit();
  };

  // Buffer `buf`'s weight words as T, piece by piece; zeros past the row's blocks.
  auto dequantize = [&](int64_t step, int buf) {
    constexpr int kPieces = kTileK / kTilePiece;  // per weight row
    for (int p = tid; p < kTileN * kPieces; p += threads) {
      const int r = p / kPieces, v0 = (p % kPieces) * kTilePiece;
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
  static_assert(kTileK / kTileHalves / 16 % kChains == 0);
  const int wave = tid / mma::kWave, live = (a.m + 15) / 16;
  const int ntile = wave % (kTileN / 16), half = wave / (kTileN / 16);
  constexpr int kHalfK = kTileK / kTileHalves;
  mma::FragC acc[kChains][MT];
#pragma unroll
  for (int c = 0; c < kChains; ++c)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) mma::zero(acc[c][mt]);
  issue(first, 0);
  issue(first + 1, 1);
  for (int64_t step = first; step < last; ++step) {
    const int buf = static_cast<int>((step - first) & 1);
    mma::copy_async_wait<1>();  // this step's group; the next may still be in flight
    __syncthreads();
    dequantize(step, buf);
    __syncthreads();
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
    __syncthreads();  // the buffers are read: they take the step after next
    issue(step + 2, buf);
  }
  mma::copy_async_wait_all();

#pragma unroll
  for (int c = 1; c < kChains; ++c)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < mma::kAccum; ++i) acc[0][mt].v[i] += acc[c][mt].v[i];
  // The second half's waves hand their sums to the first's, through the weight tile's memory.
  __syncthreads();
  float* hand = reinterpret_cast<float*>(ws);
  const int lane = tid % mma::kWave;
  auto slot = [&](int mt, int i) { return ((ntile * MT + mt) * mma::kAccum + i) * mma::kWave + lane; };
  if (half == 1) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < mma::kAccum; ++i) hand[slot(mt, i)] = acc[0][mt].v[i];
  }
  __syncthreads();
  if (half == 1) return;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < mma::kAccum; ++i) acc[0][mt].v[i] += hand[slot(mt, i)];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    if (mt >= live) continue;
#pragma unroll
    for (int i = 0; i < mma::kAccum; ++i) {
      const int t = mt * 16 + mma::accum_row(i);
      const int64_t col = n0 + ntile * 16 + mma::accum_col(i);
      if (t >= a.m || col >= a.n) continue;
      if (a.part != nullptr)
        a.part[(int64_t{blockIdx.y} * a.m + t) * a.n + col] = acc[0][mt].v[i];
      else
        out[t * a.n + col] = mma::round_to<T>(acc[0][mt].v[i]);
    }
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

// Queues out (m, n) = x (m, k) times w (n, k) transposed through the tile kernel and returns true,
// or returns false where it does not apply: x not in f16 or bf16, m past kTileMaxRows, a format
// without the kernel, a device without matrix units or with too little shared memory, or x's
// rows not 16-byte aligned.
template <typename T>
bool launch_tile_rows(GpuBackend& b, QType qtype, const uint8_t* w, int64_t n, int64_t k, const T* x, int m, T* out) {
  if constexpr (!std::is_same_v<T, f16> && !std::is_same_v<T, bf16>) {
    return false;
  } else {
    const DeviceProps& props = b.props();
    if (m < 1 || m > kTileMaxRows || n < 1 || !mma::available(props) || reinterpret_cast<uintptr_t>(x) % 16 != 0 ||
        k % 8 != 0)
      return false;
    bool queued = false;
    kq::dispatch_qtype(qtype, [&]<QType Q>() {
      if constexpr (kHasTileKernel<Q>) {
        auto launch = [&]<int MT>() {
          const size_t smem = TileShape<Q, MT>::template smem_bytes<T>();
          if (smem > std::max(props.shared_per_block, props.shared_per_block_optin)) return;
          const auto kernel = tile_rows_kernel<Q, MT, T>;
          const int threads = kTileWaves * props.warp_size;
          if (smem > props.shared_per_block)
            WICK_GPU_CHECK(kernel_set_shared_limit(reinterpret_cast<const void*>(kernel), static_cast<int>(smem)));
          const int per_sm = std::max(1, b.blocks_per_sm(reinterpret_cast<const void*>(kernel), threads, smem));
          const int64_t row_tiles = (n + kTileN - 1) / kTileN, steps = (k + kTileK - 1) / kTileK;
          const int64_t capacity = int64_t{per_sm} * std::max(1, props.multiprocessors);
          int64_t splits = 1;
          if (row_tiles < capacity)
            splits = std::clamp<int64_t>((capacity + row_tiles - 1) / row_tiles, 1,
                                         std::max<int64_t>(1, steps / kTileMinSplitSteps));
          TileArgs args{w, n, k, quant::row_bytes(qtype, k), m, (steps + splits - 1) / splits, nullptr};
          splits = (steps + args.split_steps - 1) / args.split_steps;
          StoragePtr part;
          if (splits > 1) {
            part = b.alloc(static_cast<size_t>(splits * m * n) * sizeof(float));
            args.part = part->as<float>();
          }
          kernel<<<dim3(static_cast<unsigned>(row_tiles), static_cast<unsigned>(splits)), threads, smem, b.stream()>>>(
              args, x, out);
          WICK_GPU_CHECK_LAUNCH();
          if (splits > 1) {
            const int64_t count = int64_t{m} * n;
            tile_combine_kernel<T><<<grid_for(count, kThreads), kThreads, 0, b.stream()>>>(
                args.part, static_cast<int>(splits), count, out);
            WICK_GPU_CHECK_LAUNCH();
          }
          queued = true;
        };
        if (m <= 16)
          launch.template operator()<1>();
        else if (m <= 32)
          launch.template operator()<2>();
        else
          launch.template operator()<4>();
      }
    });
    return queued;
  }
}

extern template bool launch_tile_rows<f16>(GpuBackend&, QType, const uint8_t*, int64_t, int64_t, const f16*, int, f16*);
extern template bool launch_tile_rows<bf16>(GpuBackend&, QType, const uint8_t*, int64_t, int64_t, const bf16*, int,
                                            bf16*);

}  // namespace wick::gpu::qmm
