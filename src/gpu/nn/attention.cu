// Attention, softmax(q k^T * scale + mask) v, without a score tensor in memory. On CUDA, f16 and
// bf16 go to cuDNN's fused attention first where it serves them (dnn_attention_cuda.cu; the
// "attention" option "library", the default). Then wick's three kernels:
//   matrix units (attention_mma.cuh): f16 and bf16 on devices with the instructions, prefill and
//     decoding (unless the "attention" option or WICK_ATTENTION is "rows");
//   rows: f32 and f64, and the halves without matrix units; a block holds up to kMaxRows query
//     rows of one key head (when decoding, every query head of a GQA group, so that K and V are
//     read once) and its 16-lane groups take keys in turn, each with its own online softmax,
//     merged at the end. When the blocks would not fill the device, the keys are split across
//     blocks (flash decoding): each writes its maximum, sum and unnormalised output to scratch,
//     and a second kernel combines them;
//   generic: a thread per query row, for head dims past what the rows kernel holds in registers.
#include <algorithm>
#include <type_traits>

#include "core/dispatch.h"
#include "gpu/elementwise.cuh"
#include "gpu/gpu_backend.h"
#include "gpu/mma.cuh"
#include "gpu/nn/attention.cuh"
#include "gpu/nn/attention_rows.cuh"
#include "gpu/nn/nn_kernels.h"
#include "kernels/nn.h"

