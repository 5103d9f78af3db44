// The GPU kernels of the block formats (the launchers are instantiated once per dtype of x, in
// qmatmul_f32.cu, qmatmul_f16.cu and qmatmul_bf16.cu, so that the three compile in parallel).
//   dequantize: one thread per 16 values of a group, ggml's values bit for bit.
//   qmatmul, few rows of x (decode): x rounded to 8 bits per 32 values (inside each block, into
//     shared memory, where it fits), then each group of 32 lanes takes 1 to 4 weight rows at a time,
//     chunk by chunk through shared memory; each lane unpacks a unit of 32 weights once, takes its
//     4-byte integer dot products (dp4a / sdot4) with every row of x, and the lanes sum. Each weight
//     byte is read from memory once. Q4_K, whose blocks are whole 16-byte words, has a kernel of
//     its own that loads each lane's part of a block straight into registers.
//   qmatmul, many rows (prefill): the weight dequantized to x's dtype, then the backend's GEMM.
//   qmatmul_grouped (a mixture's experts): the integer-dot kernels, each block walking the list of
//     (expert, rows) groups that the device holds, passes of a few rows of x over each expert (Q4_K
//     from a few rows a group: qmatmul_mmq.cuh's kernel, over the same list).
// No kernel depends on the warp or wave size: a group of 32 lanes is a warp on NVIDIA and half a
// wave on AMD's wave-64 parts.
#pragma once

#include "gpu/gpu_backend.h"
#include "gpu/mma.cuh"
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
  start_after_inputs();
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
    b.launch_early(dequantize_kernel<Q, T>, grid_for(pieces, kThreads), kThreads, 0, w, pieces, out);
  });
}

// ---- x rounded to 8 bits ----------------------------------------------------------------------

// x rounded to 8 bits per unit (kq::kUnit = 32 values, unrelated to the warp size), laid out for the
// dot kernel: unit u of row t of x has its first 16 bytes at words[2 * t * units + u], its last 16 at
// words[(2 * t + 1) * units + u] (planes of 16-byte words, so that neighbouring lanes read
// neighbouring words), and its ActScale at scale[t * units + u].
struct RoundedX {
  uint4* words;
  kq::ActScale* scale;
  int64_t units;  // per row of x
};

// Rounds x (rows of x.units units) with threads [first, first + count) of a launch, L per unit (2
// or 8), each taking 32 / L contiguous values: one 16-byte word of the layout above (L = 2) or one
// 4-byte part of it (L = 8). The arithmetic is quantize_act's, value for value: the amax of the
// unit (the lanes' maxima exchanged), d = amax / 127, q = round(x / d), and d times the sum of each
// half's q. count is a multiple of 32: every lane of a unit takes part in the exchanges. Each thread
// loads round_batch<L> parts before it rounds any, so that a block rounding x waits for one round
// trip to memory per batch, not one per part (one part of 16 values a batch at L = 2: two batches
// held the dot kernels' copies ahead and 32 values in registers at once, and spilled).
// A block rounding its own copy of x takes 2 lanes per unit: 8, each 4 values, took 3 times the
// instructions (on an H200, a 4096 x 4096 Q4_K product of one row spent more than half of its
// instructions rounding x in each block). The kernel that rounds x once for every block takes 8,
// so that a short x is spread over more threads (its time is one thread's latency).
constexpr int kBlockRoundLanes = 2;
constexpr int kOnceRoundLanes = 8;
template <int L>
constexpr int round_batch = L == 2 ? 1 : 4;

