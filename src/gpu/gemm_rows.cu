// gemm_rows_invariant (gemm_rows.h): a thread block takes kCols columns of w (a 16-column strip per
// wave) and 16, 32 or 64 rows of x (fewer rows, smaller tiles: the choice changes no sum), over one
// slice of k, kStep values at a time through 2 to 4 buffers of shared memory (16-byte asynchronous
// copies where rows are aligned; values one by one, zeros past the ends, elsewhere). Each output is
// the matrix units' sums of 16 products, added in k's order within the slice; with one slice the
// block writes the output, with more each slice's f32 sums go to scratch and a second kernel adds
// the slices in order. The slices depend on n, k and the device's multiprocessors, never on m.
#include <algorithm>
#include <type_traits>

#include "gpu/gemm_rows.h"
#include "gpu/gpu_backend.h"
#include "gpu/mma.cuh"
#include "kernels/numeric.h"

namespace wick::gpu {

namespace {

constexpr int kWaves = 4;
constexpr int kCols = 16 * kWaves;  // columns of w a block takes
constexpr int kMaxSlices = 16;
constexpr int64_t kSliceUnit = 256;  // a slice's length is a multiple of it (and of every stage's)

struct RowsGemm {
  const void* x;
  const void* w;
  int64_t ldx, ldw, m, n, k;
  int64_t slice;  // values of k per slice, a multiple of kSliceUnit
  int slices;
  int64_t row_tiles, col_tiles;
  float* part;  // (slices, m, n) where slices > 1
  void* out;
};

// A tile's shape: RM 16-row strips of x, stages of STEP values of k, S of them in flight. None
// changes a sum's order: that is k's, 16 values at a time, within each slice.
template <int RM, int STEP, int S>
struct Shape {
  static constexpr int kRows = 16 * RM;
  static constexpr int kStep = STEP;
  static constexpr int kStages = S;
  static constexpr int kLd = STEP + 8;  // a staged row, padded: 16-byte aligned, no bank conflicts
  static_assert(kSliceUnit % STEP == 0);
  template <typename T>
  static constexpr size_t bytes() {
    return static_cast<size_t>(S) * (kRows + kCols) * kLd * sizeof(T);
  }
};

// One stage: rows [0, kRows) of x and kCols rows of w, values [k0, k0 + kStep) of each, into `xs`
// and `ws`; rows and values past the ends as zeros.
template <typename T, typename Sh, bool kAligned>
__device__ void stage(const RowsGemm& g, int64_t row0, int64_t col0, int64_t k0, int64_t k1, T* xs, T* ws) {
  constexpr int kChunks = Sh::kStep / 8, RT = Sh::kRows;  // 16-byte chunks per staged row
  const T* x = static_cast<const T*>(g.x);
  const T* w = static_cast<const T*>(g.w);
  for (int idx = static_cast<int>(threadIdx.x); idx < (RT + kCols) * kChunks; idx += kWaves * mma::kWave) {
    const int row = idx / kChunks, chunk = idx % kChunks;
    const int64_t at = k0 + chunk * 8;
    const bool of_x = row < RT;
    const int64_t r = of_x ? row0 + row : col0 + (row - RT);
    const bool valid = r < (of_x ? g.m : g.n);
    const T* src = of_x ? x + r * g.ldx : w + r * g.ldw;
    T* dst = (of_x ? xs + row * Sh::kLd : ws + (row - RT) * Sh::kLd) + chunk * 8;
    if constexpr (kAligned) {
      if (valid && at < k1) {
        mma::copy_async_16(dst, src + at);  // k1 and at are multiples of 8 here
      } else {
        *reinterpret_cast<uint4*>(dst) = uint4{0, 0, 0, 0};
      }
    } else {
      for (int e = 0; e < 8; ++e) dst[e] = valid && at + e < k1 ? src[at + e] : T::from_bits(0);
    }
  }
  mma::copy_async_commit();
}

template <typename T, typename Sh, bool kAligned>
__global__ __launch_bounds__(kWaves* mma::kWave) void gemm_rows_kernel(RowsGemm g) {
#if WICK_GPU_MMA
  constexpr int RM = Sh::kRows / 16, S = Sh::kStages, kLd = Sh::kLd, kStep = Sh::kStep;
  extern __shared__ uint4 gemm_rows_smem[];
  T* xs = reinterpret_cast<T*>(gemm_rows_smem);  // S buffers of kRows rows, then S of kCols
  T* ws = xs + S * Sh::kRows * kLd;
  const int wave = static_cast<int>(threadIdx.x) / mma::kWave;
  const int64_t tiles = g.row_tiles * g.col_tiles * g.slices;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t s = tile % g.slices, rest = tile / g.slices;
    const int64_t col0 = rest % g.col_tiles * kCols, row0 = rest / g.col_tiles * Sh::kRows;
    const int64_t k0 = s * g.slice, k1 = k0 + g.slice < g.k ? k0 + g.slice : g.k;
    const int64_t steps = (k1 - k0 + kStep - 1) / kStep;
    auto load = [&](int64_t i) {  // stage i into its buffer, or an empty group past the last
      if (i < steps)
        stage<T, Sh, kAligned>(g, row0, col0, k0 + i * kStep, k1, xs + i % S * Sh::kRows * kLd,
                               ws + i % S * kCols * kLd);
      else
        mma::copy_async_commit();
    };
    mma::FragC acc[RM];
#pragma unroll
    for (int r = 0; r < RM; ++r) mma::zero(acc[r]);
    __syncthreads();  // the last tile's reads of the buffers are done
#pragma unroll
    for (int i = 0; i < S - 1; ++i) load(i);
    for (int64_t i = 0; i < steps; ++i) {
      mma::copy_async_wait<S - 2>();  // stage i has landed
      __syncthreads();                // for every thread; and step i - 1's reads are done
      load(i + S - 1);                // into step i - 1's buffer
      const T* xb = xs + i % S * Sh::kRows * kLd;
      const T* wb = ws + i % S * kCols * kLd;
#pragma unroll
      for (int kk = 0; kk < kStep / 16; ++kk) {
        mma::FragB<T> b;
        mma::load_b_nk(b, wb + wave * 16 * kLd + kk * 16, kLd);
#pragma unroll
        for (int r = 0; r < RM; ++r) {
          mma::FragA<T> a;
          mma::load_a(a, xb + r * 16 * kLd + kk * 16, kLd);
          mma::mma(acc[r], a, b);
        }
      }
    }
    mma::copy_async_wait_all();
#pragma unroll
    for (int r = 0; r < RM; ++r) {
#pragma unroll
      for (int e = 0; e < mma::kAccum; ++e) {
        const int64_t row = row0 + r * 16 + mma::accum_row(e), col = col0 + wave * 16 + mma::accum_col(e);
        if (row >= g.m || col >= g.n) continue;
        if (g.slices == 1)
          static_cast<T*>(g.out)[row * g.n + col] = kernels::from_opmath<T>(acc[r].v[e]);
        else
          g.part[(s * g.m + row) * g.n + col] = acc[r].v[e];
      }
    }
  }
#else
  (void)g;
#endif
}

// The slices' sums of each output, added in slice order.
template <typename T>
__global__ __launch_bounds__(kBlock) void add_slices_kernel(const float* part, int64_t total, int slices, T* out) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total; e += int64_t{gridDim.x} * blockDim.x) {
    float v = part[e];
    for (int s = 1; s < slices; ++s) v += part[s * total + e];
    out[e] = kernels::from_opmath<T>(v);
  }
}

}  // namespace