namespace wick::gpu {

namespace {

using nn::kPackElems;
using nn::kRowsBlock;
using nn::load_math;
constexpr int kLanes = nn::kRowLanes;
constexpr int kGroups = nn::kRowGroups;
constexpr int kMaxRows = 8;   // query rows a rows block holds
constexpr int kMaxPacks = 8;  // 16-byte packs of a row a lane holds (so d <= 128 packs)

constexpr int64_t kLibraryMinQueries = 128;  // fewer queries (decoding) stay with wick's kernels

// Features f .. f + E - 1 of a row (zeros past d): one 16-byte load when `vec`.
template <typename T>
__device__ inline Pack<T, kPackElems<T>> load_pack(const T* row, int64_t f, int64_t d, int64_t stride, bool vec) {
  constexpr int E = kPackElems<T>;
  Pack<T, E> p;
  if (vec && f < d) return *reinterpret_cast<const Pack<T, E>*>(row + f);
#pragma unroll
  for (int e = 0; e < E; ++e) p.v[e] = f + e < d ? row[(f + e) * stride] : T{};
  return p;
}

// How the rows kernel covers the problem.
struct RowsPlan {
  int64_t groups;      // blocks of R rows per key head
  int64_t splits;      // key ranges per block of rows
  int64_t split_keys;  // keys per range
  int64_t rows;        // rows of the output, b * h * t_q
  void* part_o;        // splits > 1: (splits, rows, d) unnormalised outputs, in the math type
  void* part_ml;       // (splits, rows, 2): maximum and sum of each
};

// R query rows, P packs of features per lane, C keys per group and step.
template <typename T, int R, int P, int C>
__global__ __launch_bounds__(kRowsBlock) void attention_rows_kernel(nn::AttentionGeom g, RowsPlan pl) {
  using M = kernels::opmath_t<T>;
  using State = nn::RowsState<T, R, P>;
  constexpr int E = kPackElems<T>;
  __shared__ int64_t sh_pos[R], sh_mask_row[R];
  const int grp = static_cast<int>(threadIdx.x) / kLanes, lane = static_cast<int>(threadIdx.x) % kLanes;
  const M neg_inf = kernels::attention_neg_inf<M>();
  const M scale = static_cast<M>(g.scale);
  const T* mask = static_cast<const T*>(g.mask);
  const int64_t rows_kv = g.group * g.t_q;
  const int64_t total = g.batch * g.kv_heads * pl.groups * pl.splits;
  start_after_inputs();

  for (int64_t blk = blockIdx.x; blk < total; blk += gridDim.x) {
    const int64_t split = blk % pl.splits;
    int64_t rest = blk / pl.splits;
    const int64_t row0 = rest % pl.groups * R;
    rest /= pl.groups;
    const int64_t kvh = rest % g.kv_heads, b = rest / g.kv_heads;

    // The block's rows: row r is query (head, i) with head * t_q + i = row0 + r within the key head.
    // Their positions and mask rows wait in shared memory (read once per key, broadcast).
    __syncthreads();  // the previous block's readers of sh_pos and of the merge's memory are done
    unsigned valid = 0;
    int64_t pos_min = 0, pos_max = 0;
    M q[R][P][E];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t gr = row0 + r;
      const int64_t head = kvh * g.group + gr / g.t_q, i = gr % g.t_q;
      const int64_t pos = kernels::attention_position(i, g.t_q, g.t_kv);
      if (threadIdx.x == 0) {
        sh_pos[r] = pos;
        sh_mask_row[r] = b * g.mask_stride[0] + head * g.mask_stride[1] + i * g.mask_stride[2];
      }
      const bool ok = gr < rows_kv;
      if (ok) {
        pos_min = valid ? std::min(pos_min, pos) : pos;
        pos_max = valid ? std::max(pos_max, pos) : pos;
        valid |= 1u << r;
      }
      const T* row = static_cast<const T*>(g.q) + b * g.q_stride[0] + head * g.q_stride[1] + i * g.q_stride[2];
#pragma unroll
      for (int pk = 0; pk < P; ++pk) {
        const int64_t f = int64_t(lane + pk * kLanes) * E;
        Pack<T, E> x{};
        if (ok) x = load_pack(row, f, g.d, g.q_stride[3], g.vec_q);
#pragma unroll
        for (int e = 0; e < E; ++e) q[r][pk][e] = ok ? load_math(x.v[e]) : M(0);
      }
    }
    __syncthreads();
    const int64_t lo = std::max(split * pl.split_keys, kernels::attention_keys_begin(pos_min, g.window));
    const int64_t hi = std::min((split + 1) * pl.split_keys, kernels::attention_keys_end(pos_max, g.causal, g.t_kv));
    const T* kb = static_cast<const T*>(g.k) + b * g.k_stride[0] + kvh * g.k_stride[1];
    const T* vb = static_cast<const T*>(g.v) + b * g.v_stride[0] + kvh * g.v_stride[1];
    State st;

    // Every group makes the same number of steps (the shuffles need the whole warp). The loads of
    // a step are unconditional, so that all of them are in flight before the first is used: a key
    // past hi reads key hi - 1 again and is hidden; a lane's features past d read feature 0, against
    // zeros in q. Strided or unaligned rows take the element-wise loads.
    int64_t feat[P];
#pragma unroll
    for (int pk = 0; pk < P; ++pk) {
      const int64_t f = int64_t(lane + pk * kLanes) * E;
      feat[pk] = f < g.d ? f : 0;
    }
    const auto keys = [&]<bool kVec>() {
      for (int64_t step = lo; step < hi; step += kGroups * C) {
        const int64_t k0 = step + grp * C;
        Pack<T, E> kp[C][P], vp[C][P];
#pragma unroll
        for (int c = 0; c < C; ++c) {
          const int64_t key = k0 + c < hi ? k0 + c : hi - 1;
          const T* kr = kb + key * g.k_stride[2];
          const T* vr = vb + key * g.v_stride[2];
#pragma unroll
          for (int pk = 0; pk < P; ++pk) {
            if constexpr (kVec) {
              kp[c][pk] = *reinterpret_cast<const Pack<T, E>*>(kr + feat[pk]);
              vp[c][pk] = *reinterpret_cast<const Pack<T, E>*>(vr + feat[pk]);
            } else {
              kp[c][pk] = load_pack(kr, feat[pk], g.d, g.k_stride[3], false);
              vp[c][pk] = load_pack(vr, feat[pk], g.d, g.v_stride[3], false);
            }
          }
        }
        M s[R][C];
#pragma unroll
        for (int c = 0; c < C; ++c) {
          M kf[P][E];
          State::unpack(kp[c], kf);
#pragma unroll
          for (int r = 0; r < R; ++r) {
            const M acc = State::dot(q[r], kf);
            const int64_t key = k0 + c;
            const bool sees =
                (valid >> r & 1u) && key < hi && kernels::attention_sees(key, sh_pos[r], g.causal, g.window);
            M x = kernels::attention_softcap(acc * scale, static_cast<M>(g.softcap));
            if (sees && mask) x += load_math(mask[sh_mask_row[r] + key * g.mask_stride[3]]);
            s[r][c] = sees ? x : neg_inf;
          }
        }
        st.fold(s, vp);
      }
    };
    if (g.vec_k && g.vec_v)
      keys.template operator()<true>();
    else
      keys.template operator()<false>();

    st.merge(grp, lane, valid, g.d, [&](int r, int f, M acc, M block_max, M total_sum) {
      const int64_t gr = row0 + r;
      const int64_t out_row = ((b * g.kv_heads + kvh) * g.group + gr / g.t_q) * g.t_q + gr % g.t_q;
      if (pl.splits == 1) {
        static_cast<T*>(g.out)[out_row * g.d + f] = static_cast<T>(kernels::attention_output(acc, total_sum));
      } else {
        const int64_t at = split * pl.rows + out_row;
        static_cast<M*>(pl.part_o)[at * g.d + f] = acc;
        if (f == 0) {
          static_cast<M*>(pl.part_ml)[at * 2] = block_max;
          static_cast<M*>(pl.part_ml)[at * 2 + 1] = total_sum;
        }
      }
    });
  }
}

template <typename M>
__device__ inline M base2_power(M x) {
  if constexpr (std::is_same_v<M, float>)
    return exp2f(x);
  else
    return ::exp2(x);
}

// The weight of a range whose maximum is m_s under the row's maximum m (0 for a range that saw
// nothing), in base e or base 2.
template <typename M>
__device__ inline M combine_weight(M m_s, M m, bool base2) {
  if (!base2) return kernels::attention_rescale(m_s, m);
  return m_s == kernels::attention_neg_inf<M>() ? M(0) : base2_power(m_s - m);
}

// Merges the split key ranges of each output row: out = sum_s o_s e^(m_s - m) / sum_s l_s e^(m_s - m),
// or with 2^ for maxima in base 2 (the matrix-unit kernel's). A block takes kCombineLanes features
// of one row; its kCombineGroups groups of lanes each merge every kCombineGroups-th range (a decode
// step may have a hundred) under the group's own maximum, and the groups meet in shared memory.
inline constexpr int kCombineLanes = 32, kCombineGroups = 8;

template <typename T>
__global__ __launch_bounds__(kCombineLanes* kCombineGroups) void attention_combine_kernel(
    const kernels::opmath_t<T>* part_o, const kernels::opmath_t<T>* part_ml, T* out, int64_t rows, int64_t d,
    int64_t splits, bool base2) {
  using M = kernels::opmath_t<T>;
  __shared__ M red_acc[kCombineGroups][kCombineLanes];
  __shared__ M red_ml[kCombineGroups][2];
  const int lane = static_cast<int>(threadIdx.x) % kCombineLanes, group = static_cast<int>(threadIdx.x) / kCombineLanes;
  const int64_t chunks = (d + kCombineLanes - 1) / kCombineLanes;
  start_after_inputs();
  for (int64_t blk = blockIdx.x; blk < rows * chunks; blk += gridDim.x) {
    const int64_t row = blk / chunks, feat = blk % chunks * kCombineLanes + lane;
    M m = kernels::attention_neg_inf<M>(), sum = M(0), acc = M(0);
    if (splits <= kCombineGroups) {
      // At most one range a group: its values as they are, in one trip to memory.
      if (group < splits) {
        const int64_t at = group * rows + row;
        m = part_ml[at * 2];
        sum = part_ml[at * 2 + 1];
        acc = feat < d ? part_o[at * d + feat] : M(0);
      }
    } else {
      for (int64_t s = group; s < splits; s += kCombineGroups) m = fmax(m, part_ml[(s * rows + row) * 2]);
#pragma unroll 4
      for (int64_t s = group; s < splits; s += kCombineGroups) {
        const int64_t at = s * rows + row;
        const M f = combine_weight(part_ml[at * 2], m, base2);
        sum += part_ml[at * 2 + 1] * f;
        if (feat < d) acc += part_o[at * d + feat] * f;
      }
    }
    red_acc[group][lane] = acc;
    if (lane == 0) {
      red_ml[group][0] = m;
      red_ml[group][1] = sum;
    }
    __syncthreads();
    if (group == 0 && feat < d) {
      M top = kernels::attention_neg_inf<M>();
#pragma unroll
      for (int gi = 0; gi < kCombineGroups; ++gi) top = fmax(top, red_ml[gi][0]);
      M total = M(0), total_acc = M(0);
#pragma unroll
      for (int gi = 0; gi < kCombineGroups; ++gi) {
        const M f = combine_weight(red_ml[gi][0], top, base2);
        total += red_ml[gi][1] * f;
        total_acc += red_acc[gi][lane] * f;
      }
      out[row * d + feat] = static_cast<T>(kernels::attention_output(total_acc, total));
    }
    __syncthreads();  // the next row reuses the shared sums
  }
}

// A thread per query row, its accumulator in `acc` (rows x d, the math type): any head dim.
template <typename T>
__global__ __launch_bounds__(kBlock) void attention_generic_kernel(nn::AttentionGeom g, kernels::opmath_t<T>* acc) {
  using M = kernels::opmath_t<T>;
  const int64_t rows = g.batch * g.heads * g.t_q, step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const T* mask = static_cast<const T*>(g.mask);
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; row < rows; row += step) {
    const int64_t i = row % g.t_q, bh = row / g.t_q, h = bh % g.heads, b = bh / g.heads, kvh = h / g.group;
    const int64_t pos = kernels::attention_position(i, g.t_q, g.t_kv);
    const T* q = static_cast<const T*>(g.q) + b * g.q_stride[0] + h * g.q_stride[1] + i * g.q_stride[2];
    const T* kb = static_cast<const T*>(g.k) + b * g.k_stride[0] + kvh * g.k_stride[1];
    const T* vb = static_cast<const T*>(g.v) + b * g.v_stride[0] + kvh * g.v_stride[1];
    M* a = acc + row * g.d;
    for (int64_t f = 0; f < g.d; ++f) a[f] = M(0);
    M mx = kernels::attention_neg_inf<M>(), sum = M(0);
    const int64_t hi = kernels::attention_keys_end(pos, g.causal, g.t_kv);
    for (int64_t key = kernels::attention_keys_begin(pos, g.window); key < hi; ++key) {
      const T* k = kb + key * g.k_stride[2];
      const T* v = vb + key * g.v_stride[2];
      M dot = M(0);
      for (int64_t f = 0; f < g.d; ++f)
        dot = kernels::attention_fma(load_math(q[f * g.q_stride[3]]), load_math(k[f * g.k_stride[3]]), dot);
      M x = kernels::attention_softcap(dot * static_cast<M>(g.scale), static_cast<M>(g.softcap));
      if (mask)
        x += load_math(
            mask[b * g.mask_stride[0] + h * g.mask_stride[1] + i * g.mask_stride[2] + key * g.mask_stride[3]]);
      if (x == kernels::attention_neg_inf<M>()) continue;
      const M m_new = x > mx ? x : mx;
      const M corr = kernels::attention_rescale(mx, m_new), p = kernels::attention_weight(x, m_new);
      sum = sum * corr + p;
      for (int64_t f = 0; f < g.d; ++f) a[f] = kernels::attention_fma(p, load_math(v[f * g.v_stride[3]]), a[f] * corr);
      mx = m_new;
    }
    T* out = static_cast<T*>(g.out) + row * g.d;
    for (int64_t f = 0; f < g.d; ++f) out[f] = static_cast<T>(kernels::attention_output(a[f], sum));
  }
}

