// Q4_K products of a few to a few dozen rows of x on the 8-bit integer matrix units (mma::FragA8),
// as ggml's MMQ kernels work: x rounded to 8 bits per super-block of 256 values (round_x_super_kernel,
// cpu/quant/superblock.h's rounding value for value), the weight's 4-bit quants taken as they lie,
// each 32-value group's integer products in one matrix product, weighted by the group's integer
// scale and added in 32 bits over the super-block, which then meets floats once:
//   y += (d_x * d) * sum_g sc_g (q_x . q)_g - dmin * sum_g m_g (d_x * sum q_x)_g.
// The work comes in items of kMmqN weight rows, a range of k and chunks of up to 8 * NT rows of x,
// the rows of one group of quant::qmatmul_grouped (an expert's weight and the rows of x that chose
// it) or of the whole product (a group of more rows than the launch was sized for takes its chunks
// in turn):
//   - each step's blocks (one Q4_K block of each weight row), x's bytes and scales for them are
//     copied into shared memory as they lie (16-byte words, asynchronously, kStages - 1 steps ahead
//     of the one computed, across items too);
//   - each wave takes 16 weight rows as the products' A operands: it unpacks its rows' scales and
//     minimums once a step, builds A straight from the quants' words (a shift and a mask per 4
//     weights), reads x's rows 8 at a time as B with ldmatrix (so that a few rows of x cost a few
//     rows' work), and scales each group's integer sums into f32 accumulators; the minimums' term
//     of the step's 8 groups is one tf32 matrix product (mma::mma_tf32).
// Nothing is widened to f16 or bf16 in shared memory, which bound the tile kernel of
// qmatmul_tiles.cuh (about 14 instructions a weight on an H200; the other formats still take it).
// A block walks the items b, b + gridDim.x, ..., empty groups skipped; k is split into ranges where
// that fills the device's resident blocks best (tile_splits), their f32 sums added in a fixed order.
// A product of up to 8 rows with enough steps is streamed instead (MmqArgs::streamed): each block an
// equal run of the tiles' steps, the tiles two blocks share added by a second kernel.
// Devices without the 8-bit units (mma::available_i8: AMD's so far) take the other kernels.
#pragma once

#include <algorithm>
#include <type_traits>

#include "gpu/quant/qmatmul_tiles.cuh"

