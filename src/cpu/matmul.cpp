// Batched matmul: f32 and f64 through OpenBLAS with operands in place (row-major or transposed
// views), f16/bf16/f8e4m3 through f32 buffers (accumulating in f32). Small products of a large
// batch run in parallel, one per thread; large ones run one after another on OpenBLAS's threads.
// A few rows of f32/f16/bf16 times a matrix stored as rows (a linear layer's weight, b = W^T)
// take the matvec.h loops instead, which read the weight once where a GEMM would pack it. In
// batch-invariant mode (wick::batch_invariant()) every product of f32/f16/bf16 takes them, tiles of
// kMatvecRows rows at a time, so that a row's bits never depend on how many rows came with it.

#include <optional>

#include "core/dispatch.h"
#include "cpu/cpu_backend.h"
#include "cpu/gemm.h"
#include "cpu/loops.h"
#include "cpu/matvec.h"
#include "cpu/nn/rows.h"
#include "cpu/scratch.h"
#include "kernels/numeric.h"
#include "wick/device.h"

namespace wick::cpu {

namespace {

// The batch dims of a layout of rank r >= 2 (its first r - 2 dims), as a layout of their own.
Layout batch_layout(const Layout& l) {
  Shape s;
  Strides st;
  for (int d = 0; d + 2 < l.rank(); ++d) {
    s.push_back(l.dim(d));
    st.push_back(l.stride(d));
  }
  return Layout(s, st, l.offset());
}

// Runs f(off_out, off_a, off_b) for each matrix of the batch, in parallel when `parallel`.
template <typename F>
void for_each_matrix(const Layout& out, const Layout& a, const Layout& b, bool parallel, const F& f) {
  const Layout bo = batch_layout(out), ba = batch_layout(a), bb = batch_layout(b);
  const StridedSpace<3> s = collapse<3>({&bo, &ba, &bb});
  auto run = [&](const int64_t* off, int64_t n, const int64_t* st) {
    for (int64_t i = 0; i < n; ++i) f(off[0] + i * st[0], off[1] + i * st[1], off[2] + i * st[2]);
  };
  if (parallel)
    for_each_run<3>(s, 1, run);
  else
    for_each_run_serial<3>(s, run);
}

// A (rows, cols) matrix at (row stride, col stride) as dense row-major f32, each row of halves
// widened in a vectorised loop where its elements are adjacent.
template <typename T>
void widen_matrix(const T* p, int64_t n_rows, int64_t cols, int64_t rs, int64_t cs, float* out) {
  parallel_for(n_rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(cols, 1)), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      if (cs == 1 || cols <= 1) {
        if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
          rows::widen_row(p + i * rs, cols, out + i * cols);
          continue;
        }
      }
      for (int64_t j = 0; j < cols; ++j) out[i * cols + j] = kernels::to_opmath(p[i * rs + j * cs]);
    }
  });
}

// Weights of at least this many elements are split over the threads by columns; smaller
// products of a batch run a matrix per thread.
constexpr int64_t kWideWeight = 1 << 16;

// Weight bytes a task keeps in cache while every tile of rows passes over them.
constexpr int64_t kRunBytes = 128 * 1024;

// The product of matvec.h for a (.., m, k) and b (.., k, n) whose columns are dense along k: m up
// to kMatvecRows, or any m in tiles of kMatvecRows rows where `any_rows`; false (nothing done) for
// other operands.
template <typename T>
bool matvec_product(const View& a, const View& b, const Layout& out_l, T* po, bool any_rows) {
  constexpr bool kTakes = std::is_same_v<T, float> || std::is_same_v<T, f16> || std::is_same_v<T, bf16>;
  const int r = a.layout.rank();
  const int64_t m = a.layout.dim(r - 2), k = a.layout.dim(r - 1), n = b.layout.dim(r - 1);
  if (!kTakes || (m > kMatvecRows && !any_rows) || (k > 1 && b.layout.stride(r - 2) != 1)) return false;
  if constexpr (kTakes) {
    const int64_t ars = a.layout.stride(r - 2), acs = a.layout.stride(r - 1);
    const int64_t ldw = n > 1 ? b.layout.stride(r - 1) : k;
    const T* pa = static_cast<const T*>(a.storage.data());
    const T* pb = static_cast<const T*>(b.storage.data());
    // f32 rows of a dense along k are read in place; others are widened first.
    const bool a_in_place = std::is_same_v<T, float> && (acs == 1 || k <= 1);
    const bool wide = n * k >= kWideWeight || m > kMatvecRows;
    // Columns a run of weight rows apart, each run met by every tile of rows while in cache.
    const int64_t run = std::max<int64_t>(1, kRunBytes / std::max<int64_t>(k * static_cast<int64_t>(sizeof(T)), 1));
    for_each_matrix(out_l, a.layout, b.layout, !wide, [&](int64_t oo, int64_t oa, int64_t ob) {
      std::optional<Scratch<float>> fa, fc;  // only where a is widened, and for halves' results
      const float* a_rows = nullptr;
      int64_t lda = k;
      if constexpr (std::is_same_v<T, float>) {
        if (a_in_place) {
          a_rows = pa + oa;
          lda = m > 1 ? ars : k;
        }
      }
      if (a_rows == nullptr) {
        widen_matrix(pa + oa, m, k, ars, acs, fa.emplace(m * k).data());
        a_rows = fa->data();
      }
      float* c = nullptr;
      if constexpr (std::is_same_v<T, float>) {
        c = po + oo;
      } else {
        c = fc.emplace(m * n).data();
      }
      auto columns = [&](int64_t j0, int64_t j1) {
        for (int64_t c0 = j0; c0 < j1; c0 += run)
          for (int64_t i0 = 0; i0 < m; i0 += kMatvecRows)
            matvec_rows(std::min(kMatvecRows, m - i0), c0, std::min(j1, c0 + run), k, a_rows + i0 * lda, lda, pb + ob,
                        ldw, c + i0 * n, n);
      };
      if (wide)
        parallel_for(n, std::max<int64_t>(1, 16384 / std::max<int64_t>(k, 1)), columns);
      else
        columns(0, n);
      if constexpr (!std::is_same_v<T, float>) rows::narrow(c, m * n, po + oo);
    });
  }
  return true;
}

