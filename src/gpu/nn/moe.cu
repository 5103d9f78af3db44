// nn::moe_route, nn::moe_combine and nn::matmul_grouped on the GPU: a mixture's routing, its dense
// experts' products and its weighted sum without a wait for the host, so that a decode step with
// experts can be recorded.
//   moe_route: one block of kRouteThreads threads, in three phases.
//     1. Each group of 32 lanes takes tokens in turn: the token's scores read once (into registers
//        where each lane holds at most 8), the softmax's maximum and sum, then its k experts picked
//        one at a time (each the first in the order after the last pick: every lane its share of
//        the experts, then the lanes' firsts compared). Lane j keeps pick j, finds its place among
//        the picks by index, writes it and its weight, and counts the expert (a shared atomic: the
//        same counts in any order).
//     2. A scan over the experts: each expert's first row and the groups, written by all threads.
//     3. The rows, kRouteChunk tokens at a time: each chosen expert marks its tokens in a word of
//        bits; a pair's row is its expert's next free row plus the marks of the tokens before it
//        (a stable counting sort, tokens in order within each expert).
//   moe_combine: one thread per output value, the token's k weighted rows added in order, each
//     product and sum rounded as the composition rounds them (no fused multiply-add), so that the
//     two give the same bits.
//   matmul_grouped: a grid of (blocks of a product, groups); each block reads its group's entry and
//     takes its share of the expert's weight rows times the group's rows of x, up to 8 rows of x a
//     pass (gpu/gemv.cuh's product of a few rows); an empty group's blocks return at once.
// None depends on the warp or wave size.
#include <climits>
#include <cmath>

#include "core/dispatch.h"
#include "gpu/gemv.cuh"
#include "gpu/gpu_backend.h"
#include "gpu/nn/nn_kernels.h"
#include "kernels/numeric.h"
#include "wick/device.h"

