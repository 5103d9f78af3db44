// GpuQuantKernels: dequantize and qmatmul on the GPU through the kernels of qmatmul.cuh.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "gpu/quant/qmatmul.cuh"
#include "gpu/quant/qmatmul_mmq.cuh"
#include "gpu/quant/qmatmul_tiles.cuh"
#include "gpu/quant/quant_kernels.h"
#include "wick/device.h"

namespace wick::gpu {

using qmm::launch_dequantize;
using qmm::launch_dot_rows;
using qmm::launch_tile_rows;
using quant::QType;

namespace {

// Calls f.template operator()<T>() for the float dtypes the kernels take (f32, f16, bf16); any
// other is the backend's not-supported error.
template <typename F>
void dispatch_float(const GpuBackend& b, QuantOp op, DType dtype, F&& f) {
  dispatch(dtype, [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, f16> || std::is_same_v<T, bf16>)
      f.template operator()<T>();
    else
      throw_not_supported(b, op, dtype);
  });
}

}  // namespace

StoragePtr GpuQuantKernels::dequantize(const Storage& w, QType qtype, int64_t rows, int64_t cols, DType dtype) const {
  backend_.activate();
  return values(static_cast<const uint8_t*>(w.data()), qtype, rows, cols, dtype);
}

StoragePtr GpuQuantKernels::values(const uint8_t* w, QType qtype, int64_t rows, int64_t cols, DType dtype) const {
  GpuBackend& b = backend_;
  StoragePtr out = b.alloc(dtype, rows * cols);
  dispatch_float(b, QuantOp::Dequantize, dtype,
                 [&]<typename T>() { launch_dequantize(b, qtype, w, rows, cols, out->as<T>()); });
  return out;
}

StoragePtr GpuQuantKernels::matmul(const View& x, const Storage& w, QType qtype, int64_t rows, int64_t cols) const {
  backend_.activate();
  return product(x, static_cast<const uint8_t*>(w.data()), qtype, rows, cols);
}

StoragePtr GpuQuantKernels::matmul_grouped(const View& x, const Storage& w, QType qtype, int64_t rows, int64_t cols,
                                           int64_t experts, const View& groups, int64_t max_rows, bool arranged) const {
  if (arranged) return nullptr;  // no arrangement on a GPU (arrange() makes none)
  GpuBackend& b = backend_;
  b.activate();
  const int64_t p = x.layout.numel() / cols, g = groups.layout.numel() / 3;
  // Rows 0 apart: one token's row for all its pairs, read in place by the integer-dot kernels.
  const bool one_row = p > 1 && x.layout.stride(0) == 0;
  const auto* pw = static_cast<const uint8_t*>(w.data());
  const int64_t expert_bytes = rows * quant::row_bytes(qtype, cols);
  StoragePtr out = b.alloc(x.dtype, p * rows);
  // Rows no group names are zeros: the matrix-unit kernel and the host's groups leave them to this
  // memset; the integer-dot kernels write them themselves.
  auto zero_out = [&] {
    WICK_GPU_CHECK(memset_async(out->data(), 0, static_cast<size_t>(p * rows) * dtype_size(x.dtype), b.stream()));
  };
  // While a graph is recorded nothing may wait for the host: the kernels then take any rows.
  if (max_rows <= kMaxGroupedRows || capturing(b.stream()) || one_row) {
    const int64_t* pg = static_cast<const int64_t*>(groups.storage.data()) + groups.layout.offset();
    const GpuBackend::QmatmulPath path = b.qmatmul_path();
    // Batch-invariant mode keeps the integer dots, whose rows do not depend on their neighbours.
    const bool mmq = !one_row && !batch_invariant() && qmm::mmq_applies(b, qtype, pw, cols) &&
                     (path == GpuBackend::QmatmulPath::Tiles ||
                      (path == GpuBackend::QmatmulPath::Auto && max_rows >= kMinMmqGroupedRows));
    dispatch_float(b, QuantOp::MatmulGrouped, x.dtype, [&]<typename T>() {
      const T* px = static_cast<const T*>(x.storage.data()) + x.layout.offset();
      const int64_t most = std::max<int64_t>(max_rows, 1);
      if (mmq) {
        zero_out();
        if (qmm::launch_mmq_rows(b, qtype, pw, rows, cols, px, p, most, pg, g, experts, out->as<T>())) return;
      }
      qmm::launch_dot_rows_grouped(b, qtype, pw, rows, cols, px, p, one_row, pg, g, experts, static_cast<int>(most),
                                   out->as<T>());
    });
    return out;
  }
  // Many rows a group (a prompt's): the groups read here, each group's product as matmul() runs it.
  zero_out();
  std::vector<int64_t> host(static_cast<size_t>(3 * g));
  b.to_host(groups.storage, static_cast<size_t>(groups.layout.offset()) * sizeof(int64_t),
            host.size() * sizeof(int64_t), host.data());
  const size_t elem = dtype_size(x.dtype);
  for (int64_t i = 0; i < g; ++i) {
    const int64_t e = host[3 * i], first = host[3 * i + 1], end = host[3 * i + 2];
    check_group(i, e, first, end, experts, p, b.name());
    if (first == end) continue;
    const View rows_of_x{x.storage, Layout({end - first, cols}, {cols, 1}, x.layout.offset() + first * cols), x.dtype};
    const StoragePtr y = product(rows_of_x, pw + e * expert_bytes, qtype, rows, cols);
    WICK_GPU_CHECK(copy_d2d_async(static_cast<char*>(out->data()) + static_cast<size_t>(first * rows) * elem, y->data(),
                                  static_cast<size_t>((end - first) * rows) * elem, b.stream()));
  }
  return out;
}

