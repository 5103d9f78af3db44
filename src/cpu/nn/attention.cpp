// Attention in tiles (flash attention): a task takes up to kRows query rows of one batch and kv
// head (the query heads of a group together, so that a key tile serves all of them), and walks the
// keys they see kKeys at a time with an online softmax (kernels::AttentionAcc). The tiles are
// copied, in the math type, into per-thread buffers: keys transposed, so that both products are
// loops over a contiguous run of lanes the compiler vectorises without reordering a sum. No
// t_q x t_kv buffer exists; q, k, v and the mask are read where they lie. The paged kernel
// (paged_attention_tiles, attention.h) walks the same tiles over keys and values gathered from the
// pools through each sequence's block table.
#include "cpu/nn/attention.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/dispatch.h"
#include "cpu/clones.h"
#include "cpu/nn/nn_kernels.h"
#include "cpu/nn/rows.h"
#include "cpu/parallel.h"
#include "cpu/scratch.h"
#include "cpu/vectors.h"
#include "kernels/nn.h"
#include "kernels/quant.h"

namespace wick::cpu {

namespace {

namespace kq = kernels::quant;

constexpr int64_t kRows = 64;  // query rows of a task
constexpr int64_t kKeys = 64;  // keys of a tile

// The padding of value rows and accumulators: 64 bytes of M, the widest vector of any target.
template <typename M>
inline constexpr int64_t kLanes = 64 / static_cast<int64_t>(sizeof(M));

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// A (b, heads, t, d) operand: its first element and strides.
template <typename T>
struct Operand {
  const T* data;
  int64_t s[4];