namespace wick::gpu {

namespace {

constexpr int kRouteThreads = 256;
constexpr int kRouteLanes = 32;             // a token's lanes: a warp on NVIDIA, half a wave on AMD's wave-64 parts
constexpr int64_t kMaxRouteExperts = 4096;  // two ints each in shared memory
constexpr int kMaxRouteK = kRouteLanes;     // a token's picks, one a lane
constexpr int64_t kMaxGroupedRows = 64;     // of matmul_grouped's kernel, unless nothing may wait (nn.h)

// A score and its expert as one key that is larger where the expert comes first in a token's
// choice: the higher score first, the lower index among equal ones, a NaN after every number (zeros
// of either sign equal). Scores in f32 (halves are routed in f32) pack both in 64 bits, so that a
// comparison is one integer one; f64 keeps them apart. none() is below every expert's key.
template <typename M>
struct RouteKey;

template <>
struct RouteKey<float> {
  uint64_t bits;
  __device__ static RouteKey none() { return {0}; }
  __device__ static RouteKey of(float v, int e) {
    uint32_t u = 0;  // a NaN: below every number
    if (!isnan(v)) {
      const uint32_t b = __float_as_uint(v == 0.f ? 0.f : v);
      u = (b & 0x80000000u) != 0 ? ~b : b | 0x80000000u;
    }
    return {uint64_t{u} << 32 | (0xffffffffu - static_cast<uint32_t>(e))};
  }
  __device__ int expert() const { return static_cast<int>(0xffffffffu - static_cast<uint32_t>(bits)); }
  __device__ float score() const {
    const auto u = static_cast<uint32_t>(bits >> 32);
    return u == 0 ? NAN : __uint_as_float((u & 0x80000000u) != 0 ? u & 0x7fffffffu : ~u);
  }
  __device__ bool operator>(RouteKey o) const { return bits > o.bits; }
  // The largest of the token's lanes' keys, on every lane: on NVIDIA parts that reduce 32-bit words
  // across a warp in one instruction, the scores' words, then the experts' among the lanes that
  // hold the largest (8 picks a token of Qwen3-30B-A3B: 16 such steps in place of 80 shuffles).
  __device__ RouteKey lanes_max() const {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    static_assert(kRouteLanes == 32);
    const auto hi = static_cast<uint32_t>(bits >> 32);
    const uint32_t top = __reduce_max_sync(0xffffffffu, hi);
    const uint32_t lo = __reduce_max_sync(0xffffffffu, hi == top ? static_cast<uint32_t>(bits) : 0u);
    return {uint64_t{top} << 32 | lo};
#else
    RouteKey best = *this;
    for (int mask = kRouteLanes / 2; mask > 0; mask /= 2) {
      const RouteKey other{shfl_xor(best.bits, mask, kRouteLanes)};
      if (other > best) best = other;
    }
    return best;
#endif
  }
};

template <>
struct RouteKey<double> {
  uint64_t order;  // the score's
  int e;
  __device__ static RouteKey none() { return {0, INT_MAX}; }
  __device__ static RouteKey of(double v, int e) {
    uint64_t u = 0;
    if (!isnan(v)) {
      const auto b = static_cast<uint64_t>(__double_as_longlong(v == 0.0 ? 0.0 : v));
      u = (b >> 63) != 0 ? ~b : b | (uint64_t{1} << 63);
    }
    return {u, e};
  }
  __device__ int expert() const { return e; }
  __device__ double score() const {
    if (order == 0) return NAN;
    return __longlong_as_double(static_cast<long long>((order >> 63) != 0 ? order & ~(uint64_t{1} << 63) : ~order));
  }
  __device__ bool operator>(RouteKey o) const { return order != o.order ? order > o.order : e < o.e; }
  __device__ RouteKey lanes_max() const {
    RouteKey best = *this;
    for (int mask = kRouteLanes / 2; mask > 0; mask /= 2) {
      const RouteKey other{shfl_xor(best.order, mask, kRouteLanes), shfl_xor(best.e, mask, kRouteLanes)};
      if (other > best) best = other;
    }
    return best;
  }
};

constexpr int kRouteChunk = 32;  // tokens per pass of phase 3: a bit each in a word per expert
constexpr int kRouteTeams = kRouteThreads / kRouteLanes;

// Phase 2's exclusive scan of (rows, groups) over the block's threads, and the totals.
__device__ int2 route_scan(int2 v, int2* team_sums, int2* total) {
  const int lane = static_cast<int>(threadIdx.x % kRouteLanes), team = static_cast<int>(threadIdx.x / kRouteLanes);
  int2 inc = v;
  for (int d = 1; d < kRouteLanes; d *= 2) {
    const int from = lane >= d ? lane - d : lane;
    const int2 o{shfl(inc.x, from, kRouteLanes), shfl(inc.y, from, kRouteLanes)};
    if (lane >= d) inc.x += o.x, inc.y += o.y;
  }
  if (lane == kRouteLanes - 1) team_sums[team] = inc;
  __syncthreads();
  int2 before{0, 0}, all{0, 0};
  for (int t = 0; t < kRouteTeams; ++t) {
    if (t < team) before.x += team_sums[t].x, before.y += team_sums[t].y;
    all.x += team_sums[t].x, all.y += team_sums[t].y;
  }
  *total = all;
  return int2{before.x + inc.x - v.x, before.y + inc.y - v.y};
}

// Calls f(u, e) for each of the lane's experts e = lane + kRouteLanes * u (below `experts`):
// unrolled over the kPer held in registers, else a loop over the `per` read from memory (kPer 0).
template <int kPer, typename F>
__device__ __forceinline__ void for_lane_experts(int lane, int experts, int per, F&& f) {
  if constexpr (kPer > 0) {
#pragma unroll
    for (int u = 0; u < kPer; ++u)
      if (lane + kRouteLanes * u < experts) f(u, lane + kRouteLanes * u);
  } else {
    for (int u = 0; u < per && lane + kRouteLanes * u < experts; ++u) f(u, lane + kRouteLanes * u);
  }
}

// kPer: each lane's experts held in registers (experts <= kRouteLanes * kPer), or 0: read from
// memory at each pass.
template <typename T, int kPer>
__global__ __launch_bounds__(kRouteThreads) void moe_route_kernel(const T* __restrict__ scores, int n, int experts,
                                                                  int k, bool renormalize, int64_t* __restrict__ ids,
                                                                  float* __restrict__ weights,
                                                                  int64_t* __restrict__ tokens,
                                                                  int64_t* __restrict__ slots,
                                                                  int64_t* __restrict__ groups, int g) {
  using M = decltype(kernels::to_opmath(T{}));
  extern __shared__ int route_smem[];
  int* next = route_smem;                                               // each expert's pairs, then its next row
  unsigned* marks = reinterpret_cast<unsigned*>(route_smem + experts);  // phase 3: the chunk's tokens
  __shared__ int2 team_sums[kRouteTeams];
  start_after_inputs();
  for (int e = threadIdx.x; e < experts; e += blockDim.x) next[e] = 0, marks[e] = 0;
  __syncthreads();
  const int pairs = n * k;
  // Phase 1: a token at a time for each group of kRouteLanes lanes, each lane the experts e = lane
  // mod 32 (its u-th: e = lane + 32 u).
  const int lane = static_cast<int>(threadIdx.x % kRouteLanes), team = static_cast<int>(threadIdx.x / kRouteLanes);
  const int per = kPer > 0 ? kPer : (experts + kRouteLanes - 1) / kRouteLanes;
  using Key = RouteKey<M>;
  for (int i = team; i < n; i += kRouteTeams) {
    const T* s = scores + int64_t{i} * experts;
    M held[kPer > 0 ? kPer : 1];
    Key held_key[kPer > 0 ? kPer : 1];
    if constexpr (kPer > 0) {
#pragma unroll
      for (int u = 0; u < kPer; ++u) {
        const int e = lane + kRouteLanes * u;
        held[u] = e < experts ? kernels::to_opmath(s[e]) : M(0);
        held_key[u] = Key::of(held[u], e);
      }
    }
    auto score = [&](int u, int e) {
      if constexpr (kPer > 0)
        return held[u];
      else
        return kernels::to_opmath(s[e]);
    };
    auto key = [&](int u, int e) {
      if constexpr (kPer > 0)
        return held_key[u];
      else
        return Key::of(kernels::to_opmath(s[e]), e);
    };
    M top = -INFINITY;
    for_lane_experts<kPer>(lane, experts, per, [&](int u, int e) {
      const M v = score(u, e);
      if (!isnan(v)) top = v > top ? v : top;
    });
    for (int mask = kRouteLanes / 2; mask > 0; mask /= 2) {
      const M other = shfl_xor(top, mask, kRouteLanes);
      top = other > top ? other : top;
    }
    auto prob = [&](M v) { return isnan(v) || isinf(top) ? M(0) : exp(v - top); };
    M sum = 0;
    for_lane_experts<kPer>(lane, experts, per, [&](int u, int e) { sum += prob(score(u, e)); });
    for (int mask = kRouteLanes / 2; mask > 0; mask /= 2) sum += shfl_xor(sum, mask, kRouteLanes);
    // The picks one at a time: each lane's largest key below the last pick's, then the lanes'
    // largest.
    Key mine = Key::none(), last = Key::none();  // mine: lane j's pick j
    M picked = 0;
    for (int j = 0; j < k; ++j) {
      Key best = Key::none();
      for_lane_experts<kPer>(lane, experts, per, [&](int u, int e) {
        const Key c = key(u, e);
        if ((j == 0 || last > c) && c > best) best = c;
      });
      best = best.lanes_max();
      if (lane == j) mine = best;
      last = best;
      picked += prob(best.score());
    }
    // Pick j's place among the token's picks by index.
    const int expert = mine.expert();
    int place = 0;
    for (int j = 0; j < k; ++j) place += shfl(expert, j, kRouteLanes) < expert ? 1 : 0;
    const M total = renormalize ? picked : sum;
    if (lane < k) {
      ids[int64_t{i} * k + place] = expert;
      weights[int64_t{i} * k + place] = total > 0 ? static_cast<float>(prob(mine.score()) / total) : 0.f;
      atomicAdd(&next[expert], 1);
    }
  }
  __syncthreads();
  // Phase 2: each thread's run of experts; an expert's first row, and the groups in its order.
  const int run = (experts + kRouteThreads - 1) / kRouteThreads;
  const int lo = min(experts, static_cast<int>(threadIdx.x) * run), hi = min(experts, lo + run);
  int2 mine{0, 0};  // rows, groups
  for (int e = lo; e < hi; ++e) mine.x += next[e], mine.y += next[e] > 0 ? 1 : 0;
  int2 total;
  int2 at = route_scan(mine, team_sums, &total);
  for (int e = lo; e < hi; ++e) {
    const int c = next[e];
    if (c > 0) {
      groups[3 * at.y] = e;
      groups[3 * at.y + 1] = at.x;
      groups[3 * at.y + 2] = at.x + c;
      ++at.y;
    }
    next[e] = at.x;
    at.x += c;
  }
  for (int u = total.y + static_cast<int>(threadIdx.x); u < g; u += blockDim.x) {
    groups[3 * u] = 0;
    groups[3 * u + 1] = pairs;
    groups[3 * u + 2] = pairs;
  }
  __syncthreads();
  // Phase 3: the rows of kRouteChunk tokens at a time, each thread's pairs' experts read once.
  constexpr int kPairs = kRouteChunk * kMaxRouteK / kRouteThreads;  // a thread's pairs of a chunk, at most
  static_assert(kPairs * kRouteThreads == kRouteChunk * kMaxRouteK);
  for (int first = 0; first < n; first += kRouteChunk) {
    const int from = first * k, to = min(n, first + kRouteChunk) * k;
    int e[kPairs];
#pragma unroll
    for (int j = 0; j < kPairs; ++j) {
      const int q = from + static_cast<int>(threadIdx.x) + j * kRouteThreads;
      e[j] = q < to ? static_cast<int>(ids[q]) : -1;
      if (e[j] >= 0) atomicOr(&marks[e[j]], 1u << (q / k - first));
    }
    __syncthreads();
    unsigned m[kPairs] = {};
#pragma unroll
    for (int j = 0; j < kPairs; ++j) {
      const int q = from + static_cast<int>(threadIdx.x) + j * kRouteThreads;
      if (e[j] < 0) continue;
      const int t = q / k - first;
      m[j] = marks[e[j]];
      const int row = next[e[j]] + __popc(m[j] & ((1u << t) - 1u));
      tokens[row] = first + t;
      slots[q] = row;
    }
    __syncthreads();
    // The expert's lowest marked token moves its next row past the chunk's.
#pragma unroll
    for (int j = 0; j < kPairs; ++j) {
      const int q = from + static_cast<int>(threadIdx.x) + j * kRouteThreads;
      if (e[j] >= 0 && (m[j] & ((1u << (q / k - first)) - 1u)) == 0) next[e[j]] += __popc(m[j]), marks[e[j]] = 0;
    }
    __syncthreads();
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
  start_after_inputs();
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

// out (p, rows) of nn::matmul_grouped: block (b, i) takes blocks b, b + gridDim.x, ... of group i's
// product (gemv::Plan over the expert's rows), M rows of x a pass, then its share of the rows no
// group names (zeros). A group naming an expert or rows out of range is reported (kGroupError, dim 2
// and 3) by its first block and left out.
template <typename T, int M>
__global__ __launch_bounds__(kBlock) void matmul_grouped_kernel(const T* __restrict__ x, int64_t p,
                                                                const T* __restrict__ w, int64_t rows, int64_t cols,
                                                                int64_t experts, const int64_t* __restrict__ groups,
                                                                int splits, T* __restrict__ out, KernelError* err) {
  start_after_inputs();
  const int64_t* entry = groups + 3 * int64_t{blockIdx.y};
  const int64_t e = entry[0], first = entry[1], end = entry[2];
  const bool bad_expert = e < 0 || e >= experts, bad_rows = first < 0 || first > end || end > p;
  if (bad_expert || bad_rows) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      if (bad_expert)
        report_group_error(err, 2, e, experts);
      else
        report_group_error(err, 3, first < 0 || first > end ? first : end, p);
    }
  } else {
    for (int64_t t0 = first; t0 < end; t0 += M)
      gemv::rows_times_weight<T, M>(x + t0 * cols, cols, static_cast<int>(std::min<int64_t>(M, end - t0)),
                                    w + e * rows * cols, cols, rows, cols, splits, out + t0 * rows, blockIdx.x,
                                    gridDim.x);
  }
  zero_rows_no_group_names(groups, int64_t{gridDim.y}, experts, p, rows, out, kernels::from_opmath<T>(0.f));
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
      auto launch = [&]<int kPer>() {
        b.launch_early(moe_route_kernel<T, kPer>, 1, kRouteThreads, 2 * sizeof(int) * static_cast<size_t>(experts),
                       static_cast<const T*>(scores.storage.data()) + scores.layout.offset(), static_cast<int>(n),
                       static_cast<int>(experts), static_cast<int>(k), renormalize, r.ids->as<int64_t>(),
                       r.weights->as<float>(), r.tokens->as<int64_t>(), r.slots->as<int64_t>(), r.groups->as<int64_t>(),
                       static_cast<int>(g));
      };
      if (experts <= kRouteLanes)
        launch.template operator()<1>();
      else if (experts <= 2 * kRouteLanes)
        launch.template operator()<2>();
      else if (experts <= 4 * kRouteLanes)
        launch.template operator()<4>();
      else if (experts <= 8 * kRouteLanes)
        launch.template operator()<8>();
      else
        launch.template operator()<0>();
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
      b.launch_early(moe_combine_kernel<T>, grid_for(n * d), kBlock, 0,
                     static_cast<const T*>(y.storage.data()) + y.layout.offset(),
                     static_cast<const float*>(weights.storage.data()) + weights.layout.offset(),
                     static_cast<const int64_t*>(slots.storage.data()) + slots.layout.offset(), n, static_cast<int>(k),
                     d, out->as<T>(), b.device_error());
    } else {
      throw_not_supported(b, NnOp::MoeCombine, y.dtype);
    }
  });
  return out;
}