// b (.., k, n) copied to dense columns, (.., n, k) in memory, seen again as (.., k, n).
StoragePtr dense_columns(CpuBackend& backend, const View& b, Layout* layout) {
  const int r = b.layout.rank();
  Shape shape = b.layout.shape();
  Strides strides = b.layout.strides();
  std::swap(shape[r - 1], shape[r - 2]);
  std::swap(strides[r - 1], strides[r - 2]);
  const Layout dense(shape);
  StoragePtr held = backend.alloc(b.dtype, dense.numel());
  backend.copy_strided(View{b.storage, Layout(shape, strides, b.layout.offset()), b.dtype},
                       MutView{*held, dense, b.dtype});
  Strides back = dense.strides();
  std::swap(shape[r - 1], shape[r - 2]);
  std::swap(back[r - 1], back[r - 2]);
  *layout = Layout(shape, back, 0);
  return held;
}

}  // namespace

StoragePtr CpuBackend::matmul(const View& a, const View& b) {
  const int r = a.layout.rank();
  const int64_t m = a.layout.dim(r - 2), k = a.layout.dim(r - 1), n = b.layout.dim(r - 1);
  Shape out_shape = a.layout.shape();
  out_shape[r - 1] = n;
  const Layout out_l(out_shape);
  StoragePtr out = alloc(a.dtype, out_shape.numel());
  if (out_shape.numel() == 0) return out;
  // In double: m * n * k of a large view can pass 2^63.
  const bool parallel = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) <= kSingleThreadedGemm;

  const bool invariant = batch_invariant();
  dispatch(a.dtype, [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
      if (matvec_product<T>(a, b, out_l, out->as<T>(), invariant)) return;
      if (invariant) {  // b's columns are not dense along k: copied so first
        Layout dense;
        const StoragePtr held = dense_columns(*this, b, &dense);
        matvec_product<T>(a, View{*held, dense, b.dtype}, out_l, out->as<T>(), true);
        return;
      }
    }
    if constexpr (std::is_floating_point_v<T>) {
      // An operand BLAS cannot read in place (a stride-2 slice, a broadcast row) is copied first.
      StoragePtr held[2];
      Layout lay[2] = {a.layout, b.layout};
      const View* v[2] = {&a, &b};
      std::optional<BlasMatrix> bm[2];
      for (int i = 0; i < 2; ++i) {
        const Layout& l = lay[i];
        bm[i] = blas_matrix(l.dim(r - 2), l.dim(r - 1), l.stride(r - 2), l.stride(r - 1));
        if (!bm[i]) {
          held[i] = alloc(a.dtype, l.numel());
          lay[i] = Layout(l.shape());
          copy_strided(*v[i], MutView{*held[i], lay[i], a.dtype});
          bm[i] = blas_matrix(l.dim(r - 2), l.dim(r - 1), lay[i].stride(r - 2), lay[i].stride(r - 1));
        }
      }
      const T* pa = static_cast<const T*>((held[0] ? *held[0] : a.storage).data());
      const T* pb = static_cast<const T*>((held[1] ? *held[1] : b.storage).data());
      T* po = out->as<T>();
      for_each_matrix(out_l, lay[0], lay[1], parallel, [&](int64_t oo, int64_t oa, int64_t ob) {
        gemm(m, n, k, pa + oa, *bm[0], pb + ob, *bm[1], po + oo, n);
      });
    } else if constexpr (kernels::is_float_v<T>) {
      const T* pa = static_cast<const T*>(a.storage.data());
      const T* pb = static_cast<const T*>(b.storage.data());
      T* po = out->as<T>();
      const int64_t ars = a.layout.stride(r - 2), acs = a.layout.stride(r - 1);
      const int64_t brs = b.layout.stride(r - 2), bcs = b.layout.stride(r - 1);
      // b is widened in the order it is stored: by columns where those are dense (a weight W
      // as b = W^T), by rows otherwise.
      const bool b_by_columns = brs == 1 && bcs != 1;
      const BlasMatrix dense_a{false, std::max<int64_t>(k, 1)};
      const BlasMatrix dense_b = b_by_columns ? BlasMatrix{true, std::max<int64_t>(k, 1)} : BlasMatrix{false, std::max<int64_t>(n, 1)};
      for_each_matrix(out_l, a.layout, b.layout, parallel, [&](int64_t oo, int64_t oa, int64_t ob) {
        Scratch<float> fa(m * k), fb(k * n), fc(m * n);
        widen_matrix(pa + oa, m, k, ars, acs, fa.data());
        if (b_by_columns)
          widen_matrix(pb + ob, n, k, bcs, brs, fb.data());
        else
          widen_matrix(pb + ob, k, n, brs, bcs, fb.data());
        gemm(m, n, k, fa.data(), dense_a, fb.data(), dense_b, fc.data(), n);
        rows::narrow(fc.data(), m * n, po + oo);
      });
    } else {
      throw_not_supported(*this, OpCode::Matmul, a.dtype);
    }
  });
  return out;
}

}  // namespace wick::cpu
