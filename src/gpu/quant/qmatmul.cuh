// The GPU kernels of the block formats (the launchers are instantiated once per dtype of x, in
// qmatmul_f32.cu, qmatmul_f16.cu and qmatmul_bf16.cu, so that the three compile in parallel).
//   dequantize: one thread per 16 values of a group, ggml's values bit for bit.
//   qmatmul, few rows of x (decode): x rounded to 8 bits per 32 values (inside each block, into
//     shared memory, where it fits), then each group of 32 lanes takes 1 to 4 weight rows at a time,
//     chunk by chunk through shared memory; each lane unpacks a unit of 32 weights once, takes its
//     4-byte integer dot products (dp4a / sdot4) with every row of x, and the lanes sum. Each weight
//     byte is read from memory once.
//   qmatmul, many rows (prefill): the weight dequantized to x's dtype, then the backend's GEMM.
// No kernel depends on the warp or wave size: a group of 32 lanes is a warp on NVIDIA and half a
// wave on AMD's wave-64 parts.
#pragma once

#include "gpu/gpu_backend.h"
#include "gpu/nn/slices.cuh"
#include "kernels/numeric.h"
#include "kernels/quant.h"

namespace wick::gpu::qmm {

namespace kq = kernels::quant;
using quant::QType;

// The 4-byte signed integer dot product of the hardware, where it has one.
struct Dot4 {
  __device__ int operator()(uint32_t a, uint32_t b, int c) const {
#if defined(__CUDA_ARCH__)
    return __dp4a(static_cast<int>(a), static_cast<int>(b), c);
#elif defined(__gfx906__) || defined(__gfx908__) || defined(__gfx90a__) || defined(__gfx940__) || \
    defined(__gfx941__) || defined(__gfx942__) || defined(__gfx1030__)
    return __builtin_amdgcn_sdot4(static_cast<int>(a), static_cast<int>(b), c, false);
#elif defined(__gfx1100__) || defined(__gfx1101__) || defined(__gfx1102__)
    return __builtin_amdgcn_sudot4(true, static_cast<int>(a), true, static_cast<int>(b), c, false);
#else
    return kq::dot4_bytes(a, b, c);
#endif
  }
};

constexpr int kThreads = kBlock;
constexpr int kLanes = 32;  // lanes per weight row

// ---- dequantize -------------------------------------------------------------------------------

// One thread per kDequantWords group words (16 values, within one group: every format's groups hold
// 16 or 32 values), so that the group's scales are unpacked once per 16 values and each thread
// writes 32 (16-bit T) or 64 (f32) contiguous bytes as 16-byte stores.
constexpr int kDequantWords = 4;

template <QType Q, typename T>
__global__ __launch_bounds__(kThreads) void dequantize_kernel(const uint8_t* w, int64_t pieces, T* out) {
  using F = kq::Format<Q>;
  constexpr int kWords = F::kGroup / 4;
  static_assert(kWords % kDequantWords == 0);
  const auto* blocks = reinterpret_cast<const typename F::Block*>(w);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < pieces;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t first = i * kDequantWords, group = first / kWords;
    const typename F::Block& b = blocks[group / F::kGroups];
    const int g = static_cast<int>(group % F::kGroups), v = static_cast<int>(first % kWords);
    const kq::GroupScale s = kq::group_scale<Q>(b, g);
    T vals[4 * kDequantWords];
#pragma unroll
    for (int j = 0; j < kDequantWords; ++j) {
      const uint32_t word = kq::group_word<Q>(b, g, v + j);
#pragma unroll
      for (int e = 0; e < 4; ++e)
        vals[4 * j + e] = kernels::from_opmath<T>(kq::group_value<Q>(s, kq::word_value<Q>(word, e)));
    }
    constexpr size_t kBytes = sizeof vals;
    constexpr size_t kStores = kBytes / sizeof(uint4);
    uint4 p[kStores];
    __builtin_memcpy(p, vals, kBytes);
    uint4* to = reinterpret_cast<uint4*>(out) + i * static_cast<int64_t>(kStores);
#pragma unroll
    for (size_t j = 0; j < kStores; ++j) to[j] = p[j];
  }
}