StoragePtr GpuNnKernels::matmul_grouped(const View& x, const View& w, int64_t experts, const View& groups,
                                        int64_t max_rows) const {
  const int64_t p = x.layout.shape()[0], cols = x.layout.shape()[1], rows = w.layout.shape()[0] / experts,
                g = groups.layout.shape()[0];
  const size_t size = dtype_size(x.dtype);
  const auto* xs = static_cast<const uint8_t*>(x.storage.data()) + x.layout.offset() * size;
  const auto* ws = static_cast<const uint8_t*>(w.storage.data()) + w.layout.offset() * size;
  // gemv::rows_times_weight reads 16-byte words of x's and w's rows.
  const bool aligned = reinterpret_cast<uintptr_t>(xs) % 16 == 0 && reinterpret_cast<uintptr_t>(ws) % 16 == 0 &&
                       cols * static_cast<int64_t>(size) % 16 == 0;
  GpuBackend& b = backend_;
  // Groups of many rows (a prompt's) are each a matmul of their own, which reads the weight once,
  // where the host may be waited for and the rows' order of summing may depend on their count.
  const bool host = max_rows > kMaxGroupedRows && !capturing(b.stream()) && !batch_invariant();
  if (host || !aligned || g > kMaxBlocks || x.dtype == DType::F64) return nullptr;  // composed
  b.activate();
  StoragePtr out = b.alloc(x.dtype, p * rows);
  const gemv::Plan plan = gemv::plan_for(b, rows, g);
  const dim3 grid(plan.blocks, static_cast<unsigned>(g));
  dispatch(x.dtype, [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
      gemv::by_rows(static_cast<int>(std::min<int64_t>(max_rows, gemv::kMaxRows)), [&]<int M>() {
        b.launch_early(matmul_grouped_kernel<T, M>, grid, kBlock, 0, reinterpret_cast<const T*>(xs), p,
                       reinterpret_cast<const T*>(ws), rows, cols, experts,
                       static_cast<const int64_t*>(groups.storage.data()) + groups.layout.offset(), plan.splits,
                       out->as<T>(), b.device_error());
      });
    } else {
      throw_not_supported(b, NnOp::MatmulGrouped, x.dtype);
    }
  });
  return out;
}

}  // namespace wick::gpu
