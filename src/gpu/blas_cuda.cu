// cuBLAS behind gpu/blas.h: one handle per device, on the device's stream, with its workspace
// from the device's memory pool. libcublas is opened with dlopen when the first handle is made, as
// the collectives open NCCL: loading it and libcublasLt costs a process about 0.4 s and 200 MB,
// which a process that never multiplies on a GPU (a test, a CPU-only run) does not need to pay.
// The header gives the types; a machine without the library fails at its first GPU product with
// one clear line.
#include <dlfcn.h>

#include <cstring>
#include <cublas_v2.h>
#include <mutex>
#include <nvtx3/nvToolsExtMemCudaRt.h>
#include <string>
#include <vector>

#include "gpu/blas.h"
#include "gpu/gpu_backend.h"

namespace wick::gpu {

namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;

// The cuBLAS functions wick calls, found with dlsym.
struct Api {
  decltype(&::cublasCreate_v2) cublasCreate_v2 = nullptr;
  decltype(&::cublasSetStream_v2) cublasSetStream_v2 = nullptr;
  decltype(&::cublasSetWorkspace_v2) cublasSetWorkspace_v2 = nullptr;
  decltype(&::cublasGetStatusString) cublasGetStatusString = nullptr;
  // Spelled out: in C++ the header overloads this name with an inline wrapper that takes the
  // compute type as a cudaDataType. This is the library's own function.
  cublasStatus_t (*cublasGemmStridedBatchedEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                               const void*, const void*, cudaDataType, int, long long, const void*,
                                               cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                                               long long, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
};

// The files to try, in order: the major version of the header wick was compiled against (whose
// functions take the arguments declared here), then the unversioned name (a toolkit's development
// link).
std::vector<std::string> library_files() {
  return {"libcublas.so." + std::to_string(CUBLAS_VER_MAJOR), "libcublas.so"};
}

// Opens the library once per process; the static's initialisation is thread-safe, and one that
// throws is tried again by the next call.
const Api& api() {
  static const Api a = [] {
    void* lib = nullptr;
    std::string file, errors;
    for (const std::string& f : library_files()) {
      lib = dlopen(f.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib != nullptr) {
        file = f;
        break;
      }
      errors += detail::str_cat(errors.empty() ? "" : "; ", dlerror());
    }
    if (lib == nullptr) throw NotSupportedError(detail::str_cat("matmul: cuBLAS is not installed: ", errors));
    auto find = [&](const char* fn) {
      void* f = dlsym(lib, fn);
      if (f == nullptr) throw NotSupportedError(detail::str_cat("matmul: ", file, " has no ", fn));
      return f;
    };
    Api a;
#define WICK_X(f) a.f = reinterpret_cast<decltype(a.f)>(find(#f));
    WICK_X(cublasCreate_v2)
    WICK_X(cublasSetStream_v2)
    WICK_X(cublasSetWorkspace_v2)
    WICK_X(cublasGetStatusString)
    WICK_X(cublasGemmStridedBatchedEx)
#undef WICK_X
    return a;
  }();
  return a;
}

// Raises a failed call as wick::Error naming the product (when known) and cuBLAS's status.
void check(cublasStatus_t s, const char* call, const char* file, int line, const Gemm* g = nullptr) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  const char* base = std::strrchr(file, '/');
  std::string msg =
      detail::str_cat("matmul: cuBLAS call ", call, g ? " for " + describe(*g) : std::string(), " failed at ",
                      base ? base + 1 : file, ":", line, ": ", api().cublasGetStatusString(s));
  if (s == CUBLAS_STATUS_ALLOC_FAILED) throw OutOfMemoryError(msg);
  throw ::wick::Error(msg);
}
#define WICK_CUBLAS(call) check((call), #call, __FILE__, __LINE__)
#define WICK_CUBLAS_FOR(g, call) check((call), #call, __FILE__, __LINE__, &(g))

struct Handle {
  cublasHandle_t handle = nullptr;
  StoragePtr workspace;
};

// The handle of a device, made on first use and kept for the process (never destroyed: the
// driver may be gone at exit).
Handle& handle_for(GpuBackend& b) {
  static std::mutex mutex;
  static std::vector<Handle*> handles;
  std::lock_guard<std::mutex> lock(mutex);
  const size_t i = static_cast<size_t>(b.device().index());
  if (handles.size() <= i) handles.resize(i + 1, nullptr);
  if (!handles[i]) {
    auto* h = new Handle;
    WICK_CUBLAS(api().cublasCreate_v2(&h->handle));
    WICK_CUBLAS(api().cublasSetStream_v2(h->handle, b.stream()));
    h->workspace = b.alloc(kWorkspaceBytes);
    WICK_CUBLAS(api().cublasSetWorkspace_v2(h->handle, h->workspace->data(), kWorkspaceBytes));
    handles[i] = h;
  }
  return *handles[i];
}

cudaDataType_t data_type(DType dt) {
  switch (dt) {
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F32: return CUDA_R_32F;
    default: return CUDA_R_64F;
  }
}

// Tells compute-sanitizer's initcheck that the product wrote C. On an H100, initcheck does not see
// the stores of cuBLAS's f16 and bf16 products (f32 ones it sees; the Hopper kernels' stores
// through the tensor memory accelerator are the likely reason): without this, every later read of
// C is reported as a read of uninitialized memory, though the values are the product. The call is
// NVTX's, a no-op unless a tool is attached; C is whole rows of one block (wick's products write
// fresh, contiguous outputs), so the range is exactly what cuBLAS wrote.
void mark_written(const GpuBackend& b, const Gemm& g) {
  static const nvtxDomainHandle_t domain = nvtxDomainCreateA("wick");
  nvtxMemVirtualRangeDesc_t range{};
  range.ptr = g.c;
  range.size = static_cast<size_t>((g.batch - 1) * g.stride_c + (g.m - 1) * g.ldc + g.n) * dtype_size(g.dtype);
  nvtxMemMarkInitializedBatch_t batch{};
  batch.extCompatID = NVTX_EXT_COMPATID_MEM;
  batch.structSize = sizeof(batch);
  batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  batch.regionDescCount = 1;
  batch.regionDescElementSize = sizeof(range);
  batch.regionDescElements = &range;
  nvtxMemCudaMarkInitialized(domain, b.stream(), 0, &batch);
}

}  // namespace