// Whether the rows of x (b, h, t, d) can be read in 16-byte packs of `elems` elements.
bool packed_rows(const View& x, int64_t elems) {
  const Layout& l = x.layout;
  if (l.dim(3) % elems != 0 || l.stride(3) != 1) return false;
  for (int i = 0; i < 3; ++i)
    if (l.dim(i) > 1 && l.stride(i) % elems != 0) return false;
  return aligned(static_cast<const char*>(x.storage.data()) + l.offset() * dtype_size(x.dtype), 16);
}

const void* element_ptr(const View& x) {
  return static_cast<const char*>(x.storage.data()) + x.layout.offset() * dtype_size(x.dtype);
}
void* element_ptr(const MutView& x) {
  return static_cast<char*>(x.storage.data()) + x.layout.offset() * dtype_size(x.dtype);
}

// Keys per group and step: up to 4 packs each of K and V in flight per lane, fewer as the rows'
// queries and accumulators take more registers.
template <int R, int P>
inline constexpr int kRowsKeys = std::max(1, (R * P <= 4 ? 4 : 2) / P);

template <typename T, int R, int P>
void launch_rows(const nn::AttentionGeom& g, GpuBackend& b, int64_t rows_kv) {
  using M = kernels::opmath_t<T>;
  constexpr int C = kRowsKeys<R, P>;
  const auto kernel = attention_rows_kernel<T, R, P, C>;
  const int per_sm = b.blocks_per_sm(reinterpret_cast<const void*>(kernel), kRowsBlock, 0);
  const int64_t capacity = int64_t(per_sm) * std::max(1, b.props().multiprocessors);
  RowsPlan pl{};
  pl.groups = (rows_kv + R - 1) / R;
  pl.rows = g.batch * g.heads * g.t_q;
  const int64_t base = g.batch * g.kv_heads * pl.groups;
  pl.splits = base < capacity ? nn::attention_splits(base, g.t_kv, capacity, 64) : 1;
  pl.split_keys = (g.t_kv + pl.splits - 1) / pl.splits;
  pl.splits = (g.t_kv + pl.split_keys - 1) / pl.split_keys;
  StoragePtr part;
  if (pl.splits > 1) {
    const int64_t o_elems = pl.splits * pl.rows * g.d, ml_elems = pl.splits * pl.rows * 2;
    part = b.alloc(static_cast<size_t>(o_elems + ml_elems) * sizeof(M));
    pl.part_o = part->as<M>();
    pl.part_ml = part->as<M>() + o_elems;
  }
  const int64_t blocks = base * pl.splits;
  b.launch_early(kernel, static_cast<unsigned>(std::min<int64_t>(blocks, int64_t(1) << 22)), kRowsBlock, 0, g, pl);
  if (pl.splits > 1)
    nn::launch_attention_combine<T>(static_cast<const M*>(pl.part_o), static_cast<const M*>(pl.part_ml),
                                    static_cast<T*>(g.out), pl.rows, g.d, pl.splits, /*base2=*/false, b);
}