StoragePtr GpuQuantKernels::product(const View& x, const uint8_t* w, QType qtype, int64_t rows, int64_t cols) const {
  GpuBackend& b = backend_;
  const int64_t m = x.layout.numel() / cols;
  if (batch_invariant()) {
    // Batch-invariant: the integer-dot kernels instantiated for one row where m is 1 (a decode step
    // at full speed), else for kInvariantRows rows, that many rows of x at a time. Both take one
    // weight row per group of lanes, so each row's sums keep one order.
    StoragePtr out = b.alloc(x.dtype, m * rows);
    const int64_t tile = m == 1 ? 1 : kInvariantRows;
    dispatch_float(b, QuantOp::Matmul, x.dtype, [&]<typename T>() {
      const T* px = static_cast<const T*>(x.storage.data()) + x.layout.offset();
      for (int64_t t0 = 0; t0 < m; t0 += tile)
        launch_dot_rows(b, qtype, w, rows, cols, px + t0 * cols, static_cast<int>(std::min<int64_t>(tile, m - t0)),
                        out->as<T>() + t0 * rows, static_cast<int>(tile));
    });
    return out;
  }
  const GpuBackend::QmatmulPath path = b.qmatmul_path();
  if (qmm::mmq_applies(b, qtype, w, cols) &&
      (path == GpuBackend::QmatmulPath::Tiles ||
       (path == GpuBackend::QmatmulPath::Auto && m >= kMinMmqRows && m <= kMaxMmqRows))) {
    StoragePtr out = b.alloc(x.dtype, m * rows);
    bool queued = false;
    dispatch_float(b, QuantOp::Matmul, x.dtype, [&]<typename T>() {
      queued =
          qmm::launch_mmq_rows(b, qtype, w, rows, cols, static_cast<const T*>(x.storage.data()) + x.layout.offset(), m,
                               m, nullptr, 1, 1, out->as<T>());
    });
    if (queued) return out;
  }
  if (path == GpuBackend::QmatmulPath::Tiles ||
      (path == GpuBackend::QmatmulPath::Auto && m >= kMinTileRows && m <= kMaxTileRows)) {
    StoragePtr out;
    dispatch_float(b, QuantOp::Matmul, x.dtype, [&]<typename T>() {
      out = launch_tile_rows(b, qtype, w, rows, cols, static_cast<const T*>(x.storage.data()) + x.layout.offset(),
                             static_cast<int>(m));
    });
    if (out) return out;
  }
  if (m > kMaxDotRows) {
    // Dequantize to x's dtype, then x (m, cols) times the weight's transpose through the GEMM. (In
    // chunks of weight rows whose dequantized tile stays in the L2 cache it ran slower on an H100,
    // at every chunk size tried: docs/performance-quantized.md.)
    StoragePtr wd = values(w, qtype, rows, cols, x.dtype);
    const Layout wt({cols, rows}, {1, cols}, 0);
    return b.matmul(x, View{*wd, wt, x.dtype});
  }
  StoragePtr out = b.alloc(x.dtype, m * rows);
  dispatch_float(b, QuantOp::Matmul, x.dtype, [&]<typename T>() {
    launch_dot_rows(b, qtype, w, rows, cols, static_cast<const T*>(x.storage.data()) + x.layout.offset(),
                    static_cast<int>(m), out->as<T>(), 0);
  });
  return out;
}

}  // namespace wick::gpu