// The n values of x at `from`, widened: as 16-byte loads where `vector` (from 16-byte aligned).
template <int N, typename T>
__device__ __forceinline__ void load_values(const T* from, bool vector, float* v) {
  constexpr int kPerWord = 16 / sizeof(T);
  if (N % kPerWord == 0 && vector) {
#pragma unroll
    for (int j = 0; j < N / kPerWord; ++j) {
      T e[kPerWord];
      const uint4 word = reinterpret_cast<const uint4*>(from)[j];
      __builtin_memcpy(e, &word, sizeof word);
#pragma unroll
      for (int i = 0; i < kPerWord; ++i) v[j * kPerWord + i] = kernels::to_opmath(e[i]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = kernels::to_opmath(from[i]);
  }
}

template <int L, typename I, typename T>
__device__ void round_x_indexed(const T* x, I rows, RoundedX r, I first, I count) {
  constexpr int kValues = kq::kUnit / L, kWords = kValues / 4, kRoundBatch = round_batch<L>;
  static_assert(L == 2 || L == 8);
  const I units = static_cast<I>(r.units), parts = rows * units * L;
  const bool vector = reinterpret_cast<uintptr_t>(x) % 16 == 0;
  for (I base = 0; base < parts; base += kRoundBatch * count) {
    float v[kRoundBatch][kValues];
#pragma unroll
    for (int j = 0; j < kRoundBatch; ++j) {
      const I i = base + j * count + first;
      if (i < parts) {
        load_values<kValues>(x + static_cast<int64_t>(i) * kValues, vector, v[j]);
      } else {
#pragma unroll
        for (int e = 0; e < kValues; ++e) v[j][e] = 0.f;
      }
    }
#pragma unroll
    for (int j = 0; j < kRoundBatch; ++j) {
      // A batch past the last part for every thread (first < count) is left out.
      if (base + j * count >= parts) continue;
      const I i = base + j * count + first;
      const int part = static_cast<int>(i % L);
      float amax = 0.f;
#pragma unroll
      for (int e = 0; e < kValues; ++e) amax = fmaxf(amax, fabsf(v[j][e]));
#pragma unroll
      for (int mask = 1; mask < L; mask *= 2) amax = fmaxf(amax, shfl_xor(amax, mask, L));
      const float d = amax / 127.f;
      const float id = d != 0.f ? 1.f / d : 0.f;
      uint32_t word[kWords] = {};
      int sum = 0;
#pragma unroll
      for (int e = 0; e < kValues; ++e) {
        const int q = static_cast<int>(roundf(v[j][e] * id));
        word[e / 4] |= static_cast<uint32_t>(q & 0xff) << (8 * (e % 4));
        sum += q;
      }
      // The sums of the first and the second 16 values: parts [0, L/2) and [L/2, L).
#pragma unroll
      for (int mask = 1; mask < L / 2; mask *= 2) sum += shfl_xor(sum, mask, L);
      if (i < parts) {
        const I unit = i / L, t = unit / units, u = unit - t * units;
        const int half = part / (L / 2);
        uint4* at = r.words + (2 * static_cast<int64_t>(t) + half) * r.units + u;
        if constexpr (kWords == 4)
          *at = make_uint4(word[0], word[1], word[2], word[3]);
        else
          reinterpret_cast<uint32_t*>(at)[part % (L / 2)] = word[0];
        if (part == 0) {
          r.scale[unit].d = d;
          r.scale[unit].s0 = d * static_cast<float>(sum);
        } else if (part == L / 2) {
          r.scale[unit].s1 = d * static_cast<float>(sum);
        }
      }
    }
  }
}

// round_x_indexed with 32-bit indices where they fit: a 64-bit division is a long call on the GPU.
template <int L, typename T>
__device__ void round_x(const T* x, int64_t rows, RoundedX r, int64_t first, int64_t count) {
  if (rows * r.units * L + (round_batch<L> + 1) * count <= INT32_MAX)
    round_x_indexed<L, uint32_t>(x, static_cast<uint32_t>(rows), r, static_cast<uint32_t>(first),
                                 static_cast<uint32_t>(count));
  else
    round_x_indexed<L, int64_t>(x, rows, r, first, count);
}

// x rounded into global memory: for the products whose rounded x does not fit in a block's shared
// memory.
template <typename T>
__global__ __launch_bounds__(kThreads) void round_x_kernel(const T* x, int64_t rows, RoundedX r) {
  start_after_inputs();
  round_x<kOnceRoundLanes>(x, rows, r, blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x,
                           static_cast<int64_t>(gridDim.x) * blockDim.x);
}

inline size_t rounded_x_bytes(int64_t m, int64_t k) {
  return static_cast<size_t>(m * k) + static_cast<size_t>(m * k / kq::kUnit) * sizeof(kq::ActScale);
}

// The hardware's f16 conversion as load_unit's (dequantize keeps kq::half's, which also keeps a
// NaN's payload; a product with a NaN scale is NaN either way).
struct FastHalf {
  __device__ float operator()(uint16_t bits) const { return mma::f16_to_float(bits); }
};

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

// Where a dot kernel's x is: rounded by each block into its shared memory (kShared), rounded once
// into global memory beforehand (kGlobal), or either, as the launch says (kEither: one instance for
// both, through generic pointers). The first two are each instance's own path; a grouped kernel of
// the other formats keeps kEither, as both paths' registers in its loop over the groups spilled.
enum class XFrom { kShared, kGlobal, kEither };

// The formats whose one-weight dot kernel takes x by each path's own instance (kShared, kGlobal)
// rather than kEither's. On an H200, one row of x, the four products of Llama 3 8B's layer
// (docs/performance-quantized.md, "Mixtral's grouped products"): Q4_0 2-10% faster, Q6_K 1-4%
// faster on three and 2% slower on down, Q8_0 the same; Q5_K 15% faster on q, k, v but 10-27%
// slower on the other three, so it keeps kEither, as do the formats not measured.
template <QType Q>
constexpr bool kXPathOwn = Q == QType::Q4_0 || Q == QType::Q6_K || Q == QType::Q8_0;

// out (m, n) = x (m, k) times w (n, k) transposed, m <= M; x as kFrom says (round_here: for
// kEither, whether the block rounds x). Every group of a block walks the same steps (the block's row
// groups, each in `chunks` chunks), so that barriers are uniform.
template <QType Q, int M, int R, XFrom kFrom, typename T>
__device__ __forceinline__ void dot_rows(const uint8_t* __restrict__ w, int64_t n, int64_t k, int64_t row_bytes,
                                         const T* __restrict__ x, bool round_here, RoundedX rx, int m,
                                         T* __restrict__ out) {
  if constexpr (kFrom != XFrom::kEither) round_here = kFrom == XFrom::kShared;
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
    round_x<kBlockRoundLanes>(x, m, rx, threadIdx.x, blockDim.x);
  }
  __syncthreads();  // x is rounded
  const int64_t units = rx.units;
  constexpr bool kShared = kFrom == XFrom::kShared;
  const uint4* xw = kShared ? quant_smem + kGroups * R * S::kWords : rx.words;
  const kq::ActScale* xs = kShared ? reinterpret_cast<const kq::ActScale*>(xw + 2 * m * units) : rx.scale;
  auto x_word = [](const uint4* at) { return kFrom == XFrom::kGlobal ? __ldg(at) : *at; };

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
            const uint4 lo = x_word(xw + 2 * t * units + u), hi = x_word(xw + (2 * t + 1) * units + u);
            const uint32_t aw[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
            const kq::ActScale a = xs[t * units + u];
#pragma unroll
            for (int r = 0; r < R; ++r) {
              const auto* bytes = reinterpret_cast<const uint8_t*>(stage + r * S::kWords) + offset[r];
              const Block& b = reinterpret_cast<const Block*>(bytes)[local / S::kUnitsPerBlock];
              const kq::Unit unit = kq::load_unit<Q>(b, local % S::kUnitsPerBlock, FastHalf{});
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

// ---- the weight's first bytes into L2 while the kernel before still runs ---------------------------

// The weight bytes the blocks of a product ask into L2 before their inputs are ready (they are
// placed early: runtime.h), all blocks together: a third of an H100's or H200's 50 MiB, so that the
// kernel before and the rest of the product keep theirs. The product reads them first.
constexpr int64_t kPrefetchBytes = int64_t{16} << 20;

// Asks for bytes [from, to) of w (size bytes in all) into L2, trimmed to the whole 16-byte words
// inside w.
__device__ inline void prefetch_span(const uint8_t* w, int64_t size, int64_t from, int64_t to) {
  const uint64_t base = reinterpret_cast<uintptr_t>(w), first_word = (base + 15) & ~uint64_t{15};
  const uint64_t lo = std::max((base + static_cast<uint64_t>(from)) & ~uint64_t{15}, first_word);
  const uint64_t hi = std::min((base + static_cast<uint64_t>(std::min(to, size)) + 15) & ~uint64_t{15},
                               (base + static_cast<uint64_t>(size)) & ~uint64_t{15});
  if (hi > lo) prefetch_l2(reinterpret_cast<const void*>(lo), static_cast<uint32_t>(hi - lo));
}

template <QType Q, int M, int R, typename T>
__global__ __launch_bounds__(kThreads) void dot_rows_kernel(const uint8_t* __restrict__ w, int64_t n, int64_t k,
                                                            int64_t row_bytes, const T* __restrict__ x, bool round_here,
                                                            RoundedX rx, int m, T* __restrict__ out) {
  if (threadIdx.x == 0) {  // the block's first row group (dot_rows)
    constexpr int64_t kRows = Staging<Q, R>::kRowsPerBlock;
    const int64_t from = int64_t{blockIdx.x} * kRows * row_bytes;
    prefetch_span(w, n * row_bytes, from, from + std::min(kRows * row_bytes, kPrefetchBytes / gridDim.x));
  }
  start_after_inputs();
  if constexpr (kXPathOwn<Q>) {
    if (round_here)
      dot_rows<Q, M, R, XFrom::kShared>(w, n, k, row_bytes, x, true, rx, m, out);
    else
      dot_rows<Q, M, R, XFrom::kGlobal>(w, n, k, row_bytes, x, false, rx, m, out);
  } else {
    dot_rows<Q, M, R, XFrom::kEither>(w, n, k, row_bytes, x, round_here, rx, m, out);
  }
}

// ---- few rows times Q4_K, straight from memory ------------------------------------------------

// Q4_K blocks are 9 aligned 16-byte words: d, dmin and the 12 scale bytes, then 128 bytes of quants,
// bytes 32p..32p+31 holding groups 2p (low nibbles) and 2p+1 (high nibbles). Each group of 32 lanes
// takes one weight row at a time, kK4Blocks blocks per step: lane l takes block l / 4 of the step
// and its groups 2c, 2c+1 (c = l % 4), loading the block's first word and its 32 bytes of quants as
// three 16-byte words straight into registers, one step ahead of the math. Nothing is staged and
// no scale is unpacked twice: on an H100 (Nsight Compute, 1 x 4096 times 28672x4096) the staged
// kernel above issued 20.2 million instructions, 176 per 32 weights, and read at 0.64 of copy; this
// one 13.6 million (before the rounding of x lost its 64-bit divisions) and 0.83.
constexpr int kK4LanesPerBlock = 4;
constexpr int kK4Blocks = kLanes / kK4LanesPerBlock;  // blocks per group and step
// Steps loaded ahead of the one computed. Two (80 registers, 3 blocks per multiprocessor) ran no
// faster on an H100 than one (64 registers, 4 blocks): 4096x4096 7.86 against 8.27 us, 28672x4096
// 27.03 against 26.57, 4096x14336 17.49 against 16.54; the Llama 3 8B Q4_K decode 354.5 against
// 353.5 tokens/s.
constexpr int kK4Ahead = 1;
constexpr int kK4MinBlocks = kK4Ahead == 1 ? 4 : 3;  // per multiprocessor: at most 64 or 80 registers
// HIP reads __launch_bounds__'s second argument as waves per execution unit, another budget: the
// kernel takes its block size alone there.
#if defined(WICK_BACKEND_HIP)
#define WICK_K4_LAUNCH_BOUNDS __launch_bounds__(kThreads)
#else
#define WICK_K4_LAUNCH_BOUNDS __launch_bounds__(kThreads, kK4MinBlocks)
#endif
static_assert(sizeof(kq::BlockQ4_K) == 9 * 16);

struct K4Piece {
  uint4 head;   // d, dmin, scales
  uint4 qs[2];  // the lane's 32 bytes of quants
};

// acc[t] += the dot product of the lane's part of a Q4_K block (its groups 2c and 2c + 1, x's units
// u and u + 1) and the same values of row t of x, whose rounded words and scales are at xw and xs
// (shared memory where the block rounded x, else global memory, read through the read-only path).
template <int M, bool kShared>
__device__ __forceinline__ void k4_dot(const K4Piece& p, int c, int u, const uint4* __restrict__ xw,
                                       const kq::ActScale* __restrict__ xs, int units, int m, float* acc) {
  int sc[2], mn[2];
  const uint32_t scale_words[3] = {p.head.y, p.head.z, p.head.w};
  kq::k4_pair_scale_min(scale_words, c, sc, mn);
  const FastHalf half;
  const float d = half(static_cast<uint16_t>(p.head.x)), dmin = half(static_cast<uint16_t>(p.head.x >> 16));
  const float dw0 = d * static_cast<float>(sc[0]), dw1 = d * static_cast<float>(sc[1]);
  const float mw0 = dmin * static_cast<float>(mn[0]), mw1 = dmin * static_cast<float>(mn[1]);
  const uint32_t q[8] = {p.qs[0].x, p.qs[0].y, p.qs[0].z, p.qs[0].w, p.qs[1].x, p.qs[1].y, p.qs[1].z, p.qs[1].w};
  auto word = [](const uint4* at) { return kShared ? *at : __ldg(at); };
#pragma unroll
  for (int t = 0; t < M; ++t) {
    if (t < m) {
      const uint4* lo = xw + 2 * t * units + u;
      const uint4 x0 = word(lo), x1 = word(lo + units), x2 = word(lo + 1), x3 = word(lo + units + 1);
      const uint32_t a0[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
      const uint32_t a1[8] = {x2.x, x2.y, x2.z, x2.w, x3.x, x3.y, x3.z, x3.w};
      int s0 = 0, s1 = 0;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        s0 = Dot4{}(q[i] & 0x0f0f0f0fu, a0[i], s0);
        s1 = Dot4{}((q[i] >> 4) & 0x0f0f0f0fu, a1[i], s1);
      }
      // Units u and u + 1 (u even) are 24 bytes at an 8-byte boundary: d0 s0 | s1 d1 | s0 s1.
      const auto* e = reinterpret_cast<const float2*>(xs + t * units + u);
      const float2 e0 = kShared ? e[0] : __ldg(e), e1 = kShared ? e[1] : __ldg(e + 1),
                   e2 = kShared ? e[2] : __ldg(e + 2);
      float a = acc[t];
      a = fmaf(dw0 * e0.x, static_cast<float>(s0), a);
      a = fmaf(-mw0, e0.y + e1.x, a);
      a = fmaf(dw1 * e1.y, static_cast<float>(s1), a);
      acc[t] = fmaf(-mw1, e2.x + e2.y, a);
    }
  }
}

// A row is done: its kSeg lanes sum each row of x's part and the first of them writes it (a row
// past n is not written); acc starts again at 0.
template <int M, int kSeg, typename T>
__device__ __forceinline__ void k4_row_done(float* acc, int lane, int m, T* __restrict__ out, int64_t n, int64_t row) {
#pragma unroll
  for (int t = 0; t < M; ++t) {
    const float sum = nn::group_all<kSeg>(acc[t], nn::ShuffleValue{}, [](float a, float b) { return a + b; });
    if (t < m && lane % kSeg == 0 && row < n) out[t * n + row] = kernels::from_opmath<T>(sum);
    acc[t] = 0.f;
  }
}

// v, unchanged, but as the result of an instruction the compiler cannot see through, so that it
// computes what depends on v where the code does, not earlier (NVIDIA; elsewhere nothing).
template <typename V>
__device__ __forceinline__ void opaque(V& v) {
#if defined(__CUDA_ARCH__)
  static_assert(sizeof(V) == 4 || sizeof(V) == 8);
  if constexpr (sizeof(V) == 8)
    asm volatile("" : "+l"(v));
  else
    asm volatile("" : "+r"(v));
#else
  (void)v;
#endif
}

// Whether a weight takes q4k_rows: Q4_K at a 16-byte boundary, with rows counted in 32 bits (a row
// index plus the grid's groups of lanes stays below 2^31). Else the generic dot kernel takes it.
inline bool takes_q4k_rows(QType qtype, const uint8_t* w, int64_t n) {
  return qtype == QType::Q4_K && reinterpret_cast<uintptr_t>(w) % 16 == 0 && n <= INT32_MAX / 2;
}

// Calls f.template operator()<kSeg>() with the lanes q4k_rows gives a weight row of k values times
// M rows of x: half a group where a row has at most 4 blocks and x one row (a decode step of one
// token: Qwen3-30B-A3B's down product 7.92 -> 5.81 us a layer on an H200); else a group. With 8
// rows of x, the half-group kernel spilled more (52 bytes, 48 reloaded, against 40 and 20), and
// was not measured.
template <int M, typename F>
void dispatch_q4k_seg(int64_t k, F&& f) {
  if constexpr (M == 1)
    if (k <= 4 * kq::Format<QType::Q4_K>::kValues) return f.template operator()<kLanes / 2>();
  f.template operator()<kLanes>();
}

// The group's rows are first, first + groups, ..., each in `steps` steps of kK4Blocks blocks (the
// last step of a row may hold fewer); the loads run one step ahead of the math, through a pointer
// that moves by constant strides (no 64-bit products per step).
// kSeg: lanes a weight row takes, 32 or 16. With 16 (rows of at most 4 blocks: k <= 1024, as the
// experts of width 768 of Qwen3-30B-A3B's down product), each group takes two adjacent rows a step,
// one a half: a row of 3 blocks would keep 12 of 32 lanes at work and pay a sum over the group for
// each. The "rows" below are then pairs of rows, and each lane's own is 2 * row + its half. A row's
// sum is the same bits either way (the lanes past its blocks add zeros, last).
// kShared: the block rounds x into its shared memory and reads it there (else x is rx, rounded once
// in global memory). The callers choose it at the top of the kernel, so that each instance holds one
// path's registers: with both paths in one body, and a grouped kernel's loop around it, the kernel
// went past 64 registers and spilled (docs/performance-quantized.md, "Mixtral's grouped products").
template <int M, bool kShared, int kSeg, typename T>
__device__ __forceinline__ void q4k_rows(const uint8_t* __restrict__ w, int64_t n_rows, int64_t k,
                                         const T* __restrict__ x, RoundedX rx, int m, T* __restrict__ out) {
  static_assert(kK4Ahead == 1, "one step in flight: the pointer below walks one step ahead");
  static_assert(kSeg == kLanes || kSeg == kLanes / 2);
  constexpr int kPer = kLanes / kSeg;                  // weight rows a group takes a step
  constexpr int kSegBlocks = kSeg / kK4LanesPerBlock;  // blocks of a row a step
  extern __shared__ uint4 quant_smem[];
  // The values below depend on the launch alone; this keeps a grouped kernel from computing them
  // once before its loop over the groups and holding them in registers through every group.
  unsigned tid = threadIdx.x;
  opaque(tid);
  opaque(k);
  opaque(n_rows);
  const int lane = static_cast<int>(tid % kLanes), c = lane % kK4LanesPerBlock;
  const int half = lane / kSeg;                             // the lane's row of the step's kPer
  const int blk = lane % kSeg / kK4LanesPerBlock;           // the lane's block within a step
  const int64_t n = (n_rows + kPer - 1) / kPer;             // the loop's rows: runs of kPer rows
  const bool last_pair_full = (n_rows - 1) % kPer >= half;  // the lane has a row in the last run
  const int64_t row_blocks = k / kq::Format<QType::Q4_K>::kValues;
  const int steps = static_cast<int>((row_blocks + kSegBlocks - 1) / kSegBlocks);
  const bool last_full = blk < row_blocks - int64_t{steps - 1} * kSegBlocks;  // the lane has a block in the last step
  const int groups = static_cast<int>(gridDim.x) * kGroups;
  const int first = static_cast<int>(blockIdx.x + gridDim.x * (tid / kLanes));
  constexpr int kStep = kSegBlocks * 9;  // 16-byte words of a step
  const int64_t row_words = row_blocks * 9;
  // Whether the lane's own row of run r is a row of the weight.
  auto own = [&](int r) { return kPer == 1 || r < n - 1 || last_pair_full; };
  // The next step to load: (ahead_row, ahead_step) at `ahead`; from the last step of a row to the
  // first of the group's next row is `wrap` words.
  int ahead_row = first;
  int ahead_step = 0;
  const uint4* ahead = reinterpret_cast<const uint4*>(w) + (int64_t{first} * kPer + half) * row_words + blk * 9;
  const int64_t wrap = int64_t{groups} * kPer * row_words - int64_t{steps - 1} * kStep;
  auto fetch = [&](K4Piece& p) {
    if ((ahead_step < steps - 1 || last_full) && own(ahead_row)) {
      p.head = __ldg(ahead);
      p.qs[0] = __ldg(ahead + 1 + 2 * c);
      p.qs[1] = __ldg(ahead + 2 + 2 * c);
    }
    if (++ahead_step == steps) {
      ahead_step = 0;
      ahead_row += groups;
      ahead += wrap;
    } else {
      ahead += kStep;
    }
  };
  K4Piece piece = {};
  if (ahead_row < n) fetch(piece);
  if constexpr (kShared) {  // under the first loads
    rx.words = quant_smem;
    rx.scale = reinterpret_cast<kq::ActScale*>(rx.words + 2 * m * rx.units);
    round_x<kBlockRoundLanes>(x, m, rx, tid, blockDim.x);
  }
  __syncthreads();  // x is rounded

  const int units = static_cast<int>(rx.units);
  // x as shared memory where the block rounded it (the loads then take the shared path), else rx.
  const uint4* xw = kShared ? quant_smem : rx.words;
  const kq::ActScale* xs = kShared ? reinterpret_cast<const kq::ActScale*>(quant_smem + 2 * m * units) : rx.scale;
  float acc[M];
#pragma unroll
  for (int t = 0; t < M; ++t) acc[t] = 0.f;
  int step = 0;
  int row = first;
  // Step (row, step) from `cur` while the next one loads into `next`; false when the rows are done.
  auto step_from = [&](const K4Piece& cur, K4Piece& next) {
    if (ahead_row < n) fetch(next);
    if ((step < steps - 1 || last_full) && own(row)) {
      const int u = (step * kSegBlocks + blk) * (kq::Format<QType::Q4_K>::kValues / kq::kUnit) + 2 * c;
      k4_dot<M, kShared>(cur, c, u, xw, xs, units, m, acc);
    }
    if (++step == steps) {
      k4_row_done<M, kSeg>(acc, lane, m, out, n_rows, int64_t{row} * kPer + half);
      step = 0;
      row += groups;
    }
    return row < n;
  };
  // Two pieces in turn, so that neither is copied to the other.
  K4Piece other;
  while (row < n && step_from(piece, other) && step_from(other, piece)) {
  }
}

template <int M, int kSeg, typename T>
__global__ WICK_K4_LAUNCH_BOUNDS void q4k_rows_kernel(const uint8_t* __restrict__ w, int64_t n, int64_t k,
                                                      const T* __restrict__ x, bool round_here, RoundedX rx, int m,
                                                      T* __restrict__ out) {
  if (threadIdx.x % kLanes == 0) {  // a lane of each group: the group's first rows (q4k_rows)
    // A run of kLanes / kSeg adjacent rows at a time (q4k_rows's rows).
    const int64_t run_bytes = k / kq::Format<QType::Q4_K>::kValues * int64_t{sizeof(kq::BlockQ4_K)} * (kLanes / kSeg);
    const int64_t runs = (n + kLanes / kSeg - 1) / (kLanes / kSeg), groups = int64_t{gridDim.x} * kGroups;
    const int64_t size = n * (run_bytes / (kLanes / kSeg));
    int64_t budget = kPrefetchBytes / groups;
    for (int64_t run = blockIdx.x + int64_t{gridDim.x} * (threadIdx.x / kLanes); run < runs && budget >= 16;
         run += groups) {
      prefetch_span(w, size, run * run_bytes, run * run_bytes + std::min(run_bytes, budget));
      budget -= run_bytes;
    }
  }
  start_after_inputs();
  if (round_here)
    q4k_rows<M, true, kSeg>(w, n, k, x, rx, m, out);
  else
    q4k_rows<M, false, kSeg>(w, n, k, x, rx, m, out);
}

// ---- grouped products: each block's expert and rows from a list -------------------------------

// quant::qmatmul_grouped's groups on the device: row i of `groups` is [expert, first row, end row),
// expert e's weight the n rows at w + e * n * row_bytes.
struct Groups {
  const int64_t* groups;
  int64_t count;  // g: the rows of `groups`
  int64_t experts;
  int64_t rows_of_x;  // p: the rows of x and out
  KernelError* err;
};
constexpr int kGroupedChunk = 8;  // rows of x per pass over an expert's weight

// Calls body(weight, first row, rows) for each chunk of at most M rows of the groups blockIdx.y,
// blockIdx.y + gridDim.y, ... (the same for every thread of the block, so that barriers stay
// uniform), a barrier after each; a group naming an expert or rows out of range is reported and
// left out. The blocks along x share each group's rows: however the tokens chose, every block has
// work while a group has (with one group of all the rows, every block takes its rows).
template <int M, typename F>
__device__ __forceinline__ void for_group_chunks(const uint8_t* w, int64_t expert_bytes, Groups g, F&& body) {
  for (int64_t i = blockIdx.y; i < g.count; i += gridDim.y) {
    const int64_t* entry = g.groups + 3 * i;
    const int64_t e = entry[0], first = entry[1], end = entry[2];
    const bool bad_rows = first < 0 || first > end || end > g.rows_of_x, bad_expert = e < 0 || e >= g.experts;
    if (first == end && !bad_rows) continue;  // an empty group, whatever its expert
    if (bad_rows || bad_expert) {
      if (blockIdx.x == 0 && threadIdx.x == 0) {
        if (bad_expert)
          report_group_error(g.err, 0, e, g.experts);
        else
          report_group_error(g.err, 1, first < 0 || first > end ? first : end, g.rows_of_x);
      }
      continue;
    }
    for (int64_t t0 = first; t0 < end; t0 += M) {
      body(w + e * expert_bytes, t0, static_cast<int>(std::min<int64_t>(M, end - t0)));
      __syncthreads();  // the next chunk's x is rounded into the same shared memory
    }
  }
}

// x rounded once into global memory, seen from row t0 as its first.
__device__ inline RoundedX rows_from(RoundedX rx, bool round_here, int64_t t0) {
  if (!round_here) {
    rx.words += 2 * t0 * rx.units;
    rx.scale += t0 * rx.units;
  }
  return rx;
}

// `one_row`: every row of x is its first (one token's row for all its pairs: M is then 1).
template <QType Q, int M, typename T>
__global__ __launch_bounds__(kThreads) void dot_rows_grouped_kernel(const uint8_t* __restrict__ w, int64_t n, int64_t k,
                                                                    int64_t row_bytes, const T* __restrict__ x,
                                                                    bool one_row, bool round_here, RoundedX rx,
                                                                    Groups g, T* __restrict__ out) {
  start_after_inputs();  // the groups are an earlier kernel's
  for_group_chunks<M>(w, n * row_bytes, g, [&](const uint8_t* we, int64_t t0, int m) {
    const int64_t tx = one_row ? 0 : t0;
    dot_rows<Q, M, 1, XFrom::kEither>(we, n, k, row_bytes, x + tx * k, round_here, rows_from(rx, round_here, tx), m,
                                      out + t0 * n);
  });
  zero_rows_no_group_names(g.groups, g.count, g.experts, g.rows_of_x, n, out, kernels::from_opmath<T>(0.f));
}

template <int M, int kSeg, typename T>
__global__ WICK_K4_LAUNCH_BOUNDS void q4k_rows_grouped_kernel(const uint8_t* __restrict__ w, int64_t n, int64_t k,
                                                              const T* __restrict__ x, bool one_row, bool round_here,
                                                              RoundedX rx, Groups g, T* __restrict__ out) {
  const int64_t expert_bytes = n * (k / kq::Format<QType::Q4_K>::kValues) * int64_t{sizeof(kq::BlockQ4_K)};
  start_after_inputs();  // the groups are an earlier kernel's
  auto rows = [&]<bool kShared>() {
    for_group_chunks<M>(w, expert_bytes, g, [&](const uint8_t* we, int64_t t0, int m) {
      const int64_t tx = one_row ? 0 : t0;
      q4k_rows<M, kShared, kSeg>(we, n, k, x + tx * k, rows_from(rx, kShared, tx), m, out + t0 * n);
    });
  };
  if (round_here)
    rows.template operator()<true>();
  else
    rows.template operator()<false>();
  zero_rows_no_group_names(g.groups, g.count, g.experts, g.rows_of_x, n, out, kernels::from_opmath<T>(0.f));
}
#undef WICK_K4_LAUNCH_BOUNDS

constexpr size_t kSharedBudget = 48 * 1024;  // the default limit of a block's shared memory

// Calls f.template operator()<M>() with M the smallest instantiated count of x's rows >= m (<= 16).
template <typename F>
void dispatch_x_rows(int m, F&& f) {
  if (m == 1)
    f.template operator()<1>();
  else if (m == 2)
    f.template operator()<2>();
  else if (m <= 4)
    f.template operator()<4>();
  else if (m <= 8)
    f.template operator()<8>();
  else
    f.template operator()<16>();
}

// Where x is rounded for a dot kernel whose blocks hold `stage` bytes of shared memory of their own:
// in every block where that takes each thread one batch of loads and x fits beside the stages (the
// block's shared memory is then `shared` bytes); else once, here, into global memory by a kernel of
// its own. Every block rounding a long x costs more than the extra launch (on an H100, 1 x 14336
// q4_0: 0.43 of copy rounding in each block, 0.59 rounding once), and a short x the other way round
// (1 x 4096: 0.32 against 0.20).
struct XRounding {
  RoundedX rx;
  bool here = false;
  size_t shared = 0;
  StoragePtr storage;  // x rounded once
};

// Whether each block rounds m rows of x (k values) itself, beside `stage` bytes of its own.
inline bool rounds_in_block(int64_t m, int64_t k, size_t stage) {
  return m * (k / kq::kUnit) * kBlockRoundLanes <= int64_t{kThreads} * round_batch<kBlockRoundLanes> &&
         stage + rounded_x_bytes(m, k) <= kSharedBudget;
}

// x (m rows of k values) rounded once, into global memory, by a kernel of its own.
template <typename T>
XRounding round_x_once(GpuBackend& b, const T* x, int64_t m, int64_t k) {
  XRounding r;
  r.rx = RoundedX{nullptr, nullptr, k / kq::kUnit};
  r.storage = b.alloc(rounded_x_bytes(m, k));
  r.rx.words = static_cast<uint4*>(r.storage->data());
  r.rx.scale = reinterpret_cast<kq::ActScale*>(r.rx.words + 2 * m * r.rx.units);
  b.launch_early(round_x_kernel<T>, grid_for(m * r.rx.units * kOnceRoundLanes, kThreads), kThreads, 0, x, m, r.rx);
  return r;
}

template <typename T>
XRounding round_x_for(GpuBackend& b, const T* x, int m, int64_t k, size_t stage) {
  if (!rounds_in_block(m, k, stage)) {
    XRounding r = round_x_once(b, x, m, k);
    r.shared = stage;
    return r;
  }
  XRounding r;
  r.rx = RoundedX{nullptr, nullptr, k / kq::kUnit};
  r.here = true;
  r.shared = stage + rounded_x_bytes(m, k);
  return r;
}

// As many blocks of `kernel` as the device holds at once, or fewer where `units` (rows or row groups,
// kGroups per block at a time) leave some without work, each taking an equal share (one more for
// some), so that the rounding of x is shared by many rows.
inline unsigned resident_grid(const GpuBackend& b, const void* kernel, size_t shared, int64_t units, int per_sm = 0) {
  if (per_sm == 0) per_sm = b.blocks_per_sm(kernel, kThreads, shared);
  const int64_t resident = std::max<int64_t>(1, int64_t{per_sm} * b.props().multiprocessors);
  const int64_t per_block = (units + resident - 1) / resident;
  return static_cast<unsigned>((units + per_block - 1) / per_block);
}

// The products of m <= M rows of x, by the kernels instantiated for M rows (one of dispatch_x_rows's
// counts). Each (M, dtype) is instantiated in a translation unit of its own (src/CMakeLists.txt
// writes them), as these are most of the block formats' kernels.
template <int M, typename T>
void launch_dot_rows_of(GpuBackend& b, QType qtype, const uint8_t* w, int64_t n, int64_t k, const T* x, int m, T* out) {
  if (takes_q4k_rows(qtype, w, n)) {
    const XRounding r = round_x_for(b, x, m, k, 0);
    dispatch_q4k_seg<M>(k, [&]<int kSeg>() {
      const auto kernel = q4k_rows_kernel<M, kSeg, T>;
      const int64_t per_block = kGroups * (kLanes / kSeg);  // weight rows a block takes a step
      const unsigned grid =
          resident_grid(b, reinterpret_cast<const void*>(kernel), r.shared, (n + per_block - 1) / per_block);
      b.launch_early(kernel, grid, kThreads, r.shared, w, n, k, x, r.here, r.rx, m, out);
    });
    return;
  }
  const int64_t row_bytes = quant::row_bytes(qtype, k);
  kq::dispatch_qtype(qtype, [&]<QType Q>() {
    // Batch-invariant mode (GpuQuantKernels::matmul) takes the instances for 1 and 8 rows of x as
    // giving a row the same bits: both take one weight row per group, so the same units per lane.
    static_assert(kMaxRows<Q, 1> == 1 && kMaxRows<Q, 8> == 1);
    constexpr int kRows = kMaxRows<Q, M>;
    const size_t stage = std::max(Staging<Q, kRows>::kSharedBytes, Staging<Q, 1>::kSharedBytes);
    const XRounding r = round_x_for(b, x, m, k, stage);
    // kRows rows per group where that still gives every slot of the device a block; else one.
    const auto wide = dot_rows_kernel<Q, M, kRows, T>;
    const int per_sm = b.blocks_per_sm(reinterpret_cast<const void*>(wide), kThreads, r.shared);
    const int64_t groups = (n + kGroups * kRows - 1) / (kGroups * kRows);
    if constexpr (kRows > 1) {
      if (groups < int64_t{per_sm} * b.props().multiprocessors) {
        const auto one = dot_rows_kernel<Q, M, 1, T>;
        const unsigned grid =
            resident_grid(b, reinterpret_cast<const void*>(one), r.shared, (n + kGroups - 1) / kGroups);
        b.launch_early(one, grid, kThreads, r.shared, w, n, k, row_bytes, x, r.here, r.rx, m, out);
        return;
      }
    }
    const unsigned grid = resident_grid(b, reinterpret_cast<const void*>(wide), r.shared, groups, per_sm);
    b.launch_early(wide, grid, kThreads, r.shared, w, n, k, row_bytes, x, r.here, r.rx, m, out);
  });
}

#define WICK_QMM_DOT_ROWS_OF(M, T) \
  void launch_dot_rows_of<M, T>(GpuBackend&, QType, const uint8_t*, int64_t, int64_t, const T*, int, T*)
#define WICK_QMM_DOT_ROWS_OF_ALL(prefix, T)   \
  prefix template WICK_QMM_DOT_ROWS_OF(1, T); \
  prefix template WICK_QMM_DOT_ROWS_OF(2, T); \
  prefix template WICK_QMM_DOT_ROWS_OF(4, T); \
  prefix template WICK_QMM_DOT_ROWS_OF(8, T); \
  prefix template WICK_QMM_DOT_ROWS_OF(16, T)
WICK_QMM_DOT_ROWS_OF_ALL(extern, float);
WICK_QMM_DOT_ROWS_OF_ALL(extern, f16);
WICK_QMM_DOT_ROWS_OF_ALL(extern, bf16);
#undef WICK_QMM_DOT_ROWS_OF_ALL

// m_fixed: the kernels instantiated for that many rows (m or more, one of dispatch_x_rows's), else
// for the fewest that hold m.
template <typename T>
void launch_dot_rows(GpuBackend& b, QType qtype, const uint8_t* w, int64_t n, int64_t k, const T* x, int m, T* out,
                     int m_fixed) {
  dispatch_x_rows(m_fixed > 0 ? m_fixed : m, [&]<int M>() { launch_dot_rows_of<M, T>(b, qtype, w, n, k, x, m, out); });
}

// Calls f.template operator()<M>() with M 1 (passes of one row: a single sequence) or
// kGroupedChunk: two instances a format, as the dots' time per row barely depends on M.
template <typename F>
void dispatch_grouped_rows(int m, F&& f) {
  if (m == 1)
    f.template operator()<1>();
  else
    f.template operator()<kGroupedChunk>();
}

// quant::qmatmul_grouped's product on the device: x (p, k) times the weights of `groups` (g rows of
// the groups), max_rows (at least 1) sizing the chunks of rows (a larger group takes more); the rows
// of out (p, n) that no group names are written with zeros. One launch of about as many blocks as
// the device holds at once. `one_row`: x is one row of k values standing for all p (a single
// token's pairs), rounded once and read for every row, a row a pass.
template <typename T>
void launch_dot_rows_grouped(GpuBackend& b, QType qtype, const uint8_t* w, int64_t n, int64_t k, const T* x, int64_t p,
                             bool one_row, const int64_t* groups, int64_t g, int64_t experts, int max_rows, T* out) {
  const Groups gs{groups, g, experts, p, b.device_error()};
  // The integer dots cost about the same per row of x from 1 to 16 rows (compute, not the weight's
  // bytes, sets their pace there): passes of one row where no group has more, else of up to
  // kGroupedChunk (docs/performance-quantized.md: 16 sequences of Qwen3-30B-A3B and Mixtral 8x7B
  // with 4, 8 and 16).
  const int chunk = one_row ? 1 : std::min(max_rows, kGroupedChunk);
  // x rounded by each block, a chunk of at most M rows at a time, where that fits; else once, here,
  // all p rows (or the one).
  auto rounding = [&]<int M>(size_t stage) {
    return round_x_for(b, x, rounds_in_block(M, k, stage) ? M : one_row ? 1 : static_cast<int>(p), k, stage);
  };
  // Along x, as many blocks as the device holds at once or as an expert has row groups (kGroups rows
  // each), each an equal share; along y, groups side by side where one expert leaves blocks idle.
  // Where the device holds at least kSideBySide blocks for each group (a step of a few tokens: their
  // experts), every group has blocks of its own, so that no block waits for one expert's rows
  // before it reads the next's (Qwen3-30B-A3B, one token: 8 groups, 66 blocks each on an H200).
  // rows_per_group: weight rows a group of lanes takes a step.
  auto grid_of = [&](const void* kernel, size_t shared, int64_t rows_per_group = 1) {
    constexpr int64_t kSideBySide = 16;
    const int64_t resident =
        std::max<int64_t>(1, int64_t{b.blocks_per_sm(kernel, kThreads, shared)} * b.props().multiprocessors);
    const int64_t per_block = kGroups * rows_per_group;
    const int64_t units = (n + per_block - 1) / per_block, blocks = std::clamp<int64_t>(resident, 1, units);
    if (g > 0 && resident / g >= kSideBySide)
      return dim3(static_cast<unsigned>(std::min(resident / g, units)), static_cast<unsigned>(g));
    const int64_t units_per_block = (units + blocks - 1) / blocks, x = (units + units_per_block - 1) / units_per_block;
    return dim3(static_cast<unsigned>(x), static_cast<unsigned>(std::clamp<int64_t>((resident + x - 1) / x, 1, g)));
  };
  if (takes_q4k_rows(qtype, w, n)) {
    dispatch_grouped_rows(chunk, [&]<int M>() {
      const XRounding r = rounding.template operator()<M>(0);
      dispatch_q4k_seg<M>(k, [&]<int kSeg>() {
        const auto kernel = q4k_rows_grouped_kernel<M, kSeg, T>;
        const dim3 grid = grid_of(reinterpret_cast<const void*>(kernel), r.shared, kLanes / kSeg);
        b.launch_early(kernel, grid, kThreads, r.shared, w, n, k, x, one_row, r.here, r.rx, gs, out);
      });
    });
    return;
  }
  const int64_t row_bytes = quant::row_bytes(qtype, k);
  kq::dispatch_qtype(qtype, [&]<QType Q>() {
    dispatch_grouped_rows(chunk, [&]<int M>() {
      const XRounding r = rounding.template operator()<M>(Staging<Q, 1>::kSharedBytes);
      const auto kernel = dot_rows_grouped_kernel<Q, M, T>;
      const dim3 grid = grid_of(reinterpret_cast<const void*>(kernel), r.shared);
      b.launch_early(kernel, grid, kThreads, r.shared, w, n, k, row_bytes, x, one_row, r.here, r.rx, gs, out);
    });
  });
}

// The launchers, each instantiated in the translation unit of its dtype of x (qmatmul_f32.cu,
// qmatmul_f16.cu, qmatmul_bf16.cu).
extern template void launch_dequantize<float>(const GpuBackend&, QType, const uint8_t*, int64_t, int64_t, float*);
extern template void launch_dequantize<f16>(const GpuBackend&, QType, const uint8_t*, int64_t, int64_t, f16*);
extern template void launch_dequantize<bf16>(const GpuBackend&, QType, const uint8_t*, int64_t, int64_t, bf16*);
extern template void launch_dot_rows<float>(GpuBackend&, QType, const uint8_t*, int64_t, int64_t, const float*, int,
                                            float*, int);
extern template void launch_dot_rows<f16>(GpuBackend&, QType, const uint8_t*, int64_t, int64_t, const f16*, int, f16*,
                                          int);
extern template void launch_dot_rows<bf16>(GpuBackend&, QType, const uint8_t*, int64_t, int64_t, const bf16*, int,
                                           bf16*, int);
extern template void launch_dot_rows_grouped<float>(GpuBackend&, QType, const uint8_t*, int64_t, int64_t, const float*,
                                                    int64_t, bool, const int64_t*, int64_t, int64_t, int, float*);
extern template void launch_dot_rows_grouped<f16>(GpuBackend&, QType, const uint8_t*, int64_t, int64_t, const f16*,
                                                  int64_t, bool, const int64_t*, int64_t, int64_t, int, f16*);
extern template void launch_dot_rows_grouped<bf16>(GpuBackend&, QType, const uint8_t*, int64_t, int64_t, const bf16*,
                                                   int64_t, bool, const int64_t*, int64_t, int64_t, int, bf16*);

}  // namespace wick::gpu::qmm