template <typename T>
void launch_dequantize(const GpuBackend& b, QType qtype, const uint8_t* w, int64_t rows, int64_t cols, T* out) {
  kq::dispatch_qtype(qtype, [&]<QType Q>() {
    const int64_t pieces = rows * cols / (4 * kDequantWords);
    dequantize_kernel<Q, T><<<grid_for(pieces, kThreads), kThreads, 0, b.stream()>>>(w, pieces, out);
    WICK_GPU_CHECK_LAUNCH();
  });
}

// ---- x rounded to 8 bits ----------------------------------------------------------------------

// x rounded to 8 bits per unit (kq::kUnit = 32 values, unrelated to the warp size), laid out for the
// dot kernel: unit u of row t of x has its first 16 bytes at lo(t, u), its last 16 at hi(t, u)
// (planes of 16-byte words, so that neighbouring lanes read neighbouring words), and its ActScale
// at scale[t * units + u].
struct RoundedX {
  uint4* words;
  kq::ActScale* scale;
  int64_t units;  // per row of x
  __device__ const uint4& lo(int t, int64_t u) const { return words[2 * t * units + u]; }
  __device__ const uint4& hi(int t, int64_t u) const { return words[(2 * t + 1) * units + u]; }
};

// Rounds x (rows of x.units units) with threads [first, first + count) of a launch, 8 per unit and 4
// values each, so that neighbouring threads read neighbouring values. The arithmetic is
// quantize_act's, value for value: the amax of the unit, d = amax / 127, q = round(x / d), and d
// times the sums of each half's q. count is a multiple of 32: every lane of a logical warp takes
// part in the shuffles. Each thread loads kRoundBatch parts before it rounds any, so that a block
// rounding x waits for one round trip to memory per batch, not one per part.
constexpr int kRoundLanes = 8;
constexpr int kRoundBatch = 4;

template <typename T>
__device__ void round_x(const T* x, int64_t rows, RoundedX r, int64_t first, int64_t count) {
  const int64_t parts = rows * r.units * kRoundLanes;
  for (int64_t base = 0; base < parts; base += kRoundBatch * count) {
    float v[kRoundBatch][4];
#pragma unroll
    for (int j = 0; j < kRoundBatch; ++j) {
      const int64_t i = base + j * count + first;
#pragma unroll
      for (int e = 0; e < 4; ++e) v[j][e] = i < parts ? kernels::to_opmath(x[4 * i + e]) : 0.f;
    }
#pragma unroll
    for (int j = 0; j < kRoundBatch; ++j) {
      const int64_t i = base + j * count + first;
      const int part = static_cast<int>(i % kRoundLanes);
      float amax = fmaxf(fmaxf(fabsf(v[j][0]), fabsf(v[j][1])), fmaxf(fabsf(v[j][2]), fabsf(v[j][3])));
#pragma unroll
      for (int mask = 1; mask < kRoundLanes; mask *= 2) amax = fmaxf(amax, shfl_xor(amax, mask, kRoundLanes));
      const float d = amax / 127.f;
      const float id = d != 0.f ? 1.f / d : 0.f;
      uint32_t word = 0;
      int sum = 0;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int q = static_cast<int>(roundf(v[j][e] * id));
        word |= static_cast<uint32_t>(q & 0xff) << (8 * e);
        sum += q;
      }
      // The sums of the first and the second 16 values: parts 0-3 and 4-7.
      sum += shfl_xor(sum, 1, kRoundLanes);
      sum += shfl_xor(sum, 2, kRoundLanes);
      if (i < parts) {
        const int64_t unit = i / kRoundLanes, t = unit / r.units, u = unit % r.units;
        reinterpret_cast<uint32_t*>(r.words + (2 * t + part / 4) * r.units + u)[part % 4] = word;
        if (part == 0) {
          r.scale[unit].d = d;
          r.scale[unit].s0 = d * static_cast<float>(sum);
        } else if (part == 4) {
          r.scale[unit].s1 = d * static_cast<float>(sum);
        }
      }
    }
  }
}

// x rounded into global memory: for the products whose rounded x does not fit in a block's shared
// memory.
template <typename T>
__global__ __launch_bounds__(kThreads) void round_x_kernel(const T* x, int64_t rows, RoundedX r) {
  round_x(x, rows, r, blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x,
          static_cast<int64_t>(gridDim.x) * blockDim.x);
}

inline size_t rounded_x_bytes(int64_t m, int64_t k) {
  return static_cast<size_t>(m * k) + static_cast<size_t>(m * k / kq::kUnit) * sizeof(kq::ActScale);
}

// ---- few rows: integer dot products -----------------------------------------------------------