void prepare_blas(GpuBackend& b) { (void)handle_for(b); }

void gemm(GpuBackend& b, const Gemm& g) {
  Handle& h = handle_for(b);
  const bool wide = g.dtype == DType::F64;
  const double alpha_d = 1.0, beta_d = 0.0;
  const float alpha_f = 1.0f, beta_f = 0.0f;
  const void* alpha = wide ? static_cast<const void*>(&alpha_d) : &alpha_f;
  const void* beta = wide ? static_cast<const void*>(&beta_d) : &beta_f;
  const cublasComputeType_t compute =
      wide ? CUBLAS_COMPUTE_64F
           : (g.dtype == DType::F32 && allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
  const cudaDataType_t type = data_type(g.dtype);
  // Row-major C = A B is column-major C^T = B^T A^T: swap the operands and m with n.
  WICK_CUBLAS_FOR(
      g, api().cublasGemmStridedBatchedEx(
             h.handle, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
             static_cast<int>(g.n), static_cast<int>(g.m), static_cast<int>(g.k), alpha, g.b, type,
             static_cast<int>(g.ldb), g.stride_b, g.a, type, static_cast<int>(g.lda), g.stride_a, beta, g.c, type,
             static_cast<int>(g.ldc), g.stride_c, static_cast<int>(g.batch), compute, CUBLAS_GEMM_DEFAULT));
  b.library_queued();
  mark_written(b, g);
}

}  // namespace wick::gpu