  explicit Operand(const View& v) : data(static_cast<const T*>(v.storage.data()) + v.layout.offset()) {
    for (int i = 0; i < 4; ++i) s[i] = v.layout.stride(i);
  }
  const T* row(int64_t b, int64_t h, int64_t t) const { return data + b * s[0] + h * s[1] + t * s[2]; }
};

// Copies n rows of d elements (at stride `step` within a row) into dst, a row every `ld`, in M.
template <typename T, typename M>
void load_rows(const T* src, int64_t row_stride, int64_t step, int64_t n, int64_t d, M* dst, int64_t ld) {
  for (int64_t j = 0; j < n; ++j, src += row_stride, dst += ld) {
    if (step == 1) {
      for (int64_t c = 0; c < d; ++c) dst[c] = kernels::to_opmath(src[c]);
    } else {
      for (int64_t c = 0; c < d; ++c) dst[c] = kernels::to_opmath(src[c * step]);
    }
  }
}

// Vectors a pass of the loops below keeps as sums: eight with two rows of scores, four with a row
// of values, so that with their operands they fit in 16 registers.
constexpr int64_t kPassVecs = 4;

// s[r][j] = sum over c of q[r][c] * kt[c][j] for `rows` rows and the kKeys columns of the tile: two
// rows and kPassVecs vectors of keys at a time, so that each load of keys serves both rows and the
// sums are independent chains. Each sum runs in the order of c, whatever the vectors' width.
template <typename M, int kBytes>
[[gnu::always_inline]] inline void scores_tile_of(const M* q, int64_t ldq, const M* kt, int64_t rows, int64_t d, M* s) {
  using V = Vec<M, kBytes>;
  constexpr int64_t W = kBytes / static_cast<int64_t>(sizeof(M)), kPass = kPassVecs * W;
  static_assert(kKeys % kPass == 0);
  int64_t r = 0;
  for (; r + 2 <= rows; r += 2) {
    const M* q0 = q + r * ldq;
    const M* q1 = q0 + ldq;
    for (int64_t j0 = 0; j0 < kKeys; j0 += kPass) {
      V a0[kPassVecs] = {}, a1[kPassVecs] = {};
      for (int64_t c = 0; c < d; ++c) {
        const M* kc = kt + c * kKeys + j0;
#pragma GCC unroll 4
        for (int64_t b = 0; b < kPassVecs; ++b) {
          V kv;
          load_vec(kv, kc + b * W);
          a0[b] += q0[c] * kv;
          a1[b] += q1[c] * kv;
        }
      }
#pragma GCC unroll 4
      for (int64_t b = 0; b < kPassVecs; ++b) {
        store_vec(s + r * kKeys + j0 + b * W, a0[b]);
        store_vec(s + (r + 1) * kKeys + j0 + b * W, a1[b]);
      }
    }
  }
  for (; r < rows; ++r) {
    const M* q0 = q + r * ldq;
    for (int64_t j0 = 0; j0 < kKeys; j0 += kPass) {
      V a0[kPassVecs] = {};
      for (int64_t c = 0; c < d; ++c) {
#pragma GCC unroll 4
        for (int64_t b = 0; b < kPassVecs; ++b) {
          V kv;
          load_vec(kv, kt + c * kKeys + j0 + b * W);
          a0[b] += q0[c] * kv;
        }
      }
#pragma GCC unroll 4
      for (int64_t b = 0; b < kPassVecs; ++b) store_vec(s + r * kKeys + j0 + b * W, a0[b]);
    }
  }
}

// o += sum over j in [j0, j1) of p[j] * v[j] (v's rows ldv apart) for one row of ld (a multiple of
// kLanes<M>) lanes, kPassVecs vectors of lanes at a time (independent chains), each lane summed in
// the order of j.
template <typename M, int kBytes>
[[gnu::always_inline]] inline void weighted_sum_of(const M* p, const M* v, int64_t ldv, int64_t j0, int64_t j1,
                                                   int64_t ld, M* o) {
  using V = Vec<M, kBytes>;
  constexpr int64_t W = kBytes / static_cast<int64_t>(sizeof(M));
  int64_t cb = 0;
  for (; cb + kPassVecs * W <= ld; cb += kPassVecs * W) {
    V a[kPassVecs];
#pragma GCC unroll 4
    for (int64_t b = 0; b < kPassVecs; ++b) load_vec(a[b], o + cb + b * W);
    for (int64_t j = j0; j < j1; ++j) {
#pragma GCC unroll 4
      for (int64_t b = 0; b < kPassVecs; ++b) {
        V vj;
        load_vec(vj, v + j * ldv + cb + b * W);
        a[b] += p[j] * vj;
      }
    }
#pragma GCC unroll 4
    for (int64_t b = 0; b < kPassVecs; ++b) store_vec(o + cb + b * W, a[b]);
  }
  for (; cb < ld; cb += W) {
    V a, vj;
    load_vec(a, o + cb);
    for (int64_t j = j0; j < j1; ++j) {
      load_vec(vj, v + j * ldv + cb);
      a += p[j] * vj;
    }
    store_vec(o + cb, a);
  }
}

// s[j] = exp(s[j] - shift) for j in [a, e): for f32, rows::exp_f32's straight-line code on vectors
// and then on the last lanes one by one (the same bits either way, and the softmax op's); for f64,
// the library's exp.
template <typename M, int kBytes>
[[gnu::always_inline]] inline void exp_shifted_of(M* s, int64_t a, int64_t e, M shift) {
  if constexpr (std::is_same_v<M, float>) {
    using V = Vec<float, kBytes>;
    using VI = Vec<int32_t, kBytes>;
    constexpr int64_t W = kBytes / static_cast<int64_t>(sizeof(float));
    int64_t j = a;
    for (; j + W <= e; j += W) {
      V v, y;
      load_vec(v, s + j);
      v -= shift;
      rows::exp_f32_into<V, VI>(v, y);
      store_vec(s + j, y);
    }
    for (; j < e; ++j) s[j] = rows::exp_f32(s[j] - shift);
  } else {
    for (int64_t j = a; j < e; ++j) s[j] = kernels::math::exp(s[j] - shift);
  }
}

// The W x W block of floats in r transposed in registers (W = 4 or 8): r[i][c] becomes r[c][i].
template <int W>
[[gnu::always_inline]] inline void transpose_block(Vec<float, 4 * W> (&r)[W]) {
  using V = Vec<float, 4 * W>;
  if constexpr (W == 4) {
    const V t0 = __builtin_shufflevector(r[0], r[1], 0, 4, 1, 5), t1 = __builtin_shufflevector(r[0], r[1], 2, 6, 3, 7);
    const V t2 = __builtin_shufflevector(r[2], r[3], 0, 4, 1, 5), t3 = __builtin_shufflevector(r[2], r[3], 2, 6, 3, 7);
    r[0] = __builtin_shufflevector(t0, t2, 0, 1, 4, 5);
    r[1] = __builtin_shufflevector(t0, t2, 2, 3, 6, 7);
    r[2] = __builtin_shufflevector(t1, t3, 0, 1, 4, 5);
    r[3] = __builtin_shufflevector(t1, t3, 2, 3, 6, 7);
  } else {
    static_assert(W == 8);
    V t[8], u[8];
#pragma GCC unroll 4
    for (int p = 0; p < 8; p += 2) {  // pairs of rows interleaved within each half
      t[p] = __builtin_shufflevector(r[p], r[p + 1], 0, 8, 1, 9, 4, 12, 5, 13);
      t[p + 1] = __builtin_shufflevector(r[p], r[p + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
#pragma GCC unroll 2
    for (int p = 0; p < 8; p += 4) {  // then pairs of pairs: four rows' element e of each half
      u[p] = __builtin_shufflevector(t[p], t[p + 2], 0, 1, 8, 9, 4, 5, 12, 13);
      u[p + 1] = __builtin_shufflevector(t[p], t[p + 2], 2, 3, 10, 11, 6, 7, 14, 15);
      u[p + 2] = __builtin_shufflevector(t[p + 1], t[p + 3], 0, 1, 8, 9, 4, 5, 12, 13);
      u[p + 3] = __builtin_shufflevector(t[p + 1], t[p + 3], 2, 3, 10, 11, 6, 7, 14, 15);
    }
#pragma GCC unroll 4
    for (int e = 0; e < 4; ++e) {  // then the halves: the first four rows' and the last four's
      r[e] = __builtin_shufflevector(u[e], u[e + 4], 0, 1, 2, 3, 8, 9, 10, 11);
      r[e + 4] = __builtin_shufflevector(u[e], u[e + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    }
  }
}

// kt[c * kKeys + j] = k[j * ks + c] as f32 for the n keys j and d columns c of a tile (a row's
// columns contiguous): W keys by W columns at a time, widened (cpu/vectors.h) and transposed in
// registers, the keys and columns past the last whole block one by one. The same values as the
// scalar copy (with the values' rows one value at a time too, a decode step over 4096 keys took
// 1.5-1.7 times as long: docs/performance.md).
template <int W, typename T>
[[gnu::always_inline]] inline void transpose_keys_of(const T* k, int64_t ks, int64_t n, int64_t d, float* kt) {
  using V = Vec<float, 4 * W>;
  const int64_t nw = n / W * W, dw = d / W * W;
  for (int64_t j = 0; j < nw; j += W) {
    const T* kj = k + j * ks;
    for (int64_t c = 0; c < dw; c += W) {
      V r[W];
#pragma GCC unroll 8
      for (int i = 0; i < W; ++i) widen(kj + i * ks + c, r[i]);
      transpose_block<W>(r);
#pragma GCC unroll 8
      for (int i = 0; i < W; ++i) store_vec(kt + (c + i) * kKeys + j, r[i]);
    }
    for (int64_t i = 0; i < W; ++i)
      for (int64_t c = dw; c < d; ++c) kt[c * kKeys + j + i] = kernels::to_opmath(kj[i * ks + c]);
  }
  for (int64_t j = nw; j < n; ++j)
    for (int64_t c = 0; c < d; ++c) kt[c * kKeys + j] = kernels::to_opmath(k[j * ks + c]);
}

// dst[j * ld + c] = src[j * row_stride + c] as f32 for n rows of d values (contiguous within a row):
// vectors of W values widened (cpu/vectors.h), the values past the last whole vector one by one.
template <int W, typename T>
[[gnu::always_inline]] inline void widen_rows_of(const T* src, int64_t row_stride, int64_t n, int64_t d, float* dst,
                                                 int64_t ld) {
  using V = Vec<float, 4 * W>;
  const int64_t dw = d / W * W;
  for (int64_t j = 0; j < n; ++j, src += row_stride, dst += ld) {
    for (int64_t c = 0; c < dw; c += W) {
      V r;
      widen(src + c, r);
      store_vec(dst + c, r);
    }
    for (int64_t c = dw; c < d; ++c) dst[c] = kernels::to_opmath(src[c]);
  }
}

// The loops for each target (cpu/clones.h), with vectors of its registers' width: the same bits on
// every one.
#define WICK_ATTENTION_LOOPS(arch, bytes)                                                                            \
  WICK_CPU_VERSION(arch)                                                                                             \
  void scores_tile(const float* q, int64_t ldq, const float* kt, int64_t rows, int64_t d, float* s) {                \
    scores_tile_of<float, bytes>(q, ldq, kt, rows, d, s);                                                            \
  }                                                                                                                  \
  WICK_CPU_VERSION(arch)                                                                                             \
  void scores_tile(const double* q, int64_t ldq, const double* kt, int64_t rows, int64_t d, double* s) {             \
    scores_tile_of<double, bytes>(q, ldq, kt, rows, d, s);                                                           \
  }                                                                                                                  \
  WICK_CPU_VERSION(arch)                                                                                             \
  void weighted_sum(const float* p, const float* v, int64_t ldv, int64_t j0, int64_t j1, int64_t ld, float* o) {     \
    weighted_sum_of<float, bytes>(p, v, ldv, j0, j1, ld, o);                                                         \
  }                                                                                                                  \
  WICK_CPU_VERSION(arch)                                                                                             \
  void weighted_sum(const double* p, const double* v, int64_t ldv, int64_t j0, int64_t j1, int64_t ld, double* o) {  \
    weighted_sum_of<double, bytes>(p, v, ldv, j0, j1, ld, o);                                                        \
  }                                                                                                                  \
  WICK_CPU_VERSION(arch)                                                                                             \
  void exp_shifted(float* s, int64_t a, int64_t e, float shift) { exp_shifted_of<float, bytes>(s, a, e, shift); }    \
  WICK_CPU_VERSION(arch)                                                                                             \
  void exp_shifted(double* s, int64_t a, int64_t e, double shift) { exp_shifted_of<double, bytes>(s, a, e, shift); } \
  WICK_CPU_VERSION(arch)                                                                                             \
  void transpose_keys(const float* k, int64_t ks, int64_t n, int64_t d, float* kt) {                                 \
    transpose_keys_of<(bytes) / 16 >= 2 ? 8 : 4>(k, ks, n, d, kt);                                                   \
  }                                                                                                                  \
  WICK_CPU_VERSION(arch)                                                                                             \
  void transpose_keys(const bf16* k, int64_t ks, int64_t n, int64_t d, float* kt) {                                  \
    transpose_keys_of<(bytes) / 16 >= 2 ? 8 : 4>(k, ks, n, d, kt);                                                   \
  }                                                                                                                  \
  WICK_CPU_VERSION(arch)                                                                                             \
  void transpose_keys(const f16* k, int64_t ks, int64_t n, int64_t d, float* kt) {                                   \
    transpose_keys_of<(bytes) / 16 >= 2 ? 8 : 4>(k, ks, n, d, kt);                                                   \
  }                                                                                                                  \
  WICK_CPU_VERSION(arch)                                                                                             \
  void widen_rows(const bf16* src, int64_t row_stride, int64_t n, int64_t d, float* dst, int64_t ld) {               \
    widen_rows_of<(bytes) / 4>(src, row_stride, n, d, dst, ld);                                                      \
  }                                                                                                                  \
  WICK_CPU_VERSION(arch)                                                                                             \
  void widen_rows(const f16* src, int64_t row_stride, int64_t n, int64_t d, float* dst, int64_t ld) {                \
    widen_rows_of<(bytes) / 4>(src, row_stride, n, d, dst, ld);                                                      \
  }
#if WICK_CPU_VERSIONS
WICK_ATTENTION_LOOPS("arch=x86-64-v4", 64)
WICK_ATTENTION_LOOPS("arch=x86-64-v3", 32)
#endif
WICK_ATTENTION_LOOPS("default", 16)
#undef WICK_ATTENTION_LOOPS

// The maximum of s[a, e) in four independent lanes (so that the loop vectorizes without
// reassociation flags); max is the same value in any order.
template <typename M>
M max_of(const M* s, int64_t a, int64_t e) {
  constexpr M kLow = -std::numeric_limits<M>::infinity();
  M m[4] = {kLow, kLow, kLow, kLow};
  int64_t j = a;
  for (; j + 4 <= e; j += 4)
    for (int64_t l = 0; l < 4; ++l) m[l] = s[j + l] > m[l] ? s[j + l] : m[l];
  for (; j < e; ++j) m[0] = s[j] > m[0] ? s[j] : m[0];
  const M m01 = m[0] > m[1] ? m[0] : m[1], m23 = m[2] > m[3] ? m[2] : m[3];
  return m01 > m23 ? m01 : m23;
}

// Row r of a key tile: its scores s[a, e) (q . k over the tile's columns) as the composition forms
// them, (q . k) * scale, capped where asked, then + the mask (m: the row's mask at the tile's first
// key, its elements ms apart; null: none); then the online softmax's step: the row's running
// maximum raised and its accumulators o (ld lanes) rescaled, the exponentials summed, and their
// weighted sum of the tile's values (rows values_ld apart) added to o.
template <typename M, typename T>
void add_tile_row(M* s, int64_t a, int64_t e, const T* m, int64_t ms, M scale, M cap, kernels::AttentionAcc<M>& row,
                  M* o, int64_t ld, const M* values, int64_t values_ld) {
  if (cap > M(0)) {
    for (int64_t j = a; j < e; ++j) s[j] = kernels::attention_softcap(s[j] * scale, cap);
    if (m)
      for (int64_t j = a; j < e; ++j) s[j] += kernels::to_opmath(m[j * ms]);
  } else if (m) {
    for (int64_t j = a; j < e; ++j) s[j] = s[j] * scale + kernels::to_opmath(m[j * ms]);
  } else {
    for (int64_t j = a; j < e; ++j) s[j] *= scale;
  }
  // The maximum in any order: the same value (NaNs, which it may drop, reach the sum).
  const M factor = row.raise_max(max_of(s, a, e));
  if (factor != M(1))
    for (int64_t c = 0; c < ld; ++c) o[c] *= factor;
  exp_shifted(s, a, e, row.shift());
  M block_sum = 0;
  for (int64_t j = a; j < e; ++j) block_sum += s[j];
  row.add(block_sum);
  weighted_sum(s, values, values_ld, a, e, ld, o);
}

template <typename T>
void attention_typed(const View& qv, const View& kv, const View& vv, const View* mv, const AttentionArgs& args,
                     T* out) {
  using M = kernels::opmath_t<T>;
  const Operand<T> q(qv), k(kv), v(vv);
  const int64_t b = qv.layout.dim(0), h = qv.layout.dim(1), t_q = qv.layout.dim(2), d = qv.layout.dim(3);
  const int64_t h_kv = kv.layout.dim(1), t_kv = kv.layout.dim(2), group = h / h_kv;
  const T* mask = mv ? static_cast<const T*>(mv->storage.data()) + mv->layout.offset() : nullptr;
  const int64_t ms[4] = {mv ? mv->layout.stride(0) : 0, mv ? mv->layout.stride(1) : 0, mv ? mv->layout.stride(2) : 0,
                         mv ? mv->layout.stride(3) : 0};
  const M scale = static_cast<M>(args.scale), cap = static_cast<M>(args.softcap);
  // Rows of a (batch, kv head): r = member of the group * t_q + query index.
  const int64_t rows_per_head = group * t_q, tiles = (rows_per_head + kRows - 1) / kRows;
  const int64_t ld = round_up(d, kLanes<M>);  // padded row length of the value tile and accumulators

  parallel_for(b * h_kv * tiles, 1, [&](int64_t begin, int64_t end) {
    Scratch<M> qt(kRows * d), kt(d * kKeys), vt(kKeys * ld), st(kRows * kKeys), acc(kRows * ld);
    kernels::AttentionAcc<M> row_acc[kRows];
    kernels::KeyRange keys[kRows];
    T* out_row[kRows];
    for (int64_t task = begin; task < end; ++task) {
      const int64_t bk = task / tiles, z = task % tiles;
      const int64_t bi = bk / h_kv, hk = bk % h_kv;
      // Causal tiles grow in cost down the rows: take them first, last, second, ... so that the
      // contiguous range of tasks a thread gets holds as much work as another's.
      const int64_t tile = z % 2 == 0 ? z / 2 : tiles - 1 - z / 2;
      const int64_t r0 = tile * kRows, rows = std::min(kRows, rows_per_head - r0);
      int64_t k_lo = t_kv, k_hi = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t head = hk * group + (r0 + r) / t_q, i = (r0 + r) % t_q;
        load_rows(q.row(bi, head, i), 0, q.s[3], 1, d, qt.data() + r * d, d);
        keys[r] = kernels::attention_keys(t_kv - t_q + i, t_kv, args.causal, args.window);
        if (keys[r].lo < keys[r].hi) {
          k_lo = std::min(k_lo, keys[r].lo);
          k_hi = std::max(k_hi, keys[r].hi);
        }
        row_acc[r] = kernels::AttentionAcc<M>::init();
        out_row[r] = out + ((bi * h + head) * t_q + i) * d;
        std::fill(acc.data() + r * ld, acc.data() + (r + 1) * ld, M(0));
      }
      for (int64_t j0 = k_lo; j0 < k_hi; j0 += kKeys) {
        const int64_t n = std::min(kKeys, k_hi - j0);
        // Keys transposed (kt[c][j]), the columns past n zero.
        const T* kj = k.row(bi, hk, j0);
        constexpr bool kBlocks =
            std::is_same_v<M, float> && (std::is_same_v<T, float> || std::is_same_v<T, bf16> || std::is_same_v<T, f16>);
        if (kBlocks && k.s[3] == 1) {
          if constexpr (kBlocks) transpose_keys(kj, k.s[2], n, d, kt.data());
        } else {
          for (int64_t j = 0; j < n; ++j)
            for (int64_t c = 0; c < d; ++c) kt[c * kKeys + j] = kernels::to_opmath(kj[j * k.s[2] + c * k.s[3]]);
        }
        for (int64_t c = 0; c < d && n < kKeys; ++c)
          std::fill(kt.data() + c * kKeys + n, kt.data() + (c + 1) * kKeys, M(0));
        // Values where they lie when their rows are already ld values of M (f32 or f64, d a multiple
        // of the lanes, contiguous within a row); else copied row by row, padded with zeros.
        const M* values = vt.data();
        int64_t values_ld = ld;
        bool in_place = false;
        if constexpr (std::is_same_v<T, M>) {
          in_place = v.s[3] == 1 && d == ld;
          if (in_place) values = v.row(bi, hk, j0), values_ld = v.s[2];
        }
        if (!in_place) {
          constexpr bool kWiden = std::is_same_v<M, float> && (std::is_same_v<T, bf16> || std::is_same_v<T, f16>);
          if (kWiden && v.s[3] == 1) {
            if constexpr (kWiden) widen_rows(v.row(bi, hk, j0), v.s[2], n, d, vt.data(), ld);
          } else {
            load_rows(v.row(bi, hk, j0), v.s[2], v.s[3], n, d, vt.data(), ld);
          }
          for (int64_t j = 0; j < n; ++j) std::fill(vt.data() + j * ld + d, vt.data() + (j + 1) * ld, M(0));
        }
        scores_tile(qt.data(), d, kt.data(), rows, d, st.data());
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t a = std::max(keys[r].lo, j0) - j0, e = std::min(keys[r].hi, j0 + n) - j0;
          if (a >= e) continue;
          const T* m = nullptr;
          if (mask) {
            const int64_t head = hk * group + (r0 + r) / t_q, i = (r0 + r) % t_q;
            m = mask + bi * ms[0] + head * ms[1] + i * ms[2] + j0 * ms[3];
          }
          add_tile_row(st.data() + r * kKeys, a, e, m, ms[3], scale, cap, row_acc[r], acc.data() + r * ld, ld, values,
                       values_ld);
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        const M* o = acc.data() + r * ld;
        for (int64_t c = 0; c < d; ++c)
          out_row[r][c] = kernels::from_opmath<T>(kernels::attention_value(o[c], row_acc[r]));
      }
    }
  });
}

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

// The paged kernel (paged_attention.h): a task takes one query token and one KV head (the query
// heads of its group as the rows of one tile, so that each key serves all of them) and walks the
// positions its token sees kKeys at a time, as attention_typed walks a cache: each tile's keys and
// values gathered from their blocks (each run of positions within one block copied as rows `stride`
// apart: the keys transposed in registers, the halves widened in vectors, Q8_0 rows dequantized
// first), then the same scores, online softmax and weighted sums. A decode step through the pools
// thus gives the bits the contiguous kernel gives over the same cache.
template <typename T, typename P>
void paged_typed(const View& q, const View& k_pool, const View& v_pool, const View& tables, const View& seqs,
                 const View& positions, const AttentionArgs& a, T* out) {
  using M = kernels::opmath_t<T>;
  constexpr bool kQ8 = std::is_same_v<P, uint8_t>;
  constexpr bool kBlocks = !kQ8 && std::is_same_v<M, float>;  // f32 and the halves
  const int64_t t = q.layout.shape()[0], h = q.layout.shape()[1], d = q.layout.shape()[2];
  const int64_t block_size = k_pool.layout.shape()[1], h_kv = k_pool.layout.shape()[2];
  const int64_t row_len = k_pool.layout.shape()[3];  // d, or a Q8_0 row's bytes
  const int64_t max_blocks = tables.layout.shape()[1], group = h / h_kv, stride = h_kv * row_len;
  const T* qd = static_cast<const T*>(q.storage.data()) + q.layout.offset();
  const int64_t qs0 = q.layout.stride(0), qs1 = q.layout.stride(1), qs2 = q.layout.stride(2);
  const P* kd = static_cast<const P*>(k_pool.storage.data()) + k_pool.layout.offset();
  const P* vd = static_cast<const P*>(v_pool.storage.data()) + v_pool.layout.offset();
  const auto* table = static_cast<const int32_t*>(tables.storage.data()) + tables.layout.offset();
  const auto* seq = static_cast<const int32_t*>(seqs.storage.data()) + seqs.layout.offset();
  const auto* pos = static_cast<const int32_t*>(positions.storage.data()) + positions.layout.offset();
  const M scale = static_cast<M>(a.scale), cap = static_cast<M>(a.softcap);
  const int64_t ld = round_up(d, kLanes<M>);
  parallel_for(t * h_kv, 1, [&](int64_t begin, int64_t end) {
    Scratch<M> qt(group * d), kt(d * kKeys), vt(kKeys * ld), st(group * kKeys), acc(group * ld), deq(d);
    std::vector<kernels::AttentionAcc<M>> rows(static_cast<size_t>(group));
    for (int64_t task = begin; task < end; ++task) {
      const int64_t i = task / h_kv, g = task % h_kv;
      const int64_t p = pos[i], lo = a.window > 0 ? std::max<int64_t>(0, p - a.window + 1) : 0;
      const int32_t* row = table + seq[i] * max_blocks;
      for (int64_t r = 0; r < group; ++r) {
        load_rows(qd + i * qs0 + (g * group + r) * qs1, 0, qs2, 1, d, qt.data() + r * d, d);
        rows[static_cast<size_t>(r)] = kernels::AttentionAcc<M>::init();
      }
      std::fill(acc.data(), acc.data() + group * ld, M(0));
      for (int64_t j0 = lo; j0 <= p; j0 += kKeys) {
        const int64_t n = std::min(kKeys, p + 1 - j0);
        for (int64_t j = 0; j < n;) {  // runs of positions within one block
          const int64_t at = j0 + j, slot = at % block_size, run = std::min(n - j, block_size - slot);
          const int64_t first = ((row[at / block_size] * block_size + slot) * h_kv + g) * row_len;
          if constexpr (kBlocks) {
            transpose_keys(kd + first, stride, run, d, kt.data() + j);
            if constexpr (std::is_same_v<T, M>) {
              for (int64_t x = 0; x < run; ++x) std::copy_n(vd + first + x * stride, d, vt.data() + (j + x) * ld);
            } else {
              widen_rows(vd + first, stride, run, d, vt.data() + j * ld, ld);
            }
          } else {
            for (int64_t x = 0; x < run; ++x) {
              const M* kx = deq.data();
              if constexpr (kQ8)
                dequantize_q8_0(kd + first + x * stride, d, deq.data());
              else
                kx = kd + first + x * stride;  // f64
              for (int64_t c = 0; c < d; ++c) kt[c * kKeys + j + x] = kx[c];
              if constexpr (kQ8)
                dequantize_q8_0(vd + first + x * stride, d, vt.data() + (j + x) * ld);
              else
                std::copy_n(vd + first + x * stride, d, vt.data() + (j + x) * ld);
            }
          }
          j += run;
        }
        for (int64_t c = 0; c < d && n < kKeys; ++c)
          std::fill(kt.data() + c * kKeys + n, kt.data() + (c + 1) * kKeys, M(0));
        for (int64_t j = 0; j < n; ++j) std::fill(vt.data() + j * ld + d, vt.data() + (j + 1) * ld, M(0));
        scores_tile(qt.data(), d, kt.data(), group, d, st.data());
        for (int64_t r = 0; r < group; ++r)
          add_tile_row(st.data() + r * kKeys, 0, n, static_cast<const T*>(nullptr), 0, scale, cap,
                       rows[static_cast<size_t>(r)], acc.data() + r * ld, ld, vt.data(), ld);
      }
      for (int64_t r = 0; r < group; ++r)
        for (int64_t c = 0; c < d; ++c)
          out[(i * h + g * group + r) * d + c] =
              kernels::from_opmath<T>(kernels::attention_value(acc[r * ld + c], rows[static_cast<size_t>(r)]));
    }
  });
}

}  // namespace

StoragePtr CpuNnKernels::attention(const View& q, const View& k, const View& v, const View* mask,
                                   const AttentionArgs& args) const {
  StoragePtr out = backend_.alloc(q.dtype, q.layout.numel());
  dispatch(q.dtype, [&]<typename T>() {
    if constexpr (kernels::is_float_v<T> && !std::is_same_v<T, f8e4m3>) {
      attention_typed<T>(q, k, v, mask, args, out->as<T>());
    } else {
      throw_not_supported(backend_, NnOp::Attention, q.dtype);
    }
  });
  return out;
}

template <typename T, typename P>
void paged_attention_tiles(const View& q, const View& k_pool, const View& v_pool, const View& tables, const View& seqs,
                           const View& positions, const AttentionArgs& args, T* out) {
  paged_typed<T, P>(q, k_pool, v_pool, tables, seqs, positions, args, out);
}

#define WICK_PAGED(T, P)                                                                                     \
  template void paged_attention_tiles<T, P>(const View&, const View&, const View&, const View&, const View&, \
                                            const View&, const AttentionArgs&, T*);
WICK_PAGED(float, float)
WICK_PAGED(double, double)
WICK_PAGED(f16, f16)
WICK_PAGED(bf16, bf16)
WICK_PAGED(float, uint8_t)
WICK_PAGED(double, uint8_t)
WICK_PAGED(f16, uint8_t)
WICK_PAGED(bf16, uint8_t)
#undef WICK_PAGED

}  // namespace wick::cpu
