// Batched matmul through the vendor BLAS (gpu/blas.h): operands used in place when they are
// row-major or transposed views, other strides copied first; batch dims collapsed, so broadcast
// batches (stride 0) and contiguous ones are a single strided-batched call. f8e4m3 goes through
// f32. A few rows times a weight's transpose (a model's linear layer while decoding) is the vendor
// BLAS's on CUDA and, on ROCm, wick's own kernels (gemv_rows below). In batch-invariant mode
// (wick::batch_invariant()) products by a matrix every row shares keep one sum order for any row
// count (invariant_rows below).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "backend/blas_layout.h"
#include "core/dispatch.h"
#include "gpu/blas.h"
#include "gpu/elementwise.cuh"
#include "gpu/gemm_rows.h"
#include "gpu/gemv.cuh"
#include "gpu/gpu_backend.h"
#include "kernels/numeric.h"
#include "wick/device.h"

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

// ---- a few rows times a weight's transpose (gpu/gemv.cuh) ----------------------------------------
template <typename T, int M>
__global__ __launch_bounds__(kBlock) void gemv_rows_kernel(const T* __restrict__ x, int64_t ldx, int rows,
                                                           const T* __restrict__ w, int64_t ldw, int64_t n, int64_t k,
                                                           int splits, T* __restrict__ out) {
  start_after_inputs();
  gemv::rows_times_weight<T, M>(x, ldx, rows, w, ldw, n, k, splits, out, blockIdx.x, gridDim.x);
}

// The rows of x as one (rows, k) matrix with row stride *ld, if its layout is one: the last dim
// contiguous, every other dim (size 1 aside) a whole number of rows apart.
bool as_rows(const Layout& l, int64_t* ld) {
  const int r = l.rank();
  if (l.dim(r - 1) > 1 && l.stride(r - 1) != 1) return false;
  int64_t row = -1, expect = -1;
  for (int d = r - 2; d >= 0; --d) {
    if (l.dim(d) == 1) continue;
    if (row < 0) {
      row = expect = l.stride(d);
    } else if (l.stride(d) != expect) {
      return false;
    }
    expect *= l.dim(d);
  }
  *ld = row < 0 ? l.dim(r - 1) : row;
  return true;
}

// Queues gemv_rows_kernel for `rows` rows of x (rows <= gemv::kMaxRows), instantiated for M rows
// where m_fixed is M, else for the fewest of 1, 2, 4 and 8 that hold them. Rows as
// gemv::rows_times_weight needs.
void queue_gemv_rows(GpuBackend& backend, DType dtype, const void* x, int64_t ldx, int64_t rows, int m_fixed,
                     const void* w, int64_t ldw, int64_t n, int64_t k, void* out) {
  const gemv::Plan plan = gemv::plan_for(backend, n);
  dispatch(dtype, [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, f16> || std::is_same_v<T, bf16>)
      gemv::by_rows(m_fixed > 0 ? m_fixed : static_cast<int>(rows), [&]<int M>() {
        backend.launch_early(gemv_rows_kernel<T, M>, plan.blocks, kBlock, 0, static_cast<const T*>(x), ldx,
                             static_cast<int>(rows), static_cast<const T*>(w), ldw, n, k, plan.splits,
                             static_cast<T*>(out));
      });
  });
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Which kernel takes a few f16 or bf16 rows times a weight, by vendor. Llama 3 8B's bf16 products
// (6144, 4096, 28672 and 4096 rows of weight) on an H200 read the weight at these fractions of copy
// bandwidth:
//
//   rows of x   gemv_rows_kernel   gemm_rows (matrix units)   cuBLAS (the gemm below)
//   1           0.63-0.90          0.59-0.80                  0.63-0.91
//   2           0.47-0.73          0.58-0.79                  0.65-1.00
//   4           0.39-0.57          0.56-0.77                  0.64-0.99
//   8           0.20-0.31          0.55-0.75                  0.65-0.99
//
// and batches of 1, 2 and 8 sequences decoded at 201, 348 and 623 tokens/s in the first, 209,
// 414 and 1588 through cuBLAS. So CUDA leaves them to cuBLAS, except one row times a weight of at
// most kOwnWeightBytes (a mixture's router): there a launch's latency, not the weight's bytes, sets
// the time, and wick's kernel starts early in a recorded step (GpuBackend::launch_early), where a
// cuBLAS call keeps every kernel after it in the recording from starting early. On ROCm, where no
// AMD GPU has been measured, one row goes to gemv_rows_kernel and from kTilesFromRows rows to the
// matrix units.
constexpr bool kVendorTakesFewHalfRows = kDeviceType == DeviceType::Cuda;
constexpr int64_t kOwnWeightBytes = int64_t{2} << 20;
constexpr int64_t kTilesFromRows = 2;