// Each group of kLanes lanes takes R weight rows at a time, and of each a chunk of kBlocks blocks,
// kUnitsPerLane units per lane: about kStepBytes per step, whatever R. The unit of x a lane reads
// serves R rows. The chunks are read as aligned 16-byte words (any block alignment: a chunk's first
// word may start before it) into registers one step ahead of the math, then parked in the group's
// shared memory, from which each lane unpacks its units. R = 1 keeps the most groups at work on a
// small weight; the largest R, kMaxRows, falls as the rows of x grow (the accumulators' registers).
constexpr int kGroups = kThreads / kLanes;
constexpr int kStepBytes = 2304;  // weight bytes a group reads per step, about

template <QType Q>
constexpr int units_per_lane(int rows) {
  using F = kq::Format<Q>;
  return std::max(1, kStepBytes * (F::kValues / kq::kUnit) / (rows * kLanes * static_cast<int>(sizeof(typename F::Block))));
}

// One row of x takes one weight row per group: on an H100, 1 x 4096 times 14336 rows of q4_k, q5_k
// and q6_k ran 7-11% faster so than with 4 rows, and the other formats the same.
template <QType Q, int M>
constexpr int kMaxRows = std::min(units_per_lane<Q>(1), M == 1 ? 1 : M <= 2 ? 4 : M <= 4 ? 2 : 1);

template <QType Q, int R>
struct Staging {
  using Block = typename kq::Format<Q>::Block;
  static constexpr int kUnitsPerBlock = kq::Format<Q>::kValues / kq::kUnit;
  static constexpr int kUnitsPerLane = units_per_lane<Q>(R);
  static constexpr int kBlocks = std::max(1, kUnitsPerLane * kLanes / kUnitsPerBlock);
  static constexpr int kBytes = kBlocks * static_cast<int>(sizeof(Block));  // of one row's chunk
  static constexpr int kWords = (kBytes + 30) / 16;  // 16-byte words covering a chunk at any alignment
  static constexpr int kWordsPerLane = (R * kWords + kLanes - 1) / kLanes;
  static constexpr int kRowsPerBlock = kGroups * R;
  static constexpr size_t kSharedBytes = sizeof(uint4) * kGroups * R * kWords;
};

// Orders the shared-memory writes and reads of one group of kLanes lanes: the warp's barrier on
// NVIDIA; the block's on AMD, where HIP has no barrier for part of a wave (every group of a block
// walks the same steps, so the block's barrier is reached uniformly).
__device__ inline void group_sync() {
#if defined(__CUDA_ARCH__)
  __syncwarp();
#else
  __syncthreads();
#endif
}

// 16 bytes of w at byte `at` (16-aligned), the bytes at or past `size` read as 0.
__device__ inline uint4 load_word(const uint8_t* w, int64_t at, int64_t size) {
  if (at + 16 <= size) return *reinterpret_cast<const uint4*>(w + at);
  uint8_t bytes[16];
  for (int i = 0; i < 16; ++i) bytes[i] = at + i < size ? w[at + i] : 0;
  uint4 v;
  __builtin_memcpy(&v, bytes, sizeof v);
  return v;
}

