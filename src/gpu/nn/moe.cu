// nn::moe_route and nn::moe_combine on the GPU: a mixture's routing and its weighted sum without a
// wait for the host, so that a decode step with experts can be recorded.
//   moe_route: one block of kRouteThreads threads. Each group of 32 lanes takes tokens in turn: the
//     softmax's maximum and sum over the token's scores, then its k experts picked one at a time
//     (each the first in the order after the last pick: no memory per expert; every lane its share
//     of the experts, then the lanes' firsts compared), then sorted by index. After a barrier the
//     block counts the pairs of each expert in shared memory (integer atomics: the same counts in
//     any order), one thread lays out the groups, and one thread per expert writes its rows in
//     token order (a stable counting sort).
//   moe_combine: one thread per output value, the token's k weighted rows added in order, each
//     product and sum rounded as the composition rounds them (no fused multiply-add), so that the
//     two give the same bits.
// Neither depends on the warp or wave size.
#include <cmath>

#include "core/dispatch.h"
#include "gpu/gpu_backend.h"
#include "gpu/nn/nn_kernels.h"
#include "kernels/numeric.h"

namespace wick::gpu {

namespace {

constexpr int kRouteThreads = 256;
constexpr int kRouteLanes = 32;             // a token's lanes: a warp on NVIDIA, half a wave on AMD's wave-64 parts
constexpr int64_t kMaxRouteExperts = 4096;  // two ints each in shared memory
constexpr int kMaxRouteK = 32;              // a token's picks, in registers

// Whether expert a (score sa) comes before expert b (score sb) in a token's choice: the higher
// score first, the lower index among equal ones, a NaN after every number.
template <typename M>
__device__ bool before(M sa, int a, M sb, int b) {
  const bool na = isnan(sa), nb = isnan(sb);
  if (na != nb) return nb;
  if (!na && sa != sb) return sa > sb;
  return a < b;
}

template <typename T>
__global__ __launch_bounds__(kRouteThreads) void moe_route_kernel(const T* __restrict__ scores, int64_t n, int experts,
                                                                  int k, bool renormalize, int64_t* __restrict__ ids,
                                                                  float* __restrict__ weights,
                                                                  int64_t* __restrict__ tokens,
                                                                  int64_t* __restrict__ slots,
                                                                  int64_t* __restrict__ groups, int64_t g) {
  using M = decltype(kernels::to_opmath(T{}));
  extern __shared__ int route_smem[];
  int* count = route_smem;
  int* start = route_smem + experts;
  for (int e = threadIdx.x; e < experts; e += blockDim.x) count[e] = 0;
  const int64_t pairs = n * k;
  // Each group of kRouteLanes lanes takes a token at a time, each lane the experts e = lane mod 32.
  const int lane = static_cast<int>(threadIdx.x % kRouteLanes);
  const int64_t team = threadIdx.x / kRouteLanes, teams = blockDim.x / kRouteLanes;
  for (int64_t i = team; i < n; i += teams) {
    const T* s = scores + i * experts;
    M top = -INFINITY;
    for (int e = lane; e < experts; e += kRouteLanes) {
      const M v = kernels::to_opmath(s[e]);
      if (!isnan(v)) top = v > top ? v : top;
    }
    for (int mask = kRouteLanes / 2; mask > 0; mask /= 2) {
      const M other = shfl_xor(top, mask, kRouteLanes);
      top = other > top ? other : top;
    }
    auto prob = [&](M v) { return isnan(v) || isinf(top) ? M(0) : exp(v - top); };
    M sum = 0;
    for (int e = lane; e < experts; e += kRouteLanes) sum += prob(kernels::to_opmath(s[e]));
    for (int mask = kRouteLanes / 2; mask > 0; mask /= 2) sum += shfl_xor(sum, mask, kRouteLanes);
    // The picks one at a time: each lane's first expert after the last pick, then the lanes' first.
    int chosen[kMaxRouteK];
    M picked = 0, last_score = 0;
    int last = -1;
    for (int j = 0; j < k; ++j) {
      int best = -1;
      M best_score = 0;
      for (int e = lane; e < experts; e += kRouteLanes) {
        const M v = kernels::to_opmath(s[e]);
        if (last >= 0 && !before(last_score, last, v, e)) continue;  // picked already
        if (best < 0 || before(v, e, best_score, best)) best = e, best_score = v;
      }
      for (int mask = kRouteLanes / 2; mask > 0; mask /= 2) {
        const M other_score = shfl_xor(best_score, mask, kRouteLanes);
        const int other = shfl_xor(best, mask, kRouteLanes);
        if (other >= 0 && (best < 0 || before(other_score, other, best_score, best)))
          best = other, best_score = other_score;
      }
      chosen[j] = best;
      last = best;
      last_score = best_score;
      picked += prob(best_score);
    }
    for (int j = 1; j < k; ++j)  // by index
      for (int a = j; a > 0 && chosen[a - 1] > chosen[a]; --a) {
        const int t = chosen[a];
        chosen[a] = chosen[a - 1];
        chosen[a - 1] = t;
      }
    const M total = renormalize ? picked : sum;
    if (lane == 0)
      for (int j = 0; j < k; ++j) {
        const int e = chosen[j];
        ids[i * k + j] = e;
        weights[i * k + j] = total > 0 ? static_cast<float>(prob(kernels::to_opmath(s[e])) / total) : 0.f;
      }
  }
  __syncthreads();
  for (int64_t q = threadIdx.x; q < pairs; q += blockDim.x) atomicAdd(&count[ids[q]], 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    int at = 0;
    int64_t used = 0;
    for (int e = 0; e < experts; ++e) {
      start[e] = at;
      if (count[e] > 0) {
        groups[3 * used] = e;
        groups[3 * used + 1] = at;
        groups[3 * used + 2] = at + count[e];
        ++used;
      }
      at += count[e];
    }
    for (; used < g; ++used) {
      groups[3 * used] = 0;
      groups[3 * used + 1] = pairs;
      groups[3 * used + 2] = pairs;
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < experts; e += blockDim.x) {
    if (count[e] == 0) continue;
    int64_t row = start[e];
    for (int64_t q = 0; q < pairs; ++q)
      if (ids[q] == e) {
        tokens[row] = q / k;
        slots[q] = row++;
      }
  }
}

// Products and sums rounded one at a time, as separate ops round them.
__device__ inline float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ inline double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ inline double add_rn(double a, double b) { return __dadd_rn(a, b); }

template <typename T>
__global__ __launch_bounds__(kBlock) void moe_combine_kernel(const T* __restrict__ y, const float* __restrict__ w,
                                                             const int64_t* __restrict__ slots, int64_t n, int k,
                                                             int64_t d, T* __restrict__ out, KernelError* err) {
  using M = decltype(kernels::to_opmath(T{}));
  const int64_t rows = n * k;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < n * d;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = idx / d, c = idx - i * d;
    M acc = 0;
    bool ok = true;
    for (int j = 0; j < k; ++j) {
      const int64_t s = slots[i * k + j];
      if (s < 0 || s >= rows) {
        report_combine_error(err, s, rows);
        ok = false;
        break;
      }
      const M term = mul_rn(kernels::to_opmath(y[s * d + c]), static_cast<M>(w[i * k + j]));
      acc = j == 0 ? term : add_rn(acc, term);
    }
    out[idx] = kernels::from_opmath<T>(ok ? acc : M(0));
  }
}

}  // namespace

NnKernels::MoeRouteStorage GpuNnKernels::moe_route(const View& scores, int64_t k, bool renormalize) const {
  const int64_t n = scores.layout.shape()[0], experts = scores.layout.shape()[1], pairs = n * k;
  if (experts > kMaxRouteExperts || k > kMaxRouteK || pairs > INT32_MAX) return {};  // routed on the host
  GpuBackend& b = backend_;
  b.activate();
  const int64_t g = std::min(experts, pairs);
  MoeRouteStorage r{b.alloc(DType::I64, pairs), b.alloc(DType::F32, pairs), b.alloc(DType::I64, pairs),
                    b.alloc(DType::I64, pairs), b.alloc(DType::I64, 3 * g)};
  dispatch(scores.dtype, [&]<typename T>() {
    if constexpr (kernels::is_float_v<T>) {
      moe_route_kernel<T><<<1, kRouteThreads, 2 * sizeof(int) * static_cast<size_t>(experts), b.stream()>>>(
          static_cast<const T*>(scores.storage.data()) + scores.layout.offset(), n, static_cast<int>(experts),
          static_cast<int>(k), renormalize, r.ids->as<int64_t>(), r.weights->as<float>(), r.tokens->as<int64_t>(),
          r.slots->as<int64_t>(), r.groups->as<int64_t>(), g);
      WICK_GPU_CHECK_LAUNCH();
    } else {
      throw_not_supported(b, NnOp::MoeRoute, scores.dtype);
    }
  });
  return r;
}

StoragePtr GpuNnKernels::moe_combine(const View& y, const View& weights, const View& slots, int64_t k) const {
  GpuBackend& b = backend_;
  b.activate();
  const int64_t n = weights.layout.shape()[0], d = y.layout.shape()[1];
  StoragePtr out = b.alloc(y.dtype, n * d);
  dispatch(y.dtype, [&]<typename T>() {
    if constexpr (kernels::is_float_v<T>) {
      moe_combine_kernel<T><<<grid_for(n * d), kBlock, 0, b.stream()>>>(
          static_cast<const T*>(y.storage.data()) + y.layout.offset(),
          static_cast<const float*>(weights.storage.data()) + weights.layout.offset(),
          static_cast<const int64_t*>(slots.storage.data()) + slots.layout.offset(), n, static_cast<int>(k), d,
          out->as<T>(), b.device_error());
      WICK_GPU_CHECK_LAUNCH();
    } else {
      throw_not_supported(b, NnOp::MoeCombine, y.dtype);
    }
  });
  return out;
}

}  // namespace wick::gpu