template <typename T, int P>
void launch_rows_r(int rows, const nn::AttentionGeom& g, GpuBackend& b, int64_t rows_kv) {
  if constexpr (P <= kMaxRows / 8)
    if (rows == 8) return launch_rows<T, 8, P>(g, b, rows_kv);
  if constexpr (P <= kMaxRows / 4)
    if (rows == 4) return launch_rows<T, 4, P>(g, b, rows_kv);
  if constexpr (P <= kMaxRows / 2)
    if (rows == 2) return launch_rows<T, 2, P>(g, b, rows_kv);
  launch_rows<T, 1, P>(g, b, rows_kv);
}

template <typename T>
void run_attention(nn::AttentionGeom& g, GpuBackend& b) {
  using M = kernels::opmath_t<T>;
  constexpr int E = kPackElems<T>;
  g.vec_out = g.d % E == 0 && aligned(g.out, 16);
  const int64_t rows_kv = g.group * g.t_q;
  if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
    const GpuBackend::AttentionPath path = b.attention_path();
    // cuDNN plans each shape once, on its first call: prefill, not decoding, whose every step
    // would be a new shape.
    if (path == GpuBackend::AttentionPath::Library && g.library && g.softcap == 0 && g.t_q >= kLibraryMinQueries &&
        nn::launch_attention_cudnn(g, dtype_of<T>, b))
      return;
    if (path != GpuBackend::AttentionPath::Rows && mma::available(b.props()) && nn::launch_attention_mma<T>(g, b))
      return;
  }
  const int64_t packs = (g.d + E - 1) / E;
  int P = 1;
  while (P < kMaxPacks && int64_t(P) * kLanes < packs) P *= 2;
  if (int64_t(P) * kLanes < packs) {
    const int64_t out_rows = g.batch * g.heads * g.t_q;
    StoragePtr acc = b.alloc(static_cast<size_t>(out_rows * g.d) * sizeof(M));
    attention_generic_kernel<T><<<grid_for(out_rows), kBlock, 0, b.stream()>>>(g, acc->as<M>());
    WICK_GPU_CHECK_LAUNCH();
    return;
  }
  // Rows per block: as many of the key head's rows as registers allow (8 / P).
  int rows = 1;
  while (rows < rows_kv && rows * P < kMaxRows) rows *= 2;
  switch (P) {
    case 1: launch_rows_r<T, 1>(rows, g, b, rows_kv); break;
    case 2: launch_rows_r<T, 2>(rows, g, b, rows_kv); break;
    case 4: launch_rows_r<T, 4>(rows, g, b, rows_kv); break;
    default: launch_rows_r<T, 8>(rows, g, b, rows_kv); break;
  }
}

}  // namespace

