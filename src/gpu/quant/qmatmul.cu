// The GPU kernels of the block formats.
//   dequantize: one thread per 4 values of a group, ggml's values bit for bit.
//   qmatmul, few rows of x (decode): x rounded to 8 bits per 32 values, then one group of 32 lanes
//     per weight row; each lane unpacks a unit of 32 weights once, takes its 4-byte integer dot
//     products (dp4a / sdot4) with every row of x, and the lanes sum. Each weight byte is read once.
//   qmatmul, many rows (prefill): the weight dequantized to x's dtype, then the backend's GEMM.
// No kernel depends on the warp or wave size: a group of 32 lanes is a warp on NVIDIA and half a
// wave on AMD's wave-64 parts.
#include "core/dispatch.h"
#include "gpu/gpu_backend.h"
#include "gpu/nn/slices.cuh"
#include "kernels/numeric.h"
#include "kernels/quant.h"

namespace wick::gpu {

namespace kq = kernels::quant;
using quant::QType;

namespace {

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

// One thread per 4 values (a group word), so that neighbouring lanes write neighbouring values.
template <QType Q, typename T>
__global__ __launch_bounds__(kThreads) void dequantize_kernel(const uint8_t* w, int64_t words, T* out) {
  using F = kq::Format<Q>;
  constexpr int kWords = F::kGroup / 4;
  const auto* blocks = reinterpret_cast<const typename F::Block*>(w);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t group = i / kWords;
    const typename F::Block& b = blocks[group / F::kGroups];
    const int g = static_cast<int>(group % F::kGroups), v = static_cast<int>(i % kWords);
    const kq::GroupScale s = kq::group_scale<Q>(b, g);
    const uint32_t word = kq::group_word<Q>(b, g, v);
    T vals[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) vals[e] = kernels::from_opmath<T>(kq::group_value<Q>(s, kq::word_value<Q>(word, e)));
    // One 8- or 16-byte store of the four values.
    using Pack = std::conditional_t<sizeof(T) == 4, uint4, uint2>;
    Pack p;
    __builtin_memcpy(&p, vals, sizeof p);
    reinterpret_cast<Pack*>(out)[i] = p;
  }
}

template <typename T>
void launch_dequantize(const GpuBackend& b, QType qtype, const uint8_t* w, int64_t rows, int64_t cols, T* out) {
  kq::dispatch_qtype(qtype, [&]<QType Q>() {
    const int64_t words = rows * cols / 4;
    dequantize_kernel<Q, T><<<grid_for(words, kThreads), kThreads, 0, b.stream()>>>(w, words, out);
    WICK_GPU_CHECK_LAUNCH();
  });
}

// ---- x rounded to 8 bits ----------------------------------------------------------------------

// One thread per unit of x (kq::kUnit = 32 values, unrelated to the warp size): its bytes as 8
// words and its ActScale.
template <typename T>
__global__ __launch_bounds__(kThreads) void round_x_kernel(const T* x, int64_t units, uint32_t* q,
                                                           kq::ActScale* scale) {
  for (int64_t u = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; u < units;
       u += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float v[kq::kUnit];
#pragma unroll
    for (int i = 0; i < kq::kUnit; ++i) v[i] = kernels::to_opmath(x[u * kq::kUnit + i]);
    int8_t bytes[kq::kUnit];
    scale[u] = kq::quantize_act(v, bytes);
    __builtin_memcpy(q + u * 8, bytes, sizeof bytes);  // little-endian words, as unit_dot reads them
  }
}

// ---- few rows: integer dot products -----------------------------------------------------------

// Rows of x at most M (m of them real); out (m, n) of T.
template <QType Q, int M, typename T>
__global__ __launch_bounds__(kThreads) void dot_rows_kernel(const uint8_t* __restrict__ w, int64_t n, int64_t k,
                                                            int64_t row_bytes, const uint32_t* __restrict__ xq,
                                                            const kq::ActScale* __restrict__ xs, int m,
                                                            T* __restrict__ out) {
  using F = kq::Format<Q>;
  constexpr int kUnits = F::kValues / kq::kUnit;
  const int lane = static_cast<int>(threadIdx.x % kLanes);
  const int64_t units = k / kq::kUnit;
  for (int64_t row = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / kLanes; row < n;
       row += static_cast<int64_t>(gridDim.x) * (blockDim.x / kLanes)) {
    const auto* blocks = reinterpret_cast<const typename F::Block*>(w + row * row_bytes);
    float acc[M];
#pragma unroll
    for (int t = 0; t < M; ++t) acc[t] = 0.f;
    auto add = [&](const kq::Unit& unit, int64_t u) {
#pragma unroll
      for (int t = 0; t < M; ++t) {
        if (t < m) {
          const uint4* a = reinterpret_cast<const uint4*>(xq + (t * units + u) * 8);
          const uint4 lo = a[0], hi = a[1];
          const uint32_t aw[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
          acc[t] += kq::unit_dot<Q>(unit, aw, xs[t * units + u], Dot4{});
        }
      }
    };
    // Two units per lane in flight: the loads of the second are issued before the first's math.
    int64_t u = lane;
    for (; u + kLanes < units; u += 2 * kLanes) {
      const kq::Unit first = kq::load_unit<Q>(blocks[u / kUnits], static_cast<int>(u % kUnits));
      const int64_t v = u + kLanes;
      const kq::Unit second = kq::load_unit<Q>(blocks[v / kUnits], static_cast<int>(v % kUnits));
      add(first, u);
      add(second, v);
    }
    if (u < units) add(kq::load_unit<Q>(blocks[u / kUnits], static_cast<int>(u % kUnits)), u);
#pragma unroll
    for (int t = 0; t < M; ++t) {
      const float sum = nn::group_all<kLanes>(acc[t], nn::ShuffleValue{}, [](float a, float b) { return a + b; });
      if (t < m && lane == 0) out[t * n + row] = kernels::from_opmath<T>(sum);
    }
  }
}

template <typename T>
void launch_dot_rows(const GpuBackend& b, QType qtype, const uint8_t* w, int64_t n, int64_t k, const uint32_t* xq,
                     const kq::ActScale* xs, int m, T* out) {
  const int64_t row_bytes = quant::row_bytes(qtype, k);
  const unsigned grid = grid_for(n * kLanes, kThreads);
  kq::dispatch_qtype(qtype, [&]<QType Q>() {
    auto go = [&]<int M>() {
      dot_rows_kernel<Q, M, T><<<grid, kThreads, 0, b.stream()>>>(w, n, k, row_bytes, xq, xs, m, out);
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
    WICK_GPU_CHECK_LAUNCH();
  });
}

}  // namespace

StoragePtr GpuQuantKernels::dequantize(const Storage& w, QType qtype, int64_t rows, int64_t cols, DType dtype) const {
  GpuBackend& b = backend_;
  b.activate();
  StoragePtr out = b.alloc(dtype, rows * cols);
  dispatch(dtype, [&]<typename T>() {
    if constexpr (std::is_same_v<kernels::opmath_t<T>, float>) {
      launch_dequantize(b, qtype, static_cast<const uint8_t*>(w.data()), rows, cols, out->as<T>());
    } else {
      throw_not_supported(b, QuantOp::Dequantize, dtype);
    }
  });
  return out;
}

StoragePtr GpuQuantKernels::matmul(const View& x, const Storage& w, QType qtype, int64_t rows, int64_t cols) const {
  GpuBackend& b = backend_;
  b.activate();
  const int64_t m = x.layout.numel() / cols;
  if (m > kMaxDotRows) {
    // Dequantize to x's dtype, then x (m, cols) times the weight's transpose through the GEMM.
    StoragePtr wd = dequantize(w, qtype, rows, cols, x.dtype);
    const Layout wt({cols, rows}, {1, cols}, 0);
    return b.matmul(x, View{*wd, wt, x.dtype});
  }
  StoragePtr out = b.alloc(x.dtype, m * rows);
  const int64_t units = m * cols / kq::kUnit;
  StoragePtr xq = b.alloc(static_cast<size_t>(units) * kq::kUnit);
  StoragePtr xs = b.alloc(static_cast<size_t>(units) * sizeof(kq::ActScale));
  dispatch(x.dtype, [&]<typename T>() {
    if constexpr (std::is_same_v<kernels::opmath_t<T>, float>) {
      const T* px = static_cast<const T*>(x.storage.data()) + x.layout.offset();
      round_x_kernel<T><<<grid_for(units, kThreads), kThreads, 0, b.stream()>>>(
          px, units, static_cast<uint32_t*>(xq->data()), static_cast<kq::ActScale*>(xs->data()));
      WICK_GPU_CHECK_LAUNCH();
      launch_dot_rows(b, qtype, static_cast<const uint8_t*>(w.data()), rows, cols,
                      static_cast<const uint32_t*>(xq->data()), static_cast<const kq::ActScale*>(xs->data()),
                      static_cast<int>(m), out->as<T>());
    } else {
      throw_not_supported(b, QuantOp::Matmul, x.dtype);
    }
  });
  return out;
}

}  // namespace wick::gpu
