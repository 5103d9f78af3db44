// Paged attention (nn::paged_attention) on a GPU: a thread block takes one query token, one KV
// head and up to kGroup of that head's query heads, and walks the keys the token sees a tile at a
// time through its sequence's block table, with an online softmax: the tile's keys are staged in
// shared memory in the math type, each (head, key) score is one thread's dot product, the
// running maximum and sum are kept per head, then the tile's values replace its keys and each
// (head, feature) of the output is one thread's weighted sum. Nothing depends on the warp or wave
// size; indices are checked as they are read (KernelError, raised at the next wait).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/dispatch.h"
#include "gpu/gpu_backend.h"
#include "gpu/nn/nn_kernels.h"
#include "kernels/numeric.h"

namespace wick::gpu {

namespace {

constexpr int kThreads = 128;
// Thread blocks of one launch: far below every GPU's grid limit (AMD's blocks x threads < 2^32).
constexpr int64_t kMaxPagedTasks = int64_t{1} << 24;

// The shared memory's shape for math type M and head dim d: the query heads a block takes, and
// the keys of a tile. q and the output's sums take 2 * heads * d values, a tile tile * d, the
// scores heads * tile, and three values per head: at most 41 KiB for d up to kPagedMaxHeadDim.
template <typename M>
struct Tiling {
  int64_t heads, tile;
  Tiling(int64_t group, int64_t d) {
    const int64_t qa = 8192 / static_cast<int64_t>(sizeof(M)), keys = 16384 / static_cast<int64_t>(sizeof(M));
    heads = std::clamp<int64_t>(qa / d, 1, std::min<int64_t>(group, 128 / static_cast<int64_t>(sizeof(M))));
    tile = std::clamp<int64_t>(keys / d, 1, 64);
  }
  size_t bytes(int64_t d) const {
    return static_cast<size_t>((2 * heads * d + tile * d + heads * tile + 3 * heads) * static_cast<int64_t>(sizeof(M)));
  }
};

struct PagedShape {
  int64_t t, h, d, block_size, h_kv, blocks, seqs, max_blocks, window;
  int64_t qs0, qs1, qs2;  // q's strides
  int64_t heads, tile;    // Tiling's
};

template <typename T, typename M>
__global__ __launch_bounds__(kThreads) void paged_attention_kernel(const T* q, const T* k_pool, const T* v_pool,
                                                                   const int32_t* tables, const int32_t* seqs,
                                                                   const int32_t* positions, PagedShape a, M scale,
                                                                   T* out, KernelError* err) {
  extern __shared__ unsigned char smem_raw[];
  M* q_s = reinterpret_cast<M*>(smem_raw);
  M* acc = q_s + a.heads * a.d;
  M* tile = acc + a.heads * a.d;
  M* sc = tile + a.tile * a.d;
  M* m_s = sc + a.heads * a.tile;
  M* l_s = m_s + a.heads;
  M* f_s = l_s + a.heads;
  __shared__ int bad;

  const int64_t group = a.h / a.h_kv, chunks = (group + a.heads - 1) / a.heads;
  const int64_t task = blockIdx.x;
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
    for (int64_t j0 = lo; j0 <= p; j0 += a.tile) {
      const int64_t n = a.tile < p - j0 + 1 ? a.tile : p - j0 + 1;
      // The row of position j in a pool: block table[j / block_size], slot j % block_size.
      auto stage = [&](const T* pool) {
        for (int64_t e = tid; e < n * a.d; e += kThreads) {
          const int64_t jj = e / a.d, c = e % a.d, j = j0 + jj;
          int64_t b = table[j / a.block_size];
          if (b < 0 || b >= a.blocks) {
            if (c == 0) report_paged_error(err, 2, b, a.blocks);
            bad = 1;
            b = 0;
          }
          tile[e] = kernels::to_opmath(pool[((b * a.block_size + j % a.block_size) * a.h_kv + g) * a.d + c]);
        }
      };
      stage(k_pool);
      __syncthreads();
      for (int64_t e = tid; e < heads * n; e += kThreads) {
        const int64_t r = e / n, jj = e % n;
        const M* qr = q_s + r * a.d;
        const M* kr = tile + jj * a.d;
        M dot = 0;
        for (int64_t c = 0; c < a.d; ++c) dot += qr[c] * kr[c];
        sc[r * a.tile + jj] = dot * scale;
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
      stage(v_pool);
      __syncthreads();
      for (int64_t e = tid; e < heads * a.d; e += kThreads) {
        const int64_t r = e / a.d, c = e % a.d;
        const M* sr = sc + r * a.tile;
        M o = acc[e] * f_s[r];
        for (int64_t jj = 0; jj < n; ++jj) o += sr[jj] * tile[jj * a.d + c];
        acc[e] = o;
      }
      __syncthreads();
    }
  }
  for (int64_t e = tid; e < heads * a.d; e += kThreads) {
    const int64_t r = e / a.d, c = e % a.d;
    const M v = bad || l_s[r] == 0 ? M(0) : acc[e] / l_s[r];
    out[(i * a.h + first_head + r) * a.d + c] = kernels::from_opmath<T>(v);
  }
}

}  // namespace

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
               0};
  dispatch(q.dtype, [&]<typename T>() {
    if constexpr (kernels::is_float_v<T> && !std::is_same_v<T, f8e4m3>) {
      using M = kernels::opmath_t<T>;
      const Tiling<M> tiling(a.h / a.h_kv, a.d);
      a.heads = tiling.heads;
      a.tile = tiling.tile;
      const int64_t chunks = (a.h / a.h_kv + a.heads - 1) / a.heads;
      const int64_t tasks = a.t * a.h_kv * chunks;
      if (tasks > kMaxPagedTasks)
        throw NotSupportedError(detail::str_cat("paged_attention: ", a.t, " tokens of ", a.h_kv, " KV heads in ",
                                                chunks, " parts each are more than the ", kMaxPagedTasks,
                                                " thread blocks of one launch (", b.name(), ")"));
      const auto grid = static_cast<unsigned>(tasks);
      paged_attention_kernel<T, M><<<grid, kThreads, tiling.bytes(a.d), b.stream()>>>(
          static_cast<const T*>(q.storage.data()) + q.layout.offset(),
          static_cast<const T*>(k_pool.storage.data()) + k_pool.layout.offset(),
          static_cast<const T*>(v_pool.storage.data()) + v_pool.layout.offset(),
          static_cast<const int32_t*>(tables.storage.data()) + tables.layout.offset(),
          static_cast<const int32_t*>(seqs.storage.data()) + seqs.layout.offset(),
          static_cast<const int32_t*>(positions.storage.data()) + positions.layout.offset(), a,
          static_cast<M>(args.scale), out->as<T>(), b.device_error());
      WICK_GPU_CHECK_LAUNCH();
    } else {
      throw_not_supported(b, NnOp::PagedAttention, q.dtype);
    }
  });
  return out;
}

}  // namespace wick::gpu