namespace nn {

int64_t attention_splits(int64_t blocks, int64_t t_kv, int64_t capacity, int64_t min_keys) {
  constexpr int64_t kBlockCost = 64;  // a block's fixed work, in keys
  int64_t best = 1;
  double best_cost = 0;
  for (int64_t s = 1; s <= std::max<int64_t>(1, t_kv / min_keys); ++s) {
    const int64_t rounds = (blocks * s + capacity - 1) / capacity, keys = (t_kv + s - 1) / s;
    const double cost = static_cast<double>(rounds) * static_cast<double>(keys + kBlockCost);
    if (s == 1 || cost < best_cost) {
      best = s;
      best_cost = cost;
    }
    if (blocks * s >= 64 * capacity) break;
  }
  return best;
}

template <typename T>
void launch_attention_combine(const kernels::opmath_t<T>* part_o, const kernels::opmath_t<T>* part_ml, T* out,
                              int64_t rows, int64_t d, int64_t splits, bool base2, GpuBackend& backend) {
  const int64_t blocks = rows * ((d + kCombineLanes - 1) / kCombineLanes);
  backend.launch_early(attention_combine_kernel<T>, static_cast<unsigned>(std::min<int64_t>(blocks, int64_t(1) << 22)),
                       kCombineLanes * kCombineGroups, 0, part_o, part_ml, out, rows, d, splits, base2);
}

template void launch_attention_combine<float>(const float*, const float*, float*, int64_t, int64_t, int64_t, bool,
                                              GpuBackend&);
template void launch_attention_combine<double>(const double*, const double*, double*, int64_t, int64_t, int64_t, bool,
                                               GpuBackend&);
template void launch_attention_combine<f16>(const float*, const float*, f16*, int64_t, int64_t, int64_t, bool,
                                            GpuBackend&);
template void launch_attention_combine<bf16>(const float*, const float*, bf16*, int64_t, int64_t, int64_t, bool,
                                             GpuBackend&);

}  // namespace nn