namespace wick::gpu::qmm {

constexpr int kMmqWaves = 8;
constexpr int kMmqN = 16 * kMmqWaves;         // weight rows per item: 16 a wave
constexpr int kMmqK = 256;                    // values of k per step: one Q4_K block of each row
constexpr int kMmqUnits = kMmqK / kq::kUnit;  // x's units per step: the block's groups
constexpr int kMmqBlockWords = static_cast<int>(sizeof(kq::BlockQ4_K) / 16);
constexpr int kMmqXLd = kMmqK + 16;  // bytes of a row of x's step in shared memory (ldmatrix's banks)
constexpr int kMmqScaleWords = kMmqUnits * static_cast<int>(sizeof(kq::ActScale)) / 16;  // of a row's step
// Bytes of a row of x's scales in shared memory: one 16-byte word more than they take, so that the
// lanes reading one unit of 4 even (or odd) rows meet 4 different banks.
constexpr int kMmqXsLd = 16 * (kMmqScaleWords + 1);
// Words of a weight row in a wave's table of scales: its groups' integer scales sc, then its d (at
// kMmqUnits) and dmin (at kMmqUnits + 1) as floats, then padding, so that 8 lanes reading 8 rows meet
// 8 different banks.
constexpr int kMmqScaleLd = 12;
constexpr int kMmqThreads = kMmqWaves * mma::kWave;
// Steps per block at the least for a streamed launch (MmqArgs::streamed): with fewer, each block's
// first copies and the partial sums' second kernel cost more than the blocks left idle (an H200's
// 4096-row products of 4 to 16 rows: 1-2 steps a block took 7-14% longer).
constexpr int64_t kMmqStreamSteps = 4;
constexpr int kMmqWeightWords = kMmqN * kMmqBlockWords;  // 16-byte words of a step's weight blocks
constexpr int kMmqWeightCopies = (kMmqWeightWords + kMmqThreads - 1) / kMmqThreads;  // a thread's
static_assert(sizeof(kq::BlockQ4_K) % 16 == 0 && kq::Format<QType::Q4_K>::kValues == kMmqK);
static_assert(kMmqUnits * sizeof(kq::ActScale) % 16 == 0 && kMmqUnits == 8 && kMmqScaleLd > kMmqUnits + 1);

// NT tiles of 8 rows of x an item.
template <int NT>
struct MmqShape {
  static constexpr int kRows = 8 * NT;  // rows of x held
  // Buffers of steps in flight: the one computed and kStages - 1 copied ahead. Up to 8 rows of x, one
  // ahead, so that four blocks fit a multiprocessor (in 64 registers a thread): on an H200, Llama 3
  // 8B's products of 4 and 8 rows then took 15-27% less time for down (4096x14336, no longer
  // streamed), 4-5% less for q, k, v and 3-4% more for o than with two ahead and three blocks. For
  // 16 rows, three blocks with one ahead (80 registers) took up to 13% more than two with two ahead.
  static constexpr int kStages = NT == 1 ? 2 : 3;
  // A buffer: the weight's blocks, x's bytes, x's scales.
  static constexpr size_t kWeight = size_t{kMmqN} * kMmqBlockWords * 16;
  static constexpr size_t kX = size_t{kRows} * kMmqXLd;
  static constexpr size_t kXScales = size_t{kRows} * kMmqXsLd;
  static constexpr size_t kBuffer = kWeight + kX + kXScales;
  // Then each wave's table of its 16 rows' scales.
  static constexpr size_t kScales = size_t{kMmqWaves} * 16 * kMmqScaleLd * sizeof(float);
  static constexpr size_t kShared = kStages * kBuffer + kScales;
  // Blocks of the grid per multiprocessor that the registers are held to (the shared memory's count).
  static constexpr int kMinBlocks = NT == 1 ? 4 : NT <= 4 ? 2 : 1;
  static_assert(kWeight % 16 == 0 && kX % 16 == 0 && kXScales % 16 == 0);
};

struct MmqArgs {
  const uint8_t* w;
  int64_t n, k, expert_bytes;  // expert_bytes: the distance between the experts' weights
  RoundedX rx;                 // every row of x, rounded
  const int64_t* groups;       // [expert, first, end) rows; null: one group of every row of x
  int64_t count, experts, rows_of_x;
  KernelError* err;
  uint32_t tiles, splits, chunks;  // items: count x chunks (of 8 * NT rows) x splits x tiles
  int64_t split_steps;             // steps per range of k (the last may have fewer)
  // Streamed (one group of at most 8 * NT rows, one range of k): block b of the grid takes the
  // steps [units * b / B, units * (b + 1) / B) of the units = tiles x steps, tile by tile, so that
  // every block has the same work however the tiles divide among them; a tile whose steps two or
  // more blocks share is summed by mmq_stream_combine_kernel from each one's partial sums.
  bool streamed;
  // splits > 1: (splits, rows_of_x, n) partial sums. Streamed: (B, 2, rows_of_x, kMmqN), the
  // partial sums of a block's first and last tiles where they are not whole (null where no tile is
  // shared). Else null.
  float* part;
};

// The first step (of tiles x steps) that block b of `blocks` takes in a streamed launch, and the
// block that takes step u.
__host__ __device__ inline int64_t mmq_stream_first(int64_t units, int64_t blocks, int64_t b) {
  return units * b / blocks;
}
__host__ __device__ inline int64_t mmq_stream_block(int64_t units, int64_t blocks, int64_t u) {
  return ((u + 1) * blocks - 1) / units;
}

// x rounded per super-block of kMmqK values for this kernel (as ggml's Q8_K, and the CPU's
// cpu/quant/superblock.h, value for value): d = max |x| / 127 over the super-block, q = round(x / d),
// in RoundedX's layout, every unit of a super-block holding the same d (and d times the sums of its
// halves' q). With one d_x per step, a step's eight groups are summed in integers, each weighted by
// its integer scale, and meet floats once (mmq_q4k_kernel). 32 lanes a super-block, 8 values a lane:
// lane l holds values [8 l, 8 l + 8), half (l % 4) / 2 of unit l / 4.
constexpr int kSuperLanes = 32;
constexpr int kSuperValues = kMmqK / kSuperLanes;
static_assert(kSuperValues == 8 && kq::kUnit / kSuperValues == 4);

template <typename T>
__global__ __launch_bounds__(kThreads) void round_x_super_kernel(const T* x, int64_t blocks, RoundedX r) {
  start_after_inputs();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x, block = i / kSuperLanes;
  const int lane = static_cast<int>(i % kSuperLanes), part = lane % 4;
  // Every lane of a super-block takes part in the exchanges; those past the last hold zeros.
  float v[kSuperValues];
  if (block < blocks) {
    load_values<kSuperValues>(x + block * kMmqK + kSuperValues * lane, reinterpret_cast<uintptr_t>(x) % 16 == 0, v);
  } else {
#pragma unroll
    for (int e = 0; e < kSuperValues; ++e) v[e] = 0.f;
  }
  float amax = 0.f;
#pragma unroll
  for (int e = 0; e < kSuperValues; ++e) amax = fmaxf(amax, fabsf(v[e]));
#pragma unroll
  for (int mask = 1; mask < kSuperLanes; mask *= 2) amax = fmaxf(amax, shfl_xor(amax, mask, kSuperLanes));
  const float d = amax / 127.f;
  const float id = d != 0.f ? 1.f / d : 0.f;
  uint32_t word[2] = {};
  int sum = 0;
#pragma unroll
  for (int e = 0; e < kSuperValues; ++e) {
    const int q = static_cast<int>(roundf(v[e] * id));
    word[e / 4] |= static_cast<uint32_t>(q & 0xff) << (8 * (e % 4));
    sum += q;
  }
  sum += shfl_xor(sum, 1, kSuperLanes);  // the half's 16 values: this lane's and its neighbour's
  if (block >= blocks) return;
  const int64_t units_before = block * kMmqUnits, t = units_before / r.units;
  const int64_t unit = units_before + lane / 4, u = unit - t * r.units;
  uint4* at = r.words + (2 * t + part / 2) * r.units + u;
  reinterpret_cast<uint2*>(at)[part % 2] = make_uint2(word[0], word[1]);
  if (part == 0) {
    r.scale[unit].d = d;
    r.scale[unit].s0 = d * static_cast<float>(sum);
  } else if (part == 2) {
    r.scale[unit].s1 = d * static_cast<float>(sum);
  }
}

// x (m rows of k values, k a multiple of kMmqK) rounded per super-block, into global memory.
template <typename T>
XRounding round_x_super(GpuBackend& b, const T* x, int64_t m, int64_t k) {
  XRounding r;
  r.rx = RoundedX{nullptr, nullptr, k / kq::kUnit};
  r.storage = b.alloc(rounded_x_bytes(m, k));
  r.rx.words = static_cast<uint4*>(r.storage->data());
  r.rx.scale = reinterpret_cast<kq::ActScale*>(r.rx.words + 2 * m * r.rx.units);
  const int64_t blocks = m * (k / kMmqK);
  b.launch_early(round_x_super_kernel<T>, grid_for(blocks * kSuperLanes, kThreads), kThreads, 0, x, blocks, r.rx);
  return r;
}

// kMinBlocks blocks of 8 waves per multiprocessor, as their shared memory allows (four for up to 8
// rows of x: at most 64 registers); HIP reads the second argument as another budget (and runs no
// body here).
#if defined(WICK_BACKEND_HIP)
#define WICK_MMQ_LAUNCH_BOUNDS(blocks)
#else
#define WICK_MMQ_LAUNCH_BOUNDS(blocks) __launch_bounds__(kMmqWaves * 32, blocks)
#endif

template <int NT, typename T>
__global__ WICK_MMQ_LAUNCH_BOUNDS(MmqShape<NT>::kMinBlocks) void mmq_q4k_kernel(MmqArgs a, T* __restrict__ out) {
#if WICK_GPU_MMA_I8
  using S = MmqShape<NT>;
  extern __shared__ uint4 mmq_smem[];
  uint8_t* const base = reinterpret_cast<uint8_t*>(mmq_smem);
  auto weight = [&](int buf) { return reinterpret_cast<uint4*>(base + buf * S::kBuffer); };
  auto xq = [&](int buf) { return reinterpret_cast<int8_t*>(base + buf * S::kBuffer + S::kWeight); };
  auto xscale = [&](int buf) { return base + buf * S::kBuffer + S::kWeight + S::kX; };
  const int tid = static_cast<int>(threadIdx.x);
  const int wave = tid / mma::kWave;
  float* const table = reinterpret_cast<float*>(base + S::kStages * S::kBuffer) + wave * 16 * kMmqScaleLd;
  const int64_t steps = a.k / kMmqK, row_bytes = steps * int64_t{sizeof(kq::BlockQ4_K)};
  const uint32_t items = a.tiles * a.splits * a.chunks * static_cast<uint32_t>(a.count), stride = gridDim.x;
  // Where this thread's copies of a step's weight words start, from the item's first row's step
  // (the launcher keeps an item's rows within 32 bits).
  uint32_t from_row[kMmqWeightCopies];
#pragma unroll
  for (int j = 0; j < kMmqWeightCopies; ++j) {
    const int i = tid + j * kMmqThreads, r = i / kMmqBlockWords;
    from_row[j] = static_cast<uint32_t>(r * row_bytes) + 16 * static_cast<uint32_t>(i - r * kMmqBlockWords);
  }

  // A place in the block's sequence: an item (its expert's weight, first weight row, rows of x and
  // range of k) and a step of it, the same in every thread.
  struct Cursor {
    uint32_t item;
    const uint8_t* w;
    int64_t n0, row0, end, split, step, last;
    int m;
    int64_t first;  // streamed: the first step of the tile this block takes
    int slot;       // streamed: 0 for the block's first tile, 1 for the others
  };
  // Streamed: the block's steps.
  const int64_t units = int64_t{a.tiles} * steps;
  const int64_t own_first = mmq_stream_first(units, gridDim.x, blockIdx.x),
                own_end = mmq_stream_first(units, gridDim.x, int64_t{blockIdx.x} + 1);
  // Streamed: the cursor at step u of the units, the end where u is the block's end.
  auto enter = [&](Cursor& c, int64_t u) {
    if (u >= own_end) {
      c.item = items;
      return;
    }
    const int64_t tile = u / steps;
    c.item = static_cast<uint32_t>(tile);
    c.w = a.w;
    c.n0 = tile * kMmqN;
    c.row0 = 0;
    c.end = a.rows_of_x;
    c.m = static_cast<int>(std::min<int64_t>(S::kRows, a.rows_of_x));
    c.step = c.first = u - tile * steps;
    c.last = std::min(steps, own_end - tile * steps);
    c.slot = u == own_first ? 0 : 1;
  };
  // The item at c.item or the first after it (in the block's sequence) that has rows of x.
  auto start = [&](Cursor& c) {
    for (; c.item < items; c.item += stride) {
      uint32_t i = c.item;
      const uint32_t tile = i % a.tiles;
      i /= a.tiles;
      const uint32_t split = i % a.splits;
      i /= a.splits;
      const uint32_t chunk = i % a.chunks, group = i / a.chunks;
      int64_t e = 0, first = 0, end = a.rows_of_x;
      if (a.groups != nullptr) {
        const int64_t* entry = a.groups + 3 * int64_t{group};
        e = entry[0], first = entry[1], end = entry[2];
      }
      const bool bad_rows = first < 0 || first > end || end > a.rows_of_x, bad_expert = e < 0 || e >= a.experts;
      if (first == end && !bad_rows) continue;  // an empty group, whatever its expert
      if (bad_rows || bad_expert) {             // reported by the one block of its first item
        if (tile == 0 && split == 0 && chunk == 0 && tid == 0) {
          if (bad_expert)
            report_group_error(a.err, 0, e, a.experts);
          else
            report_group_error(a.err, 1, first < 0 || first > end ? first : end, a.rows_of_x);
        }
        continue;
      }
      const int64_t row0 = first + int64_t{chunk} * S::kRows;
      if (row0 >= end) continue;
      c.w = a.w + e * a.expert_bytes;
      c.n0 = int64_t{tile} * kMmqN;
      c.row0 = row0;
      c.end = end;
      c.m = static_cast<int>(std::min<int64_t>(S::kRows, end - row0));
      c.split = split;
      c.step = int64_t{split} * a.split_steps;
      c.last = std::min(steps, c.step + a.split_steps);
      return;
    }
  };
  // The next step: of the item's range of k, or of its next chunk of rows of x (a group of more
  // rows than max_rows: chunks, chunks + a.chunks, ...), or of the next item.
  auto advance = [&](Cursor& c) {
    if (++c.step < c.last) return;
    if (a.streamed) return enter(c, int64_t{c.item} * steps + c.last);
    const int64_t more = c.row0 + int64_t{a.chunks} * S::kRows;
    if (more < c.end) {
      c.row0 = more;
      c.m = static_cast<int>(std::min<int64_t>(S::kRows, c.end - more));
      c.step = c.split * a.split_steps;
      return;
    }
    c.item += stride;
    start(c);
  };

  // Step c.step of c's item into buffer `buf`: its weight rows' blocks, its rows of x and their
  // scales, as asynchronous copies (committed by the caller as one group).
  auto issue = [&](const Cursor& c, int buf) {
    const uint8_t* blocks = c.w + c.n0 * row_bytes + c.step * int64_t{sizeof(kq::BlockQ4_K)};
    // Rows past n are never stored.
    const int words = static_cast<int>(std::min<int64_t>(kMmqN, a.n - c.n0)) * kMmqBlockWords;
#pragma unroll
    for (int j = 0; j < kMmqWeightCopies; ++j)
      if (tid + j * kMmqThreads < words) mma::copy_async_16(weight(buf) + tid + j * kMmqThreads, blocks + from_row[j]);
    for (int i = tid; i < c.m * 2 * kMmqUnits; i += kMmqThreads) {  // each unit's two 16-byte halves
      const int t = i / (2 * kMmqUnits), j = i % (2 * kMmqUnits);
      mma::copy_async_16(xq(buf) + t * kMmqXLd + 16 * j,
                         a.rx.words + (2 * (c.row0 + t) + j % 2) * a.rx.units + c.step * kMmqUnits + j / 2);
    }
    const auto* from = a.rx.scale + c.row0 * a.rx.units + c.step * kMmqUnits;
    for (int i = tid; i < c.m * kMmqScaleWords; i += kMmqThreads) {
      const int t = i / kMmqScaleWords, j = i - t * kMmqScaleWords;
      mma::copy_async_16(xscale(buf) + t * kMmqXsLd + 16 * j,
                         reinterpret_cast<const uint4*>(from + t * a.rx.units) + j);
    }
  };

  float acc[NT][mma::kC8];
  auto zero = [&] {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < mma::kC8; ++i) acc[nt][i] = 0.f;
  };