// out (m, n) = x (m, k) times w (n, k) transposed, m <= M. x is rounded to 8 bits by each block into
// shared memory (round_here), or was rounded into `rx` beforehand. Every group of a block walks the
// same steps (the block's row groups, each in `chunks` chunks), so that barriers are uniform.
template <QType Q, int M, int R, typename T>
__global__ __launch_bounds__(kThreads) void dot_rows_kernel(const uint8_t* __restrict__ w, int64_t n, int64_t k,
                                                            int64_t row_bytes, const T* __restrict__ x,
                                                            bool round_here, RoundedX rx, int m,
                                                            T* __restrict__ out) {
  using S = Staging<Q, R>;
  using Block = typename S::Block;
  extern __shared__ uint4 quant_smem[];
  const int lane = static_cast<int>(threadIdx.x % kLanes), group = static_cast<int>(threadIdx.x / kLanes);
  uint4* stage = quant_smem + group * R * S::kWords;
  const int64_t row_blocks = k / kq::Format<Q>::kValues, size = n * row_bytes;
  const int chunks = static_cast<int>((row_blocks + S::kBlocks - 1) / S::kBlocks);
  const int64_t row_groups = (n + S::kRowsPerBlock - 1) / S::kRowsPerBlock;

  // The group's rows of row group g: first_row(g) + r, r < R.
  auto first_row = [&](int64_t g) { return g * S::kRowsPerBlock + group * R; };
  uint4 ahead[S::kWordsPerLane];
  auto fetch = [&](int64_t g, int chunk) {
#pragma unroll
    for (int i = 0; i < S::kWordsPerLane; ++i) {
      const int word = lane + i * kLanes, r = word / S::kWords;
      const int64_t row = first_row(g) + r;
      if (word < R * S::kWords && row < n) {
        const int64_t from = (row * row_bytes + int64_t{chunk} * S::kBytes) & ~int64_t{15};
        ahead[i] = load_word(w, from + 16 * (word % S::kWords), size);
      }
    }
  };
  int64_t g = blockIdx.x;
  int chunk = 0;
  if (g < row_groups) fetch(g, chunk);

  if (round_here) {  // under the first fetch
    rx.words = quant_smem + kGroups * R * S::kWords;
    rx.scale = reinterpret_cast<kq::ActScale*>(rx.words + 2 * m * rx.units);
    round_x(x, m, rx, threadIdx.x, blockDim.x);
  }
  __syncthreads();  // x is rounded

  float acc[R][M];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < M; ++t) acc[r][t] = 0.f;
  while (g < row_groups) {
    group_sync();  // the last step's reads of the stage are done
#pragma unroll
    for (int i = 0; i < S::kWordsPerLane; ++i) {
      const int word = lane + i * kLanes;
      if (word < R * S::kWords) stage[word] = ahead[i];
    }
    group_sync();
    const int64_t next_g = chunk + 1 < chunks ? g : g + gridDim.x;
    const int next_chunk = chunk + 1 < chunks ? chunk + 1 : 0;
    if (next_g < row_groups) fetch(next_g, next_chunk);

    const int blocks = static_cast<int>(std::min<int64_t>(S::kBlocks, row_blocks - int64_t{chunk} * S::kBlocks));
    int offset[R];  // of each row's chunk in its stage
#pragma unroll
    for (int r = 0; r < R; ++r) offset[r] = static_cast<int>(((first_row(g) + r) * row_bytes + int64_t{chunk} * S::kBytes) & 15);
#pragma unroll
    for (int i = 0; i < S::kUnitsPerLane; ++i) {
      const int local = lane + i * kLanes;  // the unit within the chunk
      if (local < blocks * S::kUnitsPerBlock) {
        const int64_t u = int64_t{chunk} * S::kBlocks * S::kUnitsPerBlock + local;  // the unit of x
#pragma unroll
        for (int t = 0; t < M; ++t) {
          if (t < m) {
            const uint4 lo = rx.lo(t, u), hi = rx.hi(t, u);
            const uint32_t aw[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
            const kq::ActScale a = rx.scale[t * rx.units + u];
#pragma unroll
            for (int r = 0; r < R; ++r) {
              const auto* bytes = reinterpret_cast<const uint8_t*>(stage + r * S::kWords) + offset[r];
              const Block& b = reinterpret_cast<const Block*>(bytes)[local / S::kUnitsPerBlock];
              const kq::Unit unit = kq::load_unit<Q>(b, local % S::kUnitsPerBlock);
              acc[r][t] += kq::unit_dot<Q>(unit, aw, a, Dot4{});
            }
          }
        }
      }
    }
    if (chunk == chunks - 1) {  // the rows are done: the lanes sum
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int64_t row = first_row(g) + r;
#pragma unroll
        for (int t = 0; t < M; ++t) {
          const float sum = nn::group_all<kLanes>(acc[r][t], nn::ShuffleValue{}, [](float a, float b) { return a + b; });
          if (t < m && lane == 0 && row < n) out[t * n + row] = kernels::from_opmath<T>(sum);
          acc[r][t] = 0.f;
        }
      }
    }
    g = next_g;
    chunk = next_chunk;
  }
}

constexpr size_t kSharedBudget = 48 * 1024;  // the default limit of a block's shared memory