bool gemm_rows_invariant(GpuBackend& backend, DType dtype, const void* x, int64_t ldx, int64_t m, const void* w,
                         int64_t ldw, int64_t n, int64_t k, void* out) {
  const DeviceProps& props = backend.props();
  if ((dtype != DType::F16 && dtype != DType::BF16) || !mma::available(props)) return false;
  if (m == 0 || n == 0) return true;
  RowsGemm g{x, w, ldx, ldw, m, n, k, 0, 1, 0, 0, nullptr, out};
  g.col_tiles = (n + kCols - 1) / kCols;
  // Slices enough that the column strips alone give every multiprocessor four blocks, each a
  // whole number of kSliceUnit values.
  const int64_t wanted = 4 * int64_t{props.multiprocessors};
  const int64_t most = std::clamp<int64_t>(k / kSliceUnit, 1, kMaxSlices);
  const int64_t slices = std::clamp<int64_t>((wanted + g.col_tiles - 1) / g.col_tiles, 1, most);
  g.slice = ((k + slices - 1) / slices + kSliceUnit - 1) / kSliceUnit * kSliceUnit;
  g.slices = static_cast<int>(std::max<int64_t>(1, (k + g.slice - 1) / g.slice));
  StoragePtr part;
  if (g.slices > 1) {
    part = backend.alloc(static_cast<size_t>(g.slices * m * n) * sizeof(float));
    g.part = static_cast<float*>(part->data());
  }
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool vec = k % 8 == 0 && ldx % 8 == 0 && ldw % 8 == 0 && aligned(x) && aligned(w);
  const size_t most_shared = std::max(props.shared_per_block, props.shared_per_block_optin);
  // Queues the kernel of tile shape Sh, if the device gives it its shared memory.
  auto go = [&]<typename T, typename Sh>() {
    constexpr size_t smem = Sh::template bytes<T>();
    if (smem > most_shared) return false;
    const auto kernel = vec ? gemm_rows_kernel<T, Sh, true> : gemm_rows_kernel<T, Sh, false>;
    if (smem > props.shared_per_block)
      WICK_GPU_CHECK(kernel_set_shared_limit(reinterpret_cast<const void*>(kernel), static_cast<int>(smem)));
    g.row_tiles = (m + Sh::kRows - 1) / Sh::kRows;
    const int64_t tiles = g.row_tiles * g.col_tiles * g.slices;
    const auto grid = static_cast<unsigned>(std::min<int64_t>(tiles, int64_t{1} << 20));
    kernel<<<grid, kWaves * props.warp_size, smem, backend.stream()>>>(g);
    WICK_GPU_CHECK_LAUNCH();
    return true;
  };
  // Stages of 64 values, as many in flight as 48 KiB of shared memory holds, more where the device
  // gives more. (On an H200, 1 row of x times 4096-28672 rows of bf16 weights read them at
  // 0.58-0.80 of copy bandwidth in stages of 64 values, 4 deep; longer stages, 128 or 256 values 4
  // or 3 deep, ran slower: 0.48-0.63 and 0.34-0.42.)
  auto by_rows = [&]<typename T>() {
    if (m <= 16) {
      go.template operator()<T, Shape<1, 64, 4>>();
    } else if (m <= 32) {
      if (!go.template operator()<T, Shape<2, 64, 4>>()) go.template operator()<T, Shape<2, 64, 3>>();
    } else {
      if (!go.template operator()<T, Shape<4, 64, 3>>()) go.template operator()<T, Shape<4, 64, 2>>();
    }
  };
  if (dtype == DType::F16)
    by_rows.template operator()<f16>();
  else
    by_rows.template operator()<bf16>();
  if (g.slices > 1) {
    auto add = [&]<typename T>() {
      add_slices_kernel<T>
          <<<grid_for(m * n), kBlock, 0, backend.stream()>>>(g.part, m * n, g.slices, static_cast<T*>(out));
    };
    if (dtype == DType::F16)
      add.template operator()<f16>();
    else
      add.template operator()<bf16>();
    WICK_GPU_CHECK_LAUNCH();
  }
  return true;
}

}  // namespace wick::gpu