  // The wave's 16 weight rows (A) times L tiles of 8 rows of the item's x (B) over the step in
  // buffer `buf`, in two parts:
  //   - each group's integer sums (q_x . q) times its integer scale sc, added in 32 bits over the
  //     step (at most 8 x 63 x 32 x 15 x 127), then scaled into f32 once by (d_x * d): the groups go
  //     pair by pair, a pair's 32 bytes of quants holding its first group in their low nibbles and
  //     its second in their high;
  //   - the minimums' part, dmin * sum over the step's groups of m * (d_x * sum q_x), one tf32
  //     product of the groups' m (exact: 6 bits) by x's sums, split into their tf32 part and the
  //     tf32 part of the rest (two products, so that it keeps about f32's precision).
  // L is a compile-time count so that the products of every group and tile are one stretch of code
  // the compiler interleaves: tiles past the item's rows of x multiply stale shared memory into
  // sums that are never stored.
  constexpr int kPairs = kMmqUnits / 2;
  auto compute = [&](auto tiles, int buf) {
    constexpr int L = decltype(tiles)::value;
    const uint4* rows = weight(buf) + wave * 16 * kMmqBlockWords;
    const uint8_t* xs = xscale(buf);
    auto x_d = [&](int t) {  // d_x of row t: every group of the step holds the super-block's
      return reinterpret_cast<const kq::ActScale*>(xs + t * kMmqXsLd)->d;
    };
    int* const scales = reinterpret_cast<int*>(table);
    // Each lane unpacks the scales and minimums of the pair of groups its tf32 A operand holds (k
    // at_k(0) and at_k(2) are that pair's groups) for its two rows, at_m(0) and at_m(1); the sc of
    // every row and group, and each row's d and dmin, go to the wave's table.
    const int pair_of_lane = mma::at_k(0);
    mma::FragAT minimums;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int r = mma::at_m(j);
      const uint4 head = rows[r * kMmqBlockWords];
      const uint32_t scale_words[3] = {head.y, head.z, head.w};
      int sc[2], mn[2];
      kq::k4_pair_scale_min(scale_words, pair_of_lane, sc, mn);
      *reinterpret_cast<int2*>(scales + r * kMmqScaleLd + 2 * pair_of_lane) = make_int2(sc[0], sc[1]);
      if (pair_of_lane == 0)
        *reinterpret_cast<float2*>(table + r * kMmqScaleLd + kMmqUnits) = make_float2(
            mma::f16_to_float(static_cast<uint16_t>(head.x)), mma::f16_to_float(static_cast<uint16_t>(head.x >> 16)));
      minimums.r[j] = mma::tf32_bits(static_cast<float>(mn[0]));
      minimums.r[j + 2] = mma::tf32_bits(static_cast<float>(mn[1]));
    }
    group_sync();
    // The minimums' part. B's k = bt_k(j) is the same pair's group j.
#pragma unroll
    for (int nt = 0; nt < L; ++nt) {
      mma::FragBT hi, lo;
#pragma unroll
      for (int j = 0; j < mma::kBTWords; ++j) {
        const kq::ActScale e =
            reinterpret_cast<const kq::ActScale*>(xs + (nt * 8 + mma::bt_n()) * kMmqXsLd)[2 * pair_of_lane + j];
        const float sum = e.s0 + e.s1;
        hi.r[j] = mma::tf32_bits(sum);
        lo.r[j] = mma::tf32_bits(sum - __uint_as_float(hi.r[j]));
      }
      mma::FragCT part{};
      mma::mma_tf32(part, minimums, hi);
      mma::mma_tf32(part, minimums, lo);
#pragma unroll
      for (int i = 0; i < mma::kC8; ++i)
        acc[nt][i] = fmaf(-table[mma::c8_row(i) * kMmqScaleLd + kMmqUnits + 1], part.v[i], acc[nt][i]);
    }
    int sums[L][mma::kC8];
#pragma unroll
    for (int nt = 0; nt < L; ++nt)
#pragma unroll
      for (int i = 0; i < mma::kC8; ++i) sums[nt][i] = 0;
    const auto* quants = reinterpret_cast<const uint8_t*>(rows) + 16;  // past d, dmin and the scales
    const int8_t* xt = xq(buf);
#pragma unroll
    for (int pair = 0; pair < kPairs; ++pair) {
      uint32_t words[mma::kA8Words];
#pragma unroll
      for (int j = 0; j < mma::kA8Words; ++j)
        words[j] = *reinterpret_cast<const uint32_t*>(quants + mma::a8_m(j) * int{sizeof(kq::BlockQ4_K)} + 32 * pair +
                                                      mma::a8_k(j));
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int g = 2 * pair + h;
        mma::FragA8 fa;
#pragma unroll
        for (int j = 0; j < mma::kA8Words; ++j) fa.r[j] = (words[j] >> (4 * h)) & 0x0f0f0f0fu;
        int sc[mma::kC8];
#pragma unroll
        for (int i = 0; i < mma::kC8; ++i) sc[i] = scales[mma::c8_row(i) * kMmqScaleLd + g];
#pragma unroll
        for (int nt = 0; nt < L; ++nt) {
          mma::FragB8 fb;
          mma::load_b8(fb, xt + nt * 8 * kMmqXLd + 32 * g, kMmqXLd);
          mma::FragC8 dots{};
          mma::mma_i8(dots, fa, fb);
#pragma unroll
          for (int i = 0; i < mma::kC8; ++i) sums[nt][i] += dots.v[i] * sc[i];
        }
      }
    }
    float d[mma::kC8];