template <typename T>
void launch_dot_rows(GpuBackend& b, QType qtype, const uint8_t* w, int64_t n, int64_t k, const T* x, int m, T* out) {
  const int64_t row_bytes = quant::row_bytes(qtype, k);
  const Stream stream = b.stream();
  RoundedX rx{nullptr, nullptr, k / kq::kUnit};
  StoragePtr rounded;
  bool round_here = true;
  kq::dispatch_qtype(qtype, [&]<QType Q>() {
    // One group's rows at a time, R of them.
    auto launch = [&]<int M, int R>(size_t smem, int64_t row_groups, int per_sm) {
      const auto kernel = dot_rows_kernel<Q, M, R, T>;
      if (per_sm == 0) per_sm = b.blocks_per_sm(reinterpret_cast<const void*>(kernel), kThreads, smem);
      // As many blocks as the device holds at once, each taking an equal share of the row groups
      // (one more for some), so that the rounding of x is shared by many rows.
      const int64_t resident = std::max<int64_t>(1, int64_t{per_sm} * b.props().multiprocessors);
      const int64_t per_block = (row_groups + resident - 1) / resident;
      const auto grid = static_cast<unsigned>((row_groups + per_block - 1) / per_block);
      kernel<<<grid, kThreads, smem, stream>>>(w, n, k, row_bytes, x, round_here, rx, m, out);
    };
    auto go = [&]<int M>() {
      constexpr int kRows = kMaxRows<Q, M>;
      const size_t stage = std::max(Staging<Q, kRows>::kSharedBytes, Staging<Q, 1>::kSharedBytes);
      // x is rounded in every block where that takes each thread one batch of loads and x fits
      // beside the stages; else once, into global memory, by a kernel of its own. Every block
      // rounding a long x costs more than the extra launch (on an H100, 1 x 14336 q4_0: 0.43 of
      // copy rounding in each block, 0.59 rounding once), and a short x the other way round (1 x
      // 4096: 0.32 against 0.20).
      round_here = int64_t{m} * rx.units * kRoundLanes <= int64_t{kThreads} * kRoundBatch &&
                   stage + rounded_x_bytes(m, k) <= kSharedBudget;
      if (!round_here) {
        rounded = b.alloc(rounded_x_bytes(m, k));
        rx.words = static_cast<uint4*>(rounded->data());
        rx.scale = reinterpret_cast<kq::ActScale*>(rx.words + 2 * m * rx.units);
        round_x_kernel<T><<<grid_for(m * rx.units * kRoundLanes, kThreads), kThreads, 0, stream>>>(x, m, rx);
        WICK_GPU_CHECK_LAUNCH();
      }
      const size_t smem = stage + (round_here ? rounded_x_bytes(m, k) : 0);
      // kRows rows per group where that still gives every slot of the device a block; else one.
      const int per_sm = b.blocks_per_sm(reinterpret_cast<const void*>(dot_rows_kernel<Q, M, kRows, T>), kThreads, smem);
      const int64_t groups = (n + kGroups * kRows - 1) / (kGroups * kRows);
      if constexpr (kRows > 1) {
        if (groups < int64_t{per_sm} * b.props().multiprocessors)
          return launch.template operator()<M, 1>(smem, (n + kGroups - 1) / kGroups, 0);
      }
      launch.template operator()<M, kRows>(smem, groups, per_sm);
    };
    if (m == 1)
      go.template operator()<1>();
    else if (m == 2)
      go.template operator()<2>();
    else if (m <= 4)
      go.template operator()<4>();
    else if (m <= 8)
      go.template operator()<8>();
    else
      go.template operator()<16>();
  });
  WICK_GPU_CHECK_LAUNCH();
}

// The launchers, each instantiated in the translation unit of its dtype of x (qmatmul_f32.cu,
// qmatmul_f16.cu, qmatmul_bf16.cu).
extern template void launch_dequantize<float>(const GpuBackend&, QType, const uint8_t*, int64_t, int64_t, float*);
extern template void launch_dequantize<f16>(const GpuBackend&, QType, const uint8_t*, int64_t, int64_t, f16*);
extern template void launch_dequantize<bf16>(const GpuBackend&, QType, const uint8_t*, int64_t, int64_t, bf16*);
extern template void launch_dot_rows<float>(GpuBackend&, QType, const uint8_t*, int64_t, int64_t, const float*, int,
                                            float*);
extern template void launch_dot_rows<f16>(GpuBackend&, QType, const uint8_t*, int64_t, int64_t, const f16*, int, f16*);
extern template void launch_dot_rows<bf16>(GpuBackend&, QType, const uint8_t*, int64_t, int64_t, const bf16*, int,
                                           bf16*);

}  // namespace wick::gpu::qmm
