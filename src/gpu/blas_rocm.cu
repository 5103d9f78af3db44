// rocBLAS behind gpu/blas.h: one handle per device, on the device's stream, with its workspace
// from the device's memory pool.
#include <cstring>
#include <mutex>
#include <rocblas/rocblas.h>
#include <vector>

#include "gpu/blas.h"
#include "gpu/gpu_backend.h"

namespace wick::gpu {

namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;

// Raises a failed call as wick::Error naming the product (when known) and rocBLAS's status.
void check(rocblas_status s, const char* call, const char* file, int line, const Gemm* g = nullptr) {
  if (s == rocblas_status_success) return;
  const char* base = std::strrchr(file, '/');
  std::string msg =
      detail::str_cat("matmul: rocBLAS call ", call, g ? " for " + describe(*g) : std::string(), " failed at ",
                      base ? base + 1 : file, ":", line, ": ", rocblas_status_to_string(s));
  if (s == rocblas_status_memory_error) throw OutOfMemoryError(msg);
  throw ::wick::Error(msg);
}
#define WICK_ROCBLAS(call) check((call), #call, __FILE__, __LINE__)
#define WICK_ROCBLAS_FOR(g, call) check((call), #call, __FILE__, __LINE__, &(g))

struct Handle {
  rocblas_handle handle = nullptr;
  StoragePtr workspace;
};

// The handle of a device, made on first use and kept for the process.
Handle& handle_for(GpuBackend& b) {
  static std::mutex mutex;
  static std::vector<Handle*> handles;
  std::lock_guard<std::mutex> lock(mutex);
  const size_t i = static_cast<size_t>(b.device().index());
  if (handles.size() <= i) handles.resize(i + 1, nullptr);
  if (!handles[i]) {
    auto* h = new Handle;
    WICK_ROCBLAS(rocblas_create_handle(&h->handle));
    WICK_ROCBLAS(rocblas_set_stream(h->handle, b.stream()));
    h->workspace = b.alloc(kWorkspaceBytes);
    WICK_ROCBLAS(rocblas_set_workspace(h->handle, h->workspace->data(), kWorkspaceBytes));
    handles[i] = h;
  }
  return *handles[i];
}

rocblas_datatype data_type(DType dt) {
  switch (dt) {
    case DType::F16: return rocblas_datatype_f16_r;
    case DType::BF16: return rocblas_datatype_bf16_r;
    case DType::F32: return rocblas_datatype_f32_r;
    default: return rocblas_datatype_f64_r;
  }
}

}  // namespace

void gemm(GpuBackend& b, const Gemm& g) {
  Handle& h = handle_for(b);
  const bool wide = g.dtype == DType::F64;
  const double alpha_d = 1.0, beta_d = 0.0;
  const float alpha_f = 1.0f, beta_f = 0.0f;
  const void* alpha = wide ? static_cast<const void*>(&alpha_d) : &alpha_f;
  const void* beta = wide ? static_cast<const void*>(&beta_d) : &beta_f;
  const rocblas_datatype type = data_type(g.dtype);
  const rocblas_datatype compute = wide ? rocblas_datatype_f64_r : rocblas_datatype_f32_r;
  // Row-major C = A B is column-major C^T = B^T A^T: swap the operands and m with n. rocBLAS
  // writes D (here C itself).
  WICK_ROCBLAS_FOR(
      g, rocblas_gemm_strided_batched_ex(
             h.handle, g.trans_b ? rocblas_operation_transpose : rocblas_operation_none,
             g.trans_a ? rocblas_operation_transpose : rocblas_operation_none, static_cast<rocblas_int>(g.n),
             static_cast<rocblas_int>(g.m), static_cast<rocblas_int>(g.k), alpha, g.b, type,
             static_cast<rocblas_int>(g.ldb), g.stride_b, g.a, type, static_cast<rocblas_int>(g.lda), g.stride_a, beta,
             g.c, type, static_cast<rocblas_int>(g.ldc), g.stride_c, g.c, type, static_cast<rocblas_int>(g.ldc),
             g.stride_c, static_cast<rocblas_int>(g.batch), compute, rocblas_gemm_algo_standard, 0, 0));
}

}  // namespace wick::gpu