namespace {

// The geometry of attention over q, k and v (everything but the output).
nn::AttentionGeom attention_geometry(const View& q, const View& k, const View& v, const View* mask,
                                     const AttentionArgs& args) {
  const Layout &lq = q.layout, &lk = k.layout, &lv = v.layout;
  nn::AttentionGeom g{};
  g.batch = lq.dim(0);
  g.heads = lq.dim(1);
  g.t_q = lq.dim(2);
  g.d = lq.dim(3);
  g.kv_heads = lk.dim(1);
  g.t_kv = lk.dim(2);
  g.group = g.kv_heads > 0 ? g.heads / g.kv_heads : 0;
  g.q = element_ptr(q);
  g.k = element_ptr(k);
  g.v = element_ptr(v);
  g.mask = mask ? element_ptr(*mask) : nullptr;
  for (int i = 0; i < 4; ++i) {
    g.q_stride[i] = lq.stride(i);
    g.k_stride[i] = lk.stride(i);
    g.v_stride[i] = lv.stride(i);
    g.mask_stride[i] = mask ? mask->layout.stride(i) : 0;
  }
  g.scale = args.scale;
  g.softcap = args.softcap;
  g.causal = args.causal;
  g.library = args.library;
  g.window = args.window;
  const int64_t elems = 16 / dtype_size(q.dtype);
  g.vec_q = packed_rows(q, elems);
  g.vec_k = packed_rows(k, elems);
  g.vec_v = packed_rows(v, elems);
  return g;
}

}  // namespace