// out = a b where the product is a few rows times the transpose of a weight stored row by row (b a
// (k, n) view with unit stride along k, broadcast over a's batch), by wick's own kernels as above;
// false where they do not take it.
bool gemv_rows(GpuBackend& backend, const View& a, const View& b, Storage& out) {
  const int r = a.layout.rank();
  const int64_t k = a.layout.dim(r - 1), n = b.layout.dim(r - 1), rows = a.layout.numel() / std::max<int64_t>(k, 1);
  if (a.dtype != DType::F32 && a.dtype != DType::F16 && a.dtype != DType::BF16) return false;
  if (kVendorTakesFewHalfRows && a.dtype != DType::F32 &&
      !(rows == 1 && n * k * static_cast<int64_t>(dtype_size(a.dtype)) <= kOwnWeightBytes))
    return false;
  if (rows < 1 || rows > gemv::kMaxRows || k == 0 || n == 0) return false;
  for (int d = 0; d + 2 < r; ++d)
    if (b.layout.stride(d) != 0 && b.layout.dim(d) != 1) return false;  // one weight for every row
  if (b.layout.stride(r - 2) != 1 && k > 1) return false;               // w's rows contiguous
  int64_t ldx = 0;
  if (!as_rows(a.layout, &ldx)) return false;
  const int64_t ldw = b.layout.stride(r - 1);
  const auto size = static_cast<int64_t>(dtype_size(a.dtype));
  const int64_t v = 16 / size;
  const auto* x = static_cast<const char*>(a.storage.data()) + a.layout.offset() * size;
  const auto* w = static_cast<const char*>(b.storage.data()) + b.layout.offset() * size;
  if (k % v != 0 || ldx % v != 0 || (n > 1 && ldw % v != 0) || !aligned16(x) || !aligned16(w)) return false;
  if (rows >= kTilesFromRows &&
      gemm_rows_invariant(backend, a.dtype, x, ldx, rows, w, n > 1 ? ldw : k, n, k, out.data()))
    return true;
  queue_gemv_rows(backend, a.dtype, x, ldx, rows, 0, w, n > 1 ? ldw : k, n, k, out.data());
  return true;
}

// One thread per output, k in order: the batch-invariant product where no faster kernel takes the
// operands (rows of k not a whole number of 16-byte words).
template <typename T>
__global__ __launch_bounds__(kBlock) void rows_in_order_kernel(const T* x, int64_t ldx, int64_t m, const T* w,
                                                               int64_t ldw, int64_t n, int64_t k, T* out) {
  using M = kernels::opmath_t<T>;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < m * n; e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = e / n, j = e % n;
    M acc = 0;
    for (int64_t l = 0; l < k; ++l) acc += kernels::to_opmath(x[t * ldx + l]) * kernels::to_opmath(w[j * ldw + l]);
    out[e] = kernels::from_opmath<T>(acc);
  }
}

// The batch-invariant product (wick::batch_invariant()) of rows of a by a matrix b every row shares:
// each output the same sum in the same order whatever the rows. f16 and bf16 through
// gemm_rows_invariant (gemm_rows.h); f32, and halves without matrix units, through gemv_rows_kernel
// instantiated for gemv::kMaxRows rows, that many rows at a time; rows of k not a whole number of
// 16-byte words one output per thread. a's rows are copied to fresh storage unless dense and
// aligned, b's columns unless dense along k, so that the kernel chosen depends on the weight alone.
// False (nothing done) for other dtypes and for a b that is not shared by every row.
bool invariant_rows(GpuBackend& backend, const View& a, const View& b, Storage& out) {
  const int r = a.layout.rank();
  if (a.dtype != DType::F32 && a.dtype != DType::F16 && a.dtype != DType::BF16) return false;
  for (int d = 0; d + 2 < r; ++d)
    if (b.layout.stride(d) != 0 && b.layout.dim(d) != 1) return false;
  const int64_t k = a.layout.dim(r - 1), n = b.layout.dim(r - 1), m = a.layout.numel() / k;
  const auto size = static_cast<int64_t>(dtype_size(a.dtype));
  const int64_t v = 16 / size;
  // The weight as rows (n, k).
  StoragePtr held_w;
  const char* w = static_cast<const char*>(b.storage.data()) + b.layout.offset() * size;
  int64_t ldw = n > 1 ? b.layout.stride(r - 1) : k;
  if (k > 1 && b.layout.stride(r - 2) != 1) {
    const Layout rows({n, k}, {b.layout.stride(r - 1), b.layout.stride(r - 2)}, b.layout.offset());
    held_w = backend.alloc(a.dtype, n * k);
    backend.copy_strided(View{b.storage, rows, b.dtype}, MutView{*held_w, Layout({n, k}), b.dtype});
    w = static_cast<const char*>(held_w->data());
    ldw = k;
  }
  // The rows of x, in place where dense and aligned.
  StoragePtr held_x;
  int64_t ldx = 0;
  const char* x = static_cast<const char*>(a.storage.data()) + a.layout.offset() * size;
  if (!as_rows(a.layout, &ldx) || (m > 1 && ldx % v != 0) || !aligned16(x)) {
    held_x = backend.alloc(a.dtype, m * k);
    backend.copy_strided(a, MutView{*held_x, Layout(a.layout.shape()), a.dtype});
    x = static_cast<const char*>(held_x->data());
    ldx = k;
  }
  if (m == 1) ldx = k;
  if (gemm_rows_invariant(backend, a.dtype, x, ldx, m, w, ldw, n, k, out.data())) return true;
  char* o = static_cast<char*>(out.data());
  if (k % v == 0 && ldw % v == 0 && aligned16(w)) {
    for (int64_t t0 = 0; t0 < m; t0 += gemv::kMaxRows)
      queue_gemv_rows(backend, a.dtype, x + t0 * ldx * size, ldx, std::min<int64_t>(gemv::kMaxRows, m - t0),
                      gemv::kMaxRows, w, ldw, n, k, o + t0 * n * size);
    return true;
  }
  dispatch(a.dtype, [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
      rows_in_order_kernel<T><<<grid_for(m * n), kBlock, 0, backend.stream()>>>(
          reinterpret_cast<const T*>(x), ldx, m, reinterpret_cast<const T*>(w), ldw, n, k, reinterpret_cast<T*>(o));
    }
  });
  WICK_GPU_CHECK_LAUNCH();
  return true;
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
  if (batch_invariant() && invariant_rows(*this, a, b, *out)) return out;
  if (gemv_rows(*this, a, b, *out)) return out;
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