#pragma unroll
    for (int i = 0; i < mma::kC8; ++i) d[i] = table[mma::c8_row(i) * kMmqScaleLd + kMmqUnits];
#pragma unroll
    for (int nt = 0; nt < L; ++nt)
#pragma unroll
      for (int i = 0; i < mma::kC8; ++i)
        acc[nt][i] = fmaf(static_cast<float>(sums[nt][i]), x_d(nt * 8 + mma::c8_col(i)) * d[i], acc[nt][i]);
  };
  // compute over the item's tiles of x, rounded up to a power of two.
  auto compute_rows = [&](const Cursor& c, int buf) {
    const int live = (c.m + 7) / 8;
    if constexpr (NT >= 8)
      if (live > 4) return compute(std::integral_constant<int, 8>{}, buf);
    if constexpr (NT >= 4)
      if (live > 2) return compute(std::integral_constant<int, 4>{}, buf);
    if constexpr (NT >= 2)
      if (live > 1) return compute(std::integral_constant<int, 2>{}, buf);
    compute(std::integral_constant<int, 1>{}, buf);
  };

  // The item's sums, each wave its own rows.
  auto flush = [&](const Cursor& c) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int i = 0; i < mma::kC8; ++i) {
        const int t = nt * 8 + mma::c8_col(i);
        const int64_t col = c.n0 + wave * 16 + mma::c8_row(i), row = c.row0 + t;
        if (t < c.m && col < a.n) {
          if (a.streamed && (c.first > 0 || c.last < steps))
            a.part[((int64_t{blockIdx.x} * 2 + c.slot) * a.rows_of_x + row) * kMmqN + (col - c.n0)] = acc[nt][i];
          else if (!a.streamed && a.part != nullptr)
            a.part[(c.split * a.rows_of_x + row) * a.n + col] = acc[nt][i];
          else
            out[row * a.n + col] = kernels::from_opmath<T>(acc[nt][i]);
        }
      }
    }
    zero();
  };

  Cursor at{blockIdx.x, nullptr, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  if (a.streamed)
    enter(at, own_first);
  else
    start(at);
  Cursor next = at;  // the next step to copy
  // One group of copies per step, an empty one past the last, so that waiting for all but the
  // newest kStages - 2 groups always means this step's.
#pragma unroll
  for (int i = 0; i < S::kStages - 1; ++i) {
    if (next.item < items) issue(next, i), advance(next);
    mma::copy_async_commit();
  }
  zero();
  for (int buf = 0; at.item < items; buf = buf + 1 == S::kStages ? 0 : buf + 1) {
    mma::copy_async_wait<S::kStages - 2>();  // this step's copies
    __syncthreads();                         // ...and every thread's; every wave is done with the buffer computed last
    if (next.item < items) issue(next, buf == 0 ? S::kStages - 1 : buf - 1), advance(next);
    mma::copy_async_commit();
    compute_rows(at, buf);
    if (at.step + 1 == at.last) flush(at);
    advance(at);
  }
#else
  (void)a;
  (void)out;
#endif
}
#undef WICK_MMQ_LAUNCH_BOUNDS

