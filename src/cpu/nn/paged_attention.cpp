// Paged attention (nn::paged_attention): a task takes one query token and one KV head (the query
// heads of its group together, so that each key row read serves all of them), reads the keys its
// token sees through the sequence's block table, and takes a two-pass softmax over the scores in
// a per-thread buffer (f32 math in rows.h's vector loops, whose lanes are fixed: the same bits on
// every machine). Keys and values are read where they lie in the pool; the front end has checked
// every index this reads.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "cpu/nn/nn_kernels.h"
#include "cpu/nn/rows.h"
#include "cpu/parallel.h"
#include "kernels/numeric.h"
#include "kernels/quant.h"
#include "wick/nn.h"

namespace wick::cpu {

namespace {

namespace kq = kernels::quant;

// Row j of a Q8_0 pool (nn.h: d / 32 blocks of an f16 scale and 32 int8 values) as M, the values
// quant::dequantize gives (scale times value, in f32).
template <typename M>
void dequantize_q8_0(const uint8_t* row, int64_t d, M* out) {
  for (int64_t b = 0; b < d / 32; ++b) {
    kq::BlockQ8_0 block;
    std::memcpy(&block, row + b * static_cast<int64_t>(sizeof block), sizeof block);
    const float scale = detail::f16_bits_to_f32(block.d);
    for (int64_t c = 0; c < 32; ++c) out[b * 32 + c] = static_cast<M>(scale * static_cast<float>(block.qs[c]));
  }
}

// P: the pools' element, T's or uint8_t for Q8_0 pools.
template <typename T, typename P>
void paged_typed(const View& q, const View& k_pool, const View& v_pool, const View& tables, const View& seqs,
                 const View& positions, const AttentionArgs& a, T* out) {
  using M = kernels::opmath_t<T>;
  constexpr bool kQ8 = std::is_same_v<P, uint8_t>;
  const int64_t t = q.layout.shape()[0], h = q.layout.shape()[1], d = q.layout.shape()[2];
  const int64_t block_size = k_pool.layout.shape()[1], h_kv = k_pool.layout.shape()[2];
  const int64_t row_len = k_pool.layout.shape()[3];  // d, or a Q8_0 row's bytes
  const int64_t max_blocks = tables.layout.shape()[1], group = h / h_kv;
  const T* qd = static_cast<const T*>(q.storage.data()) + q.layout.offset();
  const int64_t qs0 = q.layout.stride(0), qs1 = q.layout.stride(1), qs2 = q.layout.stride(2);
  const P* kd = static_cast<const P*>(k_pool.storage.data()) + k_pool.layout.offset();
  const P* vd = static_cast<const P*>(v_pool.storage.data()) + v_pool.layout.offset();
  const auto* table = static_cast<const int32_t*>(tables.storage.data()) + tables.layout.offset();
  const auto* seq = static_cast<const int32_t*>(seqs.storage.data()) + seqs.layout.offset();
  const auto* pos = static_cast<const int32_t*>(positions.storage.data()) + positions.layout.offset();
  const M scale = static_cast<M>(a.scale), cap = static_cast<M>(a.softcap);
  // f32 math (f32 and the halves) in rows.h's vector loops, a key or value row widened (or
  // dequantized) once for every head of the group; f64 in plain loops.
  constexpr bool kRows = rows::kTakes<T>;
  parallel_for(t * h_kv, 1, [&](int64_t begin, int64_t end) {
    std::vector<M> qm(static_cast<size_t>(group * d)), acc(qm.size()), scores, deq(static_cast<size_t>(d)),
        inv(static_cast<size_t>(group));
    std::vector<float> widened(static_cast<size_t>(d));
    for (int64_t task = begin; task < end; ++task) {
      const int64_t i = task / h_kv, g = task % h_kv;
      const int64_t p = pos[i], lo = a.window > 0 ? std::max<int64_t>(0, p - a.window + 1) : 0, n = p - lo + 1;
      const int32_t* row = table + seq[i] * max_blocks;
      for (int64_t r = 0; r < group; ++r)
        for (int64_t c = 0; c < d; ++c)
          qm[static_cast<size_t>(r * d + c)] = kernels::to_opmath(qd[i * qs0 + (g * group + r) * qs1 + c * qs2]);
      scores.assign(static_cast<size_t>(group * n), M(0));
      // The row of position j: slot j % block_size of block row[j / block_size].
      auto pool_row = [&](const P* pool, int64_t j) {
        return pool + ((row[j / block_size] * block_size + j % block_size) * h_kv + g) * row_len;
      };
      // Its values in the math type: the pool's own where it holds M, else widened or dequantized.
      auto values = [&](const P* pool, int64_t j) -> const M* {
        const P* src = pool_row(pool, j);
        if constexpr (kQ8) {
          dequantize_q8_0(src, d, deq.data());
          return deq.data();
        } else if constexpr (kRows) {
          return rows::widen(src, d, widened.data());
        } else {
          return src;  // f64
        }
      };
      for (int64_t j = 0; j < n; ++j) {
        const M* k = values(kd, lo + j);
        for (int64_t r = 0; r < group; ++r) {
          const M* qr = qm.data() + r * d;
          M s = 0;
          if constexpr (kRows) {
            s = rows::dot(qr, k, d);
          } else {
            for (int64_t c = 0; c < d; ++c) s += qr[c] * k[c];
          }
          s *= scale;
          scores[static_cast<size_t>(r * n + j)] = cap > 0 ? cap * std::tanh(s / cap) : s;
        }
      }
      std::fill(acc.begin(), acc.end(), M(0));
      for (int64_t r = 0; r < group; ++r) {
        M* sr = scores.data() + r * n;
        const M max = *std::max_element(sr, sr + n);
        M sum = 0;
        for (int64_t j = 0; j < n; ++j) sum += sr[j] = std::exp(sr[j] - max);
        inv[static_cast<size_t>(r)] = M(1) / sum;
      }
      // Each value row read (and widened) once for every head of the group; each head's sums still
      // in the order of j.
      for (int64_t j = 0; j < n; ++j) {
        const M* v = values(vd, lo + j);
        for (int64_t r = 0; r < group; ++r) {
          const M w = scores[static_cast<size_t>(r * n + j)] * inv[static_cast<size_t>(r)];
          M* o = acc.data() + r * d;
          if constexpr (kRows) {
            rows::add_scaled(v, d, w, o);
          } else {
            for (int64_t c = 0; c < d; ++c) o[c] += w * v[c];
          }
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
      if (k_pool.dtype == DType::U8)
        paged_typed<T, uint8_t>(q, k_pool, v_pool, tables, seqs, positions, args, out->as<T>());
      else
        paged_typed<T, T>(q, k_pool, v_pool, tables, seqs, positions, args, out->as<T>());
    } else {
      throw_not_supported(backend_, NnOp::PagedAttention, q.dtype);
    }
  });
  return out;
}

StoragePtr CpuNnKernels::quantize_q8_0(const View& x) const {
  const int64_t n = x.layout.shape()[0], d = x.layout.shape()[1], blocks = d / 32;
  StoragePtr out = backend_.alloc(DType::U8, static_cast<size_t>(n * nn::paged_q8_0_row_bytes(d)));
  auto* dst = out->as<kq::BlockQ8_0>();
  dispatch(x.dtype, [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
      const T* src = static_cast<const T*>(x.storage.data()) + x.layout.offset();
      parallel_for(n * blocks, 64, [&](int64_t begin, int64_t end) {
        float v[32];
        for (int64_t b = begin; b < end; ++b) {
          for (int c = 0; c < 32; ++c) v[c] = kernels::to_opmath(src[b * 32 + c]);
          kq::quantize_q8_0(v, dst[b]);
        }
      });
    } else {
      throw DTypeError(detail::str_cat("paged_write: Q8_0 rows from ", x.dtype, " (f32, f16 or bf16)"));
    }
  });
  return out;
}

}  // namespace wick::cpu
