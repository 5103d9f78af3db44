// Paged attention (nn::paged_attention): a task takes one query token and one KV head (the query
// heads of its group together, so that each key row read serves all of them), reads the keys its
// token sees through the sequence's block table, and takes a two-pass softmax over the scores in
// a per-thread buffer (f32 math in rows.h's vector loops, whose lanes are fixed: the same bits on
// every machine). Keys and values are read where they lie in the pool; the front end has checked
// every index this reads.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "cpu/nn/nn_kernels.h"
#include "cpu/nn/rows.h"
#include "cpu/parallel.h"
#include "kernels/numeric.h"

namespace wick::cpu {

namespace {

template <typename T>
void paged_typed(const View& q, const View& k_pool, const View& v_pool, const View& tables, const View& seqs,
                 const View& positions, const AttentionArgs& a, T* out) {
  using M = kernels::opmath_t<T>;
  const int64_t t = q.layout.shape()[0], h = q.layout.shape()[1], d = q.layout.shape()[2];
  const int64_t block_size = k_pool.layout.shape()[1], h_kv = k_pool.layout.shape()[2];
  const int64_t max_blocks = tables.layout.shape()[1], group = h / h_kv;
  const T* qd = static_cast<const T*>(q.storage.data()) + q.layout.offset();
  const int64_t qs0 = q.layout.stride(0), qs1 = q.layout.stride(1), qs2 = q.layout.stride(2);
  const T* kd = static_cast<const T*>(k_pool.storage.data()) + k_pool.layout.offset();
  const T* vd = static_cast<const T*>(v_pool.storage.data()) + v_pool.layout.offset();
  const auto* table = static_cast<const int32_t*>(tables.storage.data()) + tables.layout.offset();
  const auto* seq = static_cast<const int32_t*>(seqs.storage.data()) + seqs.layout.offset();
  const auto* pos = static_cast<const int32_t*>(positions.storage.data()) + positions.layout.offset();
  const M scale = static_cast<M>(a.scale);
  // Work per task: the keys it reads times the group's heads.
  // f32 math (f32 and the halves) in rows.h's vector loops, a key or value row widened once for
  // every head of the group; f64 in plain loops.
  constexpr bool kRows = rows::kTakes<T>;
  parallel_for(t * h_kv, 1, [&](int64_t begin, int64_t end) {
    std::vector<M> qm(static_cast<size_t>(group * d)), acc(qm.size()), scores, widened(static_cast<size_t>(d));
    for (int64_t task = begin; task < end; ++task) {
      const int64_t i = task / h_kv, g = task % h_kv;
      const int64_t p = pos[i], lo = a.window > 0 ? std::max<int64_t>(0, p - a.window + 1) : 0, n = p - lo + 1;
      const int32_t* row = table + seq[i] * max_blocks;
      for (int64_t r = 0; r < group; ++r)
        for (int64_t c = 0; c < d; ++c)
          qm[static_cast<size_t>(r * d + c)] = kernels::to_opmath(qd[i * qs0 + (g * group + r) * qs1 + c * qs2]);
      scores.assign(static_cast<size_t>(group * n), M(0));
      // The key row of position j: slot j % block_size of block row[j / block_size].
      auto key_row = [&](const T* pool, int64_t j) {
        return pool + ((row[j / block_size] * block_size + j % block_size) * h_kv + g) * d;
      };
      for (int64_t j = 0; j < n; ++j) {
        const T* kr = key_row(kd, lo + j);
        if constexpr (kRows) {
          const float* k = rows::widen(kr, d, widened.data());
          for (int64_t r = 0; r < group; ++r)
            scores[static_cast<size_t>(r * n + j)] = rows::dot(qm.data() + r * d, k, d) * scale;
          continue;
        }
        for (int64_t r = 0; r < group; ++r) {
          const M* qr = qm.data() + r * d;
          M s = 0;
          for (int64_t c = 0; c < d; ++c) s += qr[c] * kernels::to_opmath(kr[c]);
          scores[static_cast<size_t>(r * n + j)] = s * scale;
        }
      }
      std::fill(acc.begin(), acc.end(), M(0));
      for (int64_t r = 0; r < group; ++r) {
        M* sr = scores.data() + r * n;
        const M max = *std::max_element(sr, sr + n);
        M sum = 0;
        for (int64_t j = 0; j < n; ++j) sum += sr[j] = std::exp(sr[j] - max);
        const M inv = M(1) / sum;
        M* o = acc.data() + r * d;
        for (int64_t j = 0; j < n; ++j) {
          const T* vr = key_row(vd, lo + j);
          const M w = sr[j] * inv;
          if constexpr (kRows) {
            rows::add_scaled(rows::widen(vr, d, widened.data()), d, w, o);
            continue;
          }
          for (int64_t c = 0; c < d; ++c) o[c] += w * kernels::to_opmath(vr[c]);
        }
      }
      for (int64_t r = 0; r < group; ++r)
        for (int64_t c = 0; c < d; ++c)
          out[(i * h + g * group + r) * d + c] = kernels::from_opmath<T>(acc[static_cast<size_t>(r * d + c)]);
    }
  });
}

}  // namespace

StoragePtr CpuNnKernels::paged_attention(const View& q, const View& k_pool, const View& v_pool, const View& tables,
                                         const View& seqs, const View& positions, const AttentionArgs& args) const {
  StoragePtr out = backend_.alloc(q.dtype, q.layout.numel());
  dispatch(q.dtype, [&]<typename T>() {
    if constexpr (kernels::is_float_v<T> && !std::is_same_v<T, f8e4m3>) {
      paged_typed<T>(q, k_pool, v_pool, tables, seqs, positions, args, out->as<T>());
    } else {
      throw_not_supported(backend_, NnOp::PagedAttention, q.dtype);
    }
  });
  return out;
}

}  // namespace wick::cpu