// out (rows_of_x, n) of a streamed launch of `blocks` blocks: each tile that two or more blocks
// shared, its partial sums added in the blocks' order (the first block's in its slot 1 unless the
// tile is the first it takes, the others' in slot 0); the whole tiles were stored by their block.
// One block of kMmqN threads a tile, a thread a column.
template <typename T>
__global__ __launch_bounds__(kMmqN) void mmq_stream_combine_kernel(const float* __restrict__ part, int64_t steps,
                                                                   int64_t blocks, int64_t rows, int64_t n,
                                                                   T* __restrict__ out) {
  const int64_t tile = blockIdx.x, units = int64_t{gridDim.x} * steps, col = tile * kMmqN + threadIdx.x;
  const int64_t first = mmq_stream_block(units, blocks, tile * steps),
                last = mmq_stream_block(units, blocks, (tile + 1) * steps - 1);
  if (first == last || col >= n) return;
  const int slot = mmq_stream_first(units, blocks, first) < tile * steps ? 1 : 0;
  for (int64_t row = 0; row < rows; ++row) {
    float s = part[((first * 2 + slot) * rows + row) * kMmqN + threadIdx.x];
    for (int64_t b = first + 1; b <= last; ++b) s += part[(b * 2 * rows + row) * kMmqN + threadIdx.x];
    out[row * n + col] = kernels::from_opmath<T>(s);
  }
}

