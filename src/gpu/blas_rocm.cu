// rocBLAS behind gpu/blas.h: one handle per device, on the device's stream, with its workspace
// from the device's memory pool and atomics off, so that a product gives the same bits on every
// run. Before it makes a device's handle, wick checks that rocBLAS ships GEMM kernels for the
// device's architecture: a rocBLAS without them fails deep inside, so matmul fails early instead.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <rocblas/rocblas.h>
#include <string_view>
#include <system_error>
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

// ---- the architecture check --------------------------------------------------------------------

namespace fs = std::filesystem;

// The folders rocBLAS reads its Tensile (GEMM) kernels from: ROCBLAS_TENSILE_LIBPATH when set,
// else rocblas/library (AMD's packages) or rocblas/<version>/library (Debian's) beside the
// librocblas.so this process loaded.
std::vector<fs::path> tensile_folders() {
  if (const char* env = std::getenv("ROCBLAS_TENSILE_LIBPATH"); env && *env) return {fs::path(env)};
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&rocblas_create_handle), &info) || !info.dli_fname) return {};
  const fs::path root = fs::path(info.dli_fname).parent_path() / "rocblas";
  std::vector<fs::path> out;
  std::error_code ec;
  if (fs::is_directory(root / "library", ec)) out.push_back(root / "library");
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    if (fs::is_directory(it->path() / "library", ec)) out.push_back(it->path() / "library");
  }
  return out;
}

bool is_name_char(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z'); }

// Whether a file name holds `arch` as a whole word: "TensileLibrary_lazy_gfx942.dat",
// "Kernels.so-000-gfx90a-xnack-.hsaco", but not "gfx90a" in "..._gfx90a0.co".
bool names_arch(std::string_view file, std::string_view arch) {
  for (size_t at = file.find(arch); at != std::string_view::npos; at = file.find(arch, at + 1)) {
    const size_t end = at + arch.size();
    if ((at == 0 || !is_name_char(file[at - 1])) && (end == file.size() || !is_name_char(file[end]))) return true;
  }
  return false;
}

// Empty when rocBLAS has kernels for the device's architecture, or when its kernel folder cannot
// be found (an unknown layout: rocBLAS decides then); else the reason matmul cannot run there.
std::string missing_arch(const GpuBackend& b) {
  const std::string& full = b.props().arch;  // "gfx942:sramecc+:xnack-"
  const std::string arch = full.substr(0, full.find(':'));
  if (arch.rfind("gfx", 0) != 0) return {};
  const char* env = std::getenv("ROCBLAS_TENSILE_LIBPATH");
  const bool from_env = env && *env;
  const std::vector<fs::path> folders = tensile_folders();
  if (folders.empty()) return {};
  std::string searched;
  for (const fs::path& folder : folders) {
    std::error_code ec;
    for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
      if (names_arch(it->path().filename().string(), arch)) return {};
    }
    searched += (searched.empty() ? "" : ", ") + folder.string();
  }
  return detail::str_cat("matmul: rocBLAS has no GEMM kernels for ", arch, " (", b.device(), ", ", b.props().name,
                         "): no file in ", searched, from_env ? " (ROCBLAS_TENSILE_LIBPATH)" : "", " is built for ",
                         arch, "; install a rocBLAS that includes ", arch,
                         " (AMD's ROCm packages, see docs/rocm.md) or set ROCBLAS_TENSILE_LIBPATH to the "
                         "rocblas/library folder of one");
}

// ---- handles ------------------------------------------------------------------------------------

struct Handle {
  rocblas_handle handle = nullptr;
  StoragePtr workspace;
  std::string missing;  // not empty: rocBLAS cannot serve this device, and why
};

// The handle of a device, made on first use and kept for the process.
Handle& handle_for(GpuBackend& b) {
  static std::mutex mutex;
  static std::vector<Handle*> handles;
  std::lock_guard<std::mutex> lock(mutex);
  const size_t i = static_cast<size_t>(b.device().index());
  if (handles.size() <= i) handles.resize(i + 1, nullptr);
  if (!handles[i]) {
    auto h = std::make_unique<Handle>();
    h->missing = missing_arch(b);
    if (h->missing.empty()) {
      WICK_ROCBLAS(rocblas_create_handle(&h->handle));
      WICK_ROCBLAS(rocblas_set_stream(h->handle, b.stream()));
      h->workspace = b.alloc(kWorkspaceBytes);
      WICK_ROCBLAS(rocblas_set_workspace(h->handle, h->workspace->data(), kWorkspaceBytes));
      // rocBLAS marks the setter deprecated only to announce that this will become its default.
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"
      WICK_ROCBLAS(rocblas_set_atomics_mode(h->handle, rocblas_atomics_not_allowed));
#pragma clang diagnostic pop
    }
    handles[i] = h.release();
  }
  if (!handles[i]->missing.empty()) throw NotSupportedError(handles[i]->missing);
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

void prepare_blas(GpuBackend& b) { (void)handle_for(b); }

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
