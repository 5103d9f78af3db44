// Batched matmul: f32 and f64 through OpenBLAS with operands in place (row-major or transposed
// views), f16/bf16/f8e4m3 through f32 buffers (accumulating in f32). Small products of a large
// batch run in parallel, one per thread; large ones run one after another on OpenBLAS's threads.

#include "core/dispatch.h"
#include "cpu/cpu_backend.h"
#include "cpu/gemm.h"
#include "cpu/loops.h"
#include "cpu/scratch.h"
#include "kernels/numeric.h"

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

  dispatch(a.dtype, [&]<typename T>() {
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
      const BlasMatrix dense_a{false, std::max<int64_t>(k, 1)}, dense_b{false, std::max<int64_t>(n, 1)};
      for_each_matrix(out_l, a.layout, b.layout, parallel, [&](int64_t oo, int64_t oa, int64_t ob) {
        Scratch<float> fa(m * k), fb(k * n), fc(m * n);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < k; ++j)
            fa[i * k + j] = static_cast<float>(pa[oa + i * ars + j * acs]);
        for (int64_t i = 0; i < k; ++i)
          for (int64_t j = 0; j < n; ++j)
            fb[i * n + j] = static_cast<float>(pb[ob + i * brs + j * bcs]);
        gemm(m, n, k, fa.data(), dense_a, fb.data(), dense_b, fc.data(), n);
        for (int64_t i = 0; i < m * n; ++i) po[oo + i] = T(fc[i]);
      });
    } else {
      throw_not_supported(*this, OpCode::Matmul, a.dtype);
    }
  });
  return out;
}

}  // namespace wick::cpu
