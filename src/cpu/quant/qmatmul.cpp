// The CPU kernels of the block formats: dequantize, and the product x W^T with x rounded to 8 bits
// per 32 values (kernels/quant.h's quantize_act) and integer dot products against the weight's
// unpacked bytes, multithreaded over weight rows: the SIMD kernels of qdot.h where the machine has
// them (chosen at run time there), else a portable loop that unpacks each block once for all rows
// of x.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/dispatch.h"
#include "cpu/nn/rows.h"
#include "cpu/parallel.h"
#include "cpu/quant/amx.h"
#include "cpu/quant/arranged.h"
#include "cpu/quant/qdot.h"
#include "cpu/quant/quant_kernels.h"
#include "cpu/quant/superblock.h"
#include "kernels/quant.h"
#include "wick/device.h"

namespace wick::cpu {

namespace kq = kernels::quant;
using quant::QType;

namespace {

// ---- dequantize -------------------------------------------------------------------------------

template <QType Q, typename T>
void dequantize_blocks(const uint8_t* blocks, int64_t nblocks, T* out) {
  using F = kq::Format<Q>;
  const auto* b = reinterpret_cast<const typename F::Block*>(blocks);
  parallel_for(nblocks, 256, [&](int64_t begin, int64_t end) {
    float values[F::kValues];
    for (int64_t i = begin; i < end; ++i) {
      for (int g = 0; g < F::kGroups; ++g) kq::dequantize_group<Q>(b[i], g, values + g * F::kGroup);
      if constexpr (std::is_same_v<T, float>) {
        std::memcpy(out + i * F::kValues, values, sizeof values);
      } else {
        rows::narrow(values, F::kValues, out + i * F::kValues);
      }
    }
  });
}

// ---- matmul -----------------------------------------------------------------------------------

using qdot::RoundedX;

// Weight bytes a task keeps in cache while every tile of x passes over them.
constexpr int64_t kRunBytes = 256 * 1024;

// Values of x a task of round_x rounds at least: a decoding step's few rows take less time on one
// thread than waking a team (half of a 4-sequence step's parallel regions were these).
constexpr int64_t kRoundGrain = 4 * kParallelGrain;

// x rounded, with offset bytes in `order` (those the row kernels that will read x take).
template <typename T>
RoundedX round_x(const T* x, int64_t m, int64_t k, qdot::Offset order) {
  RoundedX r(m, k, order);
  parallel_for(m, std::max<int64_t>(1, kRoundGrain / k), [&](int64_t begin, int64_t end) {
    std::vector<float> buf(static_cast<size_t>(k));
    for (int64_t t = begin; t < end; ++t) qdot::round_row(rows::widen(x + t * k, k, buf.data()), k, r, t);
  });
  return r;
}

// The integer dot product of 32 bytes: u the weight's (below 128), a the activations'.
int dot32(const uint8_t* u, const int8_t* a) {
  int acc = 0;
  for (int i = 0; i < 32; ++i) acc += static_cast<int8_t>(u[i]) * a[i];
  return acc;
}

// Rows [r0, r1) of the weight times every row of x: out[t, r] for t < m; the portable loop, where
// qdot::simd_rows has no kernel for the machine. Each block is unpacked
// to bytes and scales once, for every row of x, and unit_dot's formula is repeated over byte arrays that
// the compiler vectorises (3.5x faster on the K-quants than load_unit + unit_dot per unit here).
template <QType Q>
void weight_rows(const uint8_t* w, int64_t r0, int64_t r1, int64_t k, qdot::XRows x, int64_t m, float* out,
                 int64_t n) {
  using F = kq::Format<Q>;
  const int64_t nb = k / F::kValues;
  constexpr int kUnits = F::kValues / 32;
  const auto* blocks = reinterpret_cast<const typename F::Block*>(w);
  alignas(64) uint8_t u[F::kValues];
  kq::GroupScale s[F::kGroups];
  std::vector<float> acc(static_cast<size_t>(m));
  for (int64_t r = r0; r < r1; ++r) {
    std::fill(acc.begin(), acc.end(), 0.f);
    for (int64_t i = 0; i < nb; ++i) {
      const typename F::Block& b = blocks[r * nb + i];
      for (int g = 0; g < F::kGroups; ++g) {
        s[g] = kq::group_scale<Q>(b, g);
        for (int v = 0; v < F::kGroup / 4; ++v) {
          const uint32_t word = kq::group_word<Q>(b, g, v);
          std::memcpy(u + g * F::kGroup + 4 * v, &word, 4);
        }
      }
      for (int64_t t = 0; t < m; ++t) {
        const int8_t* a = x.q + t * k + i * F::kValues;
        const float* ad = x.d + t * (k / 32) + i * kUnits;  // the units' d, s0 and s1
        const float* as = x.s + 2 * (t * (k / 32) + i * kUnits);
        float sum = 0.f;
        for (int j = 0; j < kUnits; ++j) {
          if constexpr (F::kGroup == 32) {
            const int dot = dot32(u + 32 * j, a + 32 * j);
            sum += s[j].d * ad[j] * static_cast<float>(dot) - kq::group_bias<Q>(s[j]) * (as[2 * j] + as[2 * j + 1]);
          } else {
            int d0 = 0, d1 = 0;
            for (int e = 0; e < 16; ++e) {
              d0 += static_cast<int8_t>(u[32 * j + e]) * a[32 * j + e];
              d1 += static_cast<int8_t>(u[32 * j + 16 + e]) * a[32 * j + 16 + e];
            }
            const kq::GroupScale g0 = s[2 * j], g1 = s[2 * j + 1];
            sum += ad[j] * (g0.d * static_cast<float>(d0) + g1.d * static_cast<float>(d1)) -
                   (kq::group_bias<Q>(g0) * as[2 * j] + kq::group_bias<Q>(g1) * as[2 * j + 1]);
          }
        }
        acc[static_cast<size_t>(t)] += sum;
      }
    }
    for (int64_t t = 0; t < m; ++t) out[t * n + r] = acc[static_cast<size_t>(t)];
  }
}

// Rows [begin, end) of the weight (begin a multiple of qdot::kPanelRows) times the m rows of x:
// y[t * n + r]. An arranged weight's groups of rows go through their kernel, whatever m (each row of
// x gets bits of its own there, so batch-invariant mode takes it too). Else many rows of x go through
// AMX's tiles (Q8_0, from amx::kMinRows rows, where the processor has them) or panels of weight rows
// where the machine has that kernel. What is left (an arranged weight's last
// rows, fewer than a group, lie as they were) goes in runs of about kRunBytes of weight rows (kept
// in the core's cache) through every tile of up to qdot::kMaxRows rows of x (in batch-invariant
// mode, qdot::kInvariantRows), so that the weight is read from memory once and x, from the shared
// cache, once per run. `invariant`: batch_invariant() as the calling thread reads it (the mode is
// the thread's; this runs on the team's).
template <QType Q>
void weight_rows_times_x(const uint8_t* blocks, int64_t begin, int64_t end, int64_t cols, const RoundedX& rx, int64_t m,
                         float* y, int64_t n, bool arranged, bool invariant) {
  const int64_t tile_rows = invariant ? qdot::kInvariantRows : qdot::kMaxRows;
  const int64_t run = std::max<int64_t>(1, kRunBytes / quant::row_bytes(Q, cols));
  if (arranged) begin = arranged::simd_rows(Q, blocks, begin, end, cols, rx, m, y, n);
  if constexpr (Q == QType::Q8_0)
    if (!invariant && m >= amx::kMinRows) begin = amx::q8_0_rows(blocks, begin, end, cols, rx, m, y, n);
  if (!invariant && m > qdot::kMaxRows) begin = qdot::simd_panels(Q, blocks, begin, end, cols, rx, m, y, n);
  for (int64_t r0 = begin; r0 < end; r0 += run) {
    const int64_t r1 = std::min(end, r0 + run);
    for (int64_t t0 = 0; t0 < m; t0 += tile_rows) {
      const int64_t tile = std::min(tile_rows, m - t0);
      const qdot::XRows xt(rx, t0, cols);
      if (!qdot::simd_rows(Q, blocks, r0, r1, cols, xt, tile, y + t0 * n, n))
        weight_rows<Q>(blocks, r0, r1, cols, xt, tile, y + t0 * n, n);
    }
  }
}

// x (m, k) times the weight through superblock.h's kernel (which takes() allows): x rounded per
// super-block in one parallel region, the weight's rows in another, kPanelRows at a time.
template <typename T>
void superblock_product(const T* x, int64_t m, const uint8_t* w, QType qtype, int64_t rows, int64_t k, T* out) {
  superblock::RoundedX rx(m, k);
  parallel_for(m, std::max<int64_t>(1, kRoundGrain / k), [&](int64_t begin, int64_t end) {
    std::vector<float> buf(static_cast<size_t>(k));
    for (int64_t t = begin; t < end; ++t) superblock::round_row(rows::widen(x + t * k, k, buf.data()), k, rx, t);
  });
  std::vector<float> result;
  float* y = rows::results(out, nullptr);
  if (y == nullptr) {
    result.resize(static_cast<size_t>(m * rows));
    y = result.data();
  }
  const int64_t grain = qdot::kPanelRows;
  parallel_for((rows + grain - 1) / grain, 1, [&](int64_t first, int64_t last) {
    superblock::rows(qtype, w, first * grain, std::min(rows, last * grain), k, rx, m, y, rows);
  });
  if (!result.empty()) rows::narrow(result.data(), m * rows, out);
}

}  // namespace

StoragePtr CpuQuantKernels::dequantize(const Storage& w, QType qtype, int64_t rows, int64_t cols, DType dtype) const {
  StoragePtr out = backend_.alloc(dtype, rows * cols);
  const auto* blocks = static_cast<const uint8_t*>(w.data());
  kq::dispatch_qtype(qtype, [&]<QType Q>() {
    const int64_t nblocks = rows * (cols / kq::Format<Q>::kValues);
    dispatch(dtype, [&]<typename T>() {
      if constexpr (rows::kTakes<T>) {
        dequantize_blocks<Q>(blocks, nblocks, out->as<T>());
      } else {
        throw_not_supported(backend_, QuantOp::Dequantize, dtype);
      }
    });
  });
  return out;
}

StoragePtr CpuQuantKernels::arrange(const Storage& w, QType qtype, int64_t rows, int64_t cols) const {
  if (!arranged::arranges(qtype, cols) || rows < arranged::kRows) return nullptr;
  StoragePtr out = backend_.alloc(DType::U8, rows * quant::row_bytes(qtype, cols));
  arranged::arrange(qtype, static_cast<const uint8_t*>(w.data()), rows, cols, out->as<uint8_t>());
  return out;
}

StoragePtr CpuQuantKernels::plain(const Storage& w, QType qtype, int64_t rows, int64_t cols) const {
  StoragePtr out = backend_.alloc(DType::U8, rows * quant::row_bytes(qtype, cols));
  arranged::plain(qtype, static_cast<const uint8_t*>(w.data()), rows, cols, out->as<uint8_t>());
  return out;
}

StoragePtr CpuQuantKernels::matmul(const View& x, const Storage& w, QType qtype, int64_t rows, int64_t cols) const {
  return product(x, w, qtype, rows, cols, false);
}

StoragePtr CpuQuantKernels::matmul_arranged(const View& x, const Storage& w, QType qtype, int64_t rows,
                                            int64_t cols) const {
  // Arranged where the machine had the kernel; a test may since have lowered the instruction set.
  if (!arranged::arranges(qtype, cols)) return product(x, *plain(w, qtype, rows, cols), qtype, rows, cols, false);
  return product(x, w, qtype, rows, cols, true);
}

CpuQuantKernels::Path CpuQuantKernels::path(QType qtype, int64_t cols, int64_t m, bool arranged) {
  if (batch_invariant() || m <= kMaxDotRows) return Path::Rows;
  // Arranged weights keep their kernel, but for Q8_0 (arranged only where AVX2's kernels are the
  // best) from kAvx2GemmFromRows rows, where the GEMM stays the faster (plain() first).
  if (arranged) return qtype == QType::Q8_0 && m >= kAvx2GemmFromRows ? Path::Gemm : Path::Rows;
  if (superblock::takes(qtype, cols)) return Path::Superblock;
  const qdot::Isa isa = qdot::active_isa();
  // aarch64's dot kernels (never timed beside the GEMM there) take the same rows as AVX2's.
  if (isa == qdot::Isa::None || ((isa == qdot::Isa::Avx2 || isa == qdot::Isa::Neon) && m >= kAvx2GemmFromRows))
    return Path::Gemm;
  return Path::Rows;
}

StoragePtr CpuQuantKernels::product(const View& x, const Storage& w, QType qtype, int64_t rows, int64_t cols,
                                    bool arranged) const {
  const int64_t m = x.layout.numel() / cols;
  const Path taken = path(qtype, cols, m, arranged);
  if (taken == Path::Superblock) {
    // Many rows of plain Q4_K, Q5_K or Q6_K where the SIMD kernels are AVX2's: x rounded per
    // super-block.
    StoragePtr out = backend_.alloc(x.dtype, m * rows);
    dispatch(x.dtype, [&]<typename T>() {
      if constexpr (rows::kTakes<T>) {
        superblock_product(static_cast<const T*>(x.storage.data()) + x.layout.offset(), m,
                           static_cast<const uint8_t*>(w.data()), qtype, rows, cols, out->as<T>());
      } else {
        throw_not_supported(backend_, QuantOp::Matmul, x.dtype);
      }
    });
    return out;
  }
  if (taken == Path::Gemm) {
    // Many rows and no SIMD kernels, or AVX2's or aarch64's past kAvx2GemmFromRows: the weight
    // dequantized once to f32, then the GEMM (OpenBLAS).
    StoragePtr wf = dequantize(arranged ? *plain(w, qtype, rows, cols) : w, qtype, rows, cols, DType::F32);
    const Layout wt({cols, rows}, {1, cols}, 0);
    if (x.dtype == DType::F32) return backend_.matmul(x, View{*wf, wt, DType::F32});
    StoragePtr xf = backend_.cast(x, DType::F32);
    const Layout xl({m, cols});
    StoragePtr y = backend_.matmul(View{*xf, xl, DType::F32}, View{*wf, wt, DType::F32});
    const Layout yl({m, rows});
    return backend_.cast(View{*y, yl, DType::F32}, x.dtype);
  }
  StoragePtr out = backend_.alloc(x.dtype, m * rows);
  dispatch(x.dtype, [&]<typename T>() {
    if constexpr (rows::kTakes<T>) {
      // An arranged weight of whole groups leaves no rows to the row kernels: no offset bytes.
      const qdot::Offset order = arranged && rows % arranged::kRows == 0 ? qdot::Offset::None
                                                                         : qdot::offset_order(qtype, cols);
      const RoundedX rx = round_x(static_cast<const T*>(x.storage.data()) + x.layout.offset(), m, cols, order);
      std::vector<float> result;
      float* y = rows::results(out->as<T>(), nullptr);
      if (y == nullptr) {
        result.resize(static_cast<size_t>(m * rows));
        y = result.data();
      }
      const auto* blocks = static_cast<const uint8_t*>(w.data());
      const bool invariant = batch_invariant();
      kq::dispatch_qtype(qtype, [&]<QType Q>() {
        const int64_t grain = qdot::kPanelRows;
        parallel_for((rows + grain - 1) / grain, 1, [&](int64_t first, int64_t last) {
          weight_rows_times_x<Q>(blocks, first * grain, std::min(rows, last * grain), cols, rx, m, y, rows, arranged,
                                 invariant);
        });
      });
      if (!result.empty()) rows::narrow(result.data(), m * rows, out->as<T>());
    } else {
      throw_not_supported(backend_, QuantOp::Matmul, x.dtype);
    }
  });
  return out;
}

StoragePtr CpuQuantKernels::matmul_grouped(const View& x, const Storage& w, QType qtype, int64_t rows, int64_t cols,
                                           int64_t experts, const View& groups, int64_t /*max_rows*/,
                                           bool arranged) const {
  // Arranged where the machine had the kernel (a test may since have lowered the instruction set),
  // each expert's rows whole groups of the arrangement; else the front end's composition.
  if (arranged && (!arranged::arranges(qtype, cols) || rows % arranged::kRows != 0)) return nullptr;
  const int64_t p = x.layout.numel() / cols, g = groups.layout.numel() / 3;
  const int64_t* entry = static_cast<const int64_t*>(groups.storage.data()) + groups.layout.offset();
  struct Group {
    int64_t expert, first, m;
  };
  std::vector<Group> list;        // the groups that have rows
  std::vector<int64_t> start{0};  // of each one's rows among all of theirs
  for (int64_t i = 0; i < g; ++i) {
    const int64_t e = entry[3 * i], first = entry[3 * i + 1], end = entry[3 * i + 2];
    check_group(i, e, first, end, experts, p, backend_.name());
    if (end == first) continue;
    // Rows that product() gives to another kernel than the row kernels (the GEMM, or x rounded per
    // super-block): the composition, which calls it.
    if (path(qtype, cols, end - first, arranged) != Path::Rows) return nullptr;
    list.push_back({e, first, end - first});
    start.push_back(start.back() + end - first);
  }
  StoragePtr out = backend_.alloc(x.dtype, p * rows);
  dispatch(x.dtype, [&]<typename T>() {
    if constexpr (rows::kTakes<T>) {
      const T* xd = static_cast<const T*>(x.storage.data()) + x.layout.offset();
      const int64_t x_row = x.layout.stride(0);  // cols, or 0: one token's row for all its pairs
      // Each group's rows of x rounded as product() rounds a call's, all in one parallel region.
      const qdot::Offset order = arranged ? qdot::Offset::None : qdot::offset_order(qtype, cols);
      std::vector<RoundedX> xs;
      xs.reserve(list.size());
      for (const Group& gr : list) xs.emplace_back(gr.m, cols, order);
      parallel_for(start.back(), std::max<int64_t>(1, kRoundGrain / cols), [&](int64_t begin, int64_t end) {
        std::vector<float> buf(static_cast<size_t>(cols));
        for (int64_t i = begin; i < end; ++i) {
          const auto j = static_cast<size_t>(std::upper_bound(start.begin(), start.end(), i) - start.begin() - 1);
          const int64_t t = i - start[j];
          qdot::round_row(rows::widen(xd + (list[j].first + t) * x_row, cols, buf.data()), cols, xs[j], t);
        }
      });
      std::vector<float> result;
      float* y = rows::results(out->as<T>(), nullptr);
      if (y == nullptr) {
        result.resize(static_cast<size_t>(p * rows));
        y = result.data();
      }
      std::fill(y, y + p * rows, 0.f);  // rows of x no group names
      const auto* blocks = static_cast<const uint8_t*>(w.data());
      const int64_t expert_bytes = rows * quant::row_bytes(qtype, cols);
      const int64_t grain = qdot::kPanelRows, units = (rows + grain - 1) / grain;
      const bool invariant = batch_invariant();
      kq::dispatch_qtype(qtype, [&]<QType Q>() {
        // Every group's weight rows, kPanelRows at a time, in one region: a task's units, group by
        // group, as product() takes one weight's.
        parallel_for(static_cast<int64_t>(list.size()) * units, 1, [&](int64_t first, int64_t last) {
          for (int64_t u = first; u < last;) {
            const int64_t j = u / units, stop = std::min(last, (j + 1) * units);
            const Group& gr = list[static_cast<size_t>(j)];
            weight_rows_times_x<Q>(blocks + gr.expert * expert_bytes, (u - j * units) * grain,
                                   std::min(rows, (stop - j * units) * grain), cols, xs[static_cast<size_t>(j)], gr.m,
                                   y + gr.first * rows, rows, arranged, invariant);
            u = stop;
          }
        });
      });
      if (!result.empty()) rows::narrow(result.data(), p * rows, out->as<T>());
    } else {
      throw_not_supported(backend_, QuantOp::MatmulGrouped, x.dtype);
    }
  });
  return out;
}

}  // namespace wick::cpu
