// Batched matmul through the vendor BLAS (gpu/blas.h): operands used in place when they are
// row-major or transposed views, other strides copied first; batch dims collapsed, so broadcast
// batches (stride 0) and contiguous ones are a single strided-batched call. f8e4m3 goes through
// f32.
#include <limits>

#include "backend/blas_layout.h"
#include "gpu/blas.h"
#include "gpu/elementwise.cuh"
#include "gpu/gpu_backend.h"

namespace wick::gpu {

namespace {

Layout batch_layout(const Layout& l) {
  Shape s;
  Strides st;
  for (int d = 0; d + 2 < l.rank(); ++d) {
    s.push_back(l.dim(d));
    st.push_back(l.stride(d));
  }
  return Layout(s, st, l.offset());
}

}  // namespace

std::string describe(const Gemm& g) {
  return detail::str_cat(g.dtype, ", ", g.batch, " x [", g.m, ", ", g.k, "] . [", g.k, ", ", g.n, "]",
                         g.trans_a ? ", a transposed" : "", g.trans_b ? ", b transposed" : "");
}

StoragePtr GpuBackend::matmul(const View& a, const View& b) {
  activate();
  const int r = a.layout.rank();
  const int64_t m = a.layout.dim(r - 2), k = a.layout.dim(r - 1), n = b.layout.dim(r - 1);
  Shape out_shape = a.layout.shape();
  out_shape[r - 1] = n;
  const Layout out_l(out_shape);
  if (a.dtype == DType::F8E4M3) {  // no fp8 GEMM with wick's semantics: compute in f32
    StoragePtr af = cast(a, DType::F32), bf = cast(b, DType::F32);
    const Layout al(a.layout.shape()), bl(b.layout.shape());
    StoragePtr of = matmul(View{*af, al, DType::F32}, View{*bf, bl, DType::F32});
    return cast(View{*of, out_l, DType::F32}, a.dtype);
  }
  StoragePtr out = alloc(a.dtype, out_shape.numel());
  if (out_shape.numel() == 0) return out;
  const size_t size = static_cast<size_t>(dtype_size(a.dtype));
  if (k == 0) {
    WICK_GPU_CHECK(memset_async(out->data(), 0, static_cast<size_t>(out_shape.numel()) * size, stream_));
    return out;
  }
  constexpr int64_t kInt = std::numeric_limits<int>::max();
  WICK_CHECK(m <= kInt && n <= kInt && k <= kInt, NotSupportedError, "matmul", "dims m=", m, " n=", n, " k=", k,
             " exceed the 32-bit BLAS interface (", a.dtype, " on ", name(), ")");

  // Operands BLAS cannot read in place are copied to contiguous storage first.
  StoragePtr held[2];
  Layout lay[2] = {a.layout, b.layout};
  const View* v[2] = {&a, &b};
  BlasMatrix bm[2];
  for (int i = 0; i < 2; ++i) {
    const Layout& l = lay[i];
    auto fit = blas_matrix(l.dim(r - 2), l.dim(r - 1), l.stride(r - 2), l.stride(r - 1));
    if (!fit) {
      held[i] = alloc(a.dtype, l.numel());
      lay[i] = Layout(l.shape());
      copy_strided(*v[i], MutView{*held[i], lay[i], a.dtype});
      fit = blas_matrix(l.dim(r - 2), l.dim(r - 1), lay[i].stride(r - 2), lay[i].stride(r - 1));
    }
    bm[i] = *fit;
  }
  const char* pa = static_cast<const char*>((held[0] ? *held[0] : a.storage).data());
  const char* pb = static_cast<const char*>((held[1] ? *held[1] : b.storage).data());
  char* po = static_cast<char*>(out->data());

  // The batch: collapsed dims; the last is one strided-batched call, the others a host loop.
  const Layout bo = batch_layout(out_l), ba = batch_layout(lay[0]), bb = batch_layout(lay[1]);
  const StridedSpace<3> s = collapse<3>({&bo, &ba, &bb});
  const int last = s.rank - 1;
  const int64_t inner = s.shape[last], outer = s.numel() / inner;
  WICK_CHECK(inner <= kInt, NotSupportedError, "matmul", "a batch of ", inner, " exceeds the 32-bit BLAS interface (",
             a.layout.shape(), " x ", b.layout.shape(), " ", a.dtype, " on ", name(), ")");
  Gemm g{a.dtype,
         m,
         n,
         k,
         inner,
         nullptr,
         bm[0].trans,
         bm[0].ld,
         s.strides[1][last],
         nullptr,
         bm[1].trans,
         bm[1].ld,
         s.strides[2][last],
         nullptr,
         n,
         s.strides[0][last]};
  for (int64_t o = 0; o < outer; ++o) {
    int64_t off[3] = {s.offsets[0], s.offsets[1], s.offsets[2]};
    for (int64_t d = last - 1, rem = o; d >= 0; --d) {
      const int64_t idx = rem % s.shape[d];
      rem /= s.shape[d];
      for (int q = 0; q < 3; ++q) off[q] += idx * s.strides[q][d];
    }
    g.a = pa + off[1] * size;
    g.b = pb + off[2] * size;
    g.c = po + off[0] * size;
    gemm(*this, g);
  }
  return out;
}

}  // namespace wick::gpu