// Whether mmq_q4k_kernel takes a product of this weight: Q4_K blocks 16-byte aligned, on a device
// with the 8-bit matrix units.
inline bool mmq_applies(const GpuBackend& b, QType qtype, const uint8_t* w, int64_t k) {
  // An item's rows' offsets from its first row count in 32 bits.
  const int64_t item_bytes = kMmqN * (k / kMmqK) * int64_t{sizeof(kq::BlockQ4_K)};
  return qtype == QType::Q4_K && reinterpret_cast<uintptr_t>(w) % 16 == 0 && k % kMmqK == 0 &&
         item_bytes <= int64_t{UINT32_MAX} && mma::available_i8(b.props());
}

// out (p, n) = x (p, k) times w (n, k) transposed (groups null; max_rows = p), or quant::
// qmatmul_grouped's product over the `g` groups on the device (each at most max_rows rows; out
// zeroed beforehand), queued through mmq_q4k_kernel. False (nothing queued) where it does not
// apply (mmq_applies) or its items would not count in 32 bits.
template <typename T>
bool launch_mmq_rows(GpuBackend& b, QType qtype, const uint8_t* w, int64_t n, int64_t k, const T* x, int64_t p,
                     int64_t max_rows, const int64_t* groups, int64_t g, int64_t experts, T* out);

extern template bool launch_mmq_rows<float>(GpuBackend&, QType, const uint8_t*, int64_t, int64_t, const float*, int64_t,
                                            int64_t, const int64_t*, int64_t, int64_t, float*);
extern template bool launch_mmq_rows<f16>(GpuBackend&, QType, const uint8_t*, int64_t, int64_t, const f16*, int64_t,
                                          int64_t, const int64_t*, int64_t, int64_t, f16*);
extern template bool launch_mmq_rows<bf16>(GpuBackend&, QType, const uint8_t*, int64_t, int64_t, const bf16*, int64_t,
                                           int64_t, const int64_t*, int64_t, int64_t, bf16*);

}  // namespace wick::gpu::qmm