StoragePtr GpuNnKernels::attention(const View& q, const View& k, const View& v, const View* mask,
                                   const AttentionArgs& args) const {
  GpuBackend& b = backend_;
  b.activate();
  nn::AttentionGeom g = attention_geometry(q, k, v, mask, args);
  StoragePtr out = b.alloc(q.dtype, g.batch * g.heads * g.t_q * g.d);
  if (out->nbytes() == 0) return out;
  if (g.t_kv == 0 || g.kv_heads == 0) {  // no key: zeros
    WICK_GPU_CHECK(memset_async(out->data(), 0, out->nbytes(), b.stream()));
    return out;
  }
  g.out = out->data();
  dispatch(q.dtype, [&]<typename T>() {
    if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16> || std::is_same_v<T, float> ||
                  std::is_same_v<T, double>) {
      run_attention<T>(g, b);
    } else {
      throw_not_supported(b, NnOp::Attention, q.dtype);
    }
  });
  return out;
}

// The decoding tiles of the matrix-unit kernel take the step's rope and cache write in front:
// where attention() would run those tiles (f16 or bf16, the device's matrix units, wick's own
// kernels, a key head's queries within one tile), one launch; elsewhere null.
StoragePtr GpuNnKernels::rope_write_attention(const View& q, const View& k, const View& v, const View& cos,
                                              const View& sin, RopePairs pairs, const View& at, const MutView& k_cache,
                                              const MutView& v_cache, int64_t length, const View* mask,
                                              const AttentionArgs& args) const {
  GpuBackend& b = backend_;
  if ((q.dtype != DType::F16 && q.dtype != DType::BF16) || !mma::available(b.props()) ||
      b.attention_path() == GpuBackend::AttentionPath::Rows)
    return nullptr;
  b.activate();
  const Layout keys_layout = k_cache.layout.narrow(2, 0, length), values_layout = v_cache.layout.narrow(2, 0, length);
  const View keys{k_cache.storage, keys_layout, k_cache.dtype}, values{v_cache.storage, values_layout, v_cache.dtype};
  nn::AttentionGeom g = attention_geometry(q, keys, values, mask, args);
  if (g.t_q != 1 || g.kv_heads == 0 || g.group > 16 || g.t_kv == 0) return nullptr;
  nn::RopeWriteGeom rw{};
  rw.k = element_ptr(k);
  rw.v = element_ptr(v);
  for (int i = 0; i < 4; ++i) {
    rw.k_stride[i] = k.layout.stride(i);
    rw.v_stride[i] = v.layout.stride(i);
  }
  rw.k_cache = element_ptr(k_cache);
  rw.v_cache = element_ptr(v_cache);
  rw.cos = element_ptr(cos);
  rw.sin = element_ptr(sin);
  rw.cos_stride = cos.layout.stride(1);
  rw.sin_stride = sin.layout.stride(1);
  rw.at = static_cast<const int64_t*>(element_ptr(at));
  rw.capacity = k_cache.layout.dim(2);
  rw.interleaved = pairs == RopePairs::Interleaved;
  rw.position_error = kPositionRope;
  rw.err = b.device_error();
  StoragePtr out = b.alloc(q.dtype, g.batch * g.heads * g.d);
  g.out = out->data();
  bool queued = false;
  dispatch(q.dtype, [&]<typename T>() {
    if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
      g.vec_out = g.d % kPackElems<T> == 0 && aligned(g.out, 16);
      queued = nn::launch_attention_mma<T>(g, b, &rw);
    }
  });
  return queued ? out : nullptr;
}

}  // namespace wick::gpu
