// MIOpen convolutions behind gpu/conv.h, through the immediate-mode solution API. The first call
// of a (shape, dtype, parameters) key asks MIOpen for its best solutions, compiles each and times
// it on the call's own buffers, and keeps the fastest for the process, as dnn_cuda.cu does with
// cuDNN's engines. The convolution descriptor asks for deterministic kernels only and turns off the
// fp16 path that computes through bf16 (gfx90a); MIOpen says nothing else about a solution's
// precision that could filter more. Any MIOpen failure in that search, or a later run that fails,
// declines the key: wick's own path serves it.
// Input and kernel are packed first when they are not contiguous; the transposed forms are
// MIOpen's backward-data pass. MIOpen has no f64 convolution: f64 takes wick's own path.
// WICK_CONV_LOG=1 prints each key's candidates and timings to stderr.
#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <miopen/miopen.h>
#include <mutex>
#include <tuple>
#include <vector>

#include "gpu/conv.h"
#include "gpu/gpu_backend.h"

namespace wick::gpu {

namespace {

// Raises a failed call as wick::Error naming the convolution (when known) and MIOpen's status.
[[noreturn]] void fail(miopenStatus_t s, const char* call, const char* file, int line, const ConvCall* c = nullptr) {
  const char* base = std::strrchr(file, '/');
  std::string msg = detail::str_cat(c ? describe(*c) : std::string("conv"), ": MIOpen call ", call, " failed at ",
                                    base ? base + 1 : file, ":", line, ": ", miopenGetErrorString(s));
  if (s == miopenStatusAllocFailed) throw OutOfMemoryError(msg);
  throw ::wick::Error(msg);
}
#define WICK_MIOPEN(call)                                                                  \
  do {                                                                                     \
    miopenStatus_t wick_s_ = (call);                                                       \
    if (wick_s_ != miopenStatusSuccess) fail(wick_s_, #call, __FILE__, __LINE__, nullptr); \
  } while (0)

constexpr miopenStatus_t kOk = miopenStatusSuccess;

// Logs a failed call and clears the runtime's last error, which a failed MIOpen launch may leave
// behind for wick's next launch check to find.
void log_status(const char* what, miopenStatus_t s) {
  (void)last_error();
  conv_log("%s: %s", what, miopenGetErrorString(s));
}

miopenHandle_t handle_for(GpuBackend& b) {
  static std::mutex mutex;
  static std::vector<miopenHandle_t> handles;  // kept for the process
  std::lock_guard<std::mutex> lock(mutex);
  const size_t i = static_cast<size_t>(b.device().index());
  if (handles.size() <= i) handles.resize(i + 1, nullptr);
  if (!handles[i]) WICK_MIOPEN(miopenCreateWithStream(&handles[i], b.stream()));
  return handles[i];
}

miopenDataType_t data_type(DType dt) {
  switch (dt) {
    case DType::F16: return miopenHalf;
    case DType::BF16: return miopenBFloat16;
    default: return miopenFloat;
  }
}

const char* algorithm_name(miopenConvAlgorithm_t a) {
  switch (a) {
    case miopenConvolutionAlgoGEMM: return "GEMM";
    case miopenConvolutionAlgoDirect: return "direct";
    case miopenConvolutionAlgoFFT: return "FFT";
    case miopenConvolutionAlgoWinograd: return "Winograd";
    case miopenConvolutionAlgoImplicitGEMM: return "implicit GEMM";
  }
  return "other";
}

// The descriptors of one key and the solution chosen for it, kept for the process. x and y are
// the convolution's input and output: the transposed form runs it backward, from y to x.
struct Conv {
  miopenTensorDescriptor_t x = nullptr, y = nullptr, w = nullptr;
  miopenConvolutionDescriptor_t conv = nullptr;
  bool served = false;  // false: MIOpen declined the key
  uint64_t solution = 0;
  size_t workspace = 0;

  Conv() {
    WICK_MIOPEN(miopenCreateTensorDescriptor(&x));
    WICK_MIOPEN(miopenCreateTensorDescriptor(&y));
    WICK_MIOPEN(miopenCreateTensorDescriptor(&w));
    WICK_MIOPEN(miopenCreateConvolutionDescriptor(&conv));
  }
  ~Conv() {
    miopenDestroyTensorDescriptor(x);
    miopenDestroyTensorDescriptor(y);
    miopenDestroyTensorDescriptor(w);
    miopenDestroyConvolutionDescriptor(conv);
  }
  Conv(const Conv&) = delete;
  Conv& operator=(const Conv&) = delete;
};

miopenStatus_t set_tensor(miopenTensorDescriptor_t d, DType dt, const Shape& shape) {
  int dims[4], strides[4];
  int64_t acc = 1;
  for (int i = 3; i >= 0; --i) {
    dims[i] = static_cast<int>(shape[i]);
    strides[i] = static_cast<int>(acc);
    acc *= shape[i];
  }
  return miopenSetTensorDescriptor(d, data_type(dt), 4, dims, strides);
}

// Fills the descriptors of a key; false (and a log line) when MIOpen refuses one.
bool describe_problem(Conv& c, DType dt, const Shape& x, const Shape& w, const Shape& y, const ConvParams& p) {
  const int pads[2] = {static_cast<int>(p.padding[0]), static_cast<int>(p.padding[1])};
  const int strides[2] = {static_cast<int>(p.stride[0]), static_cast<int>(p.stride[1])};
  const int dilations[2] = {static_cast<int>(p.dilation[0]), static_cast<int>(p.dilation[1])};
  miopenStatus_t s = kOk;
  const char* what = nullptr;
  // Runs a step when every step before it succeeded.
  auto step = [&](const char* name, auto&& call) {
    if (s != kOk) return;
    what = name;
    s = call();
  };
  step("the x descriptor", [&] { return set_tensor(c.x, dt, x); });
  step("the w descriptor", [&] { return set_tensor(c.w, dt, w); });
  step("the y descriptor", [&] { return set_tensor(c.y, dt, y); });
  step("the convolution descriptor",
       [&] { return miopenInitConvolutionNdDescriptor(c.conv, 2, pads, strides, dilations, miopenConvolution); });
  step("the group count", [&] { return miopenSetConvolutionGroupCount(c.conv, static_cast<int>(p.groups)); });
  // Same bits on every run, and no fp16 kernel that computes through bf16 (MIOpen's default for
  // the backward passes on gfx90a, which transposed convolutions use).
  step("the deterministic attribute",
       [&] { return miopenSetConvolutionAttribute(c.conv, MIOPEN_CONVOLUTION_ATTRIB_DETERMINISTIC, 1); });
  step("the fp16 alternative attribute",
       [&] { return miopenSetConvolutionAttribute(c.conv, MIOPEN_CONVOLUTION_ATTRIB_FP16_ALT_IMPL, 0); });
  if (s != kOk) log_status(detail::str_cat(what, " was refused").c_str(), s);
  return s == kOk;
}

// The solutions MIOpen proposes for a key, best first by its own estimate.
std::vector<miopenConvSolution_t> solutions(miopenHandle_t h, const Conv& c, bool transposed, size_t most) {
  size_t count = 0;
  miopenStatus_t s = transposed ? miopenConvolutionBackwardDataGetSolutionCount(h, c.y, c.w, c.conv, c.x, &count)
                                : miopenConvolutionForwardGetSolutionCount(h, c.w, c.x, c.conv, c.y, &count);
  if (s != kOk) {
    log_status("counting the solutions failed", s);
    return {};
  }
  std::vector<miopenConvSolution_t> list(std::min(count, most));
  if (list.empty()) return list;
  s = transposed ? miopenConvolutionBackwardDataGetSolution(h, c.y, c.w, c.conv, c.x, list.size(), &count, list.data())
                 : miopenConvolutionForwardGetSolution(h, c.w, c.x, c.conv, c.y, list.size(), &count, list.data());
  if (s != kOk) {
    log_status("listing the solutions failed", s);
    return {};
  }
  list.resize(std::min(count, list.size()));
  return list;
}

miopenStatus_t compile(miopenHandle_t h, const Conv& c, bool transposed, uint64_t solution) {
  return transposed ? miopenConvolutionBackwardDataCompileSolution(h, c.y, c.w, c.conv, c.x, solution)
                    : miopenConvolutionForwardCompileSolution(h, c.w, c.x, c.conv, c.y, solution);
}

// Forward: y = conv(x, w). Transposed: x = conv^T(y, w), so `in` is y there and `out` is x.
miopenStatus_t run(miopenHandle_t h, const Conv& c, bool transposed, uint64_t solution, const void* in, const void* w,
                   void* out, void* workspace, size_t workspace_bytes) {
  return transposed ? miopenConvolutionBackwardDataImmediate(h, c.y, in, c.w, w, c.conv, c.x, out, workspace,
                                                             workspace_bytes, solution)
                    : miopenConvolutionForwardImmediate(h, c.w, w, c.x, in, c.conv, c.y, out, workspace,
                                                        workspace_bytes, solution);
}

// Compiles and times MIOpen's best solutions on the call's buffers and keeps the fastest in c.
// The candidates write the output, which the caller writes again.
void choose_solution(Conv& c, GpuBackend& b, miopenHandle_t h, bool transposed, const void* in, const void* w,
                     void* out) {
  constexpr size_t kMaxCandidates = 8;  // each new solution may cost a kernel compilation
  constexpr int kRuns = 3;
  const std::vector<miopenConvSolution_t> list = solutions(h, c, transposed, kMaxCandidates);
  conv_log("%zu solutions proposed", list.size());

  const std::unique_ptr<Timer> timer = b.make_timer();
  double best_ms = 0;
  for (const miopenConvSolution_t& sol : list) {
    const unsigned long long id = sol.solution_id;
    const char* algo = algorithm_name(sol.algorithm);
    if (const miopenStatus_t s = compile(h, c, transposed, sol.solution_id); s != kOk) {
      log_status(detail::str_cat("solution ", id, " (", algo, "): compilation failed").c_str(), s);
      continue;
    }
    StoragePtr ws;
    try {
      if (sol.workspace_size > 0) ws = b.alloc(sol.workspace_size);
    } catch (const OutOfMemoryError&) {
      conv_log("solution %llu (%s): its workspace of %zu B does not fit", id, algo, sol.workspace_size);
      continue;
    }
    void* wsp = ws ? ws->data() : nullptr;
    auto timed_run = [&](double* ms) {
      timer->start();
      const miopenStatus_t s = run(h, c, transposed, sol.solution_id, in, w, out, wsp, sol.workspace_size);
      timer->stop();
      *ms = s == kOk ? timer->elapsed_ms() : 0;
      return s;
    };
    // Every run may fail (a kernel MIOpen cannot launch on this device): the candidate is dropped.
    double first_ms = 0;
    miopenStatus_t s = timed_run(&first_ms);
    // The first run also loads the solution's kernels: only a much slower one rules it out.
    if (s == kOk && c.served && first_ms > 4 * best_ms) {
      conv_log("solution %llu (%s): %.4f ms on its first run", id, algo, first_ms);
      continue;
    }
    std::vector<double> times(kRuns);
    for (size_t r = 0; r < times.size() && s == kOk; ++r) s = timed_run(&times[r]);
    if (s != kOk) {
      log_status(detail::str_cat("solution ", id, " (", algo, "): run failed").c_str(), s);
      continue;
    }
    std::sort(times.begin(), times.end());
    const double ms = times[kRuns / 2];
    conv_log("solution %llu (%s), workspace %zu B: %.4f ms (MIOpen's estimate %.4f ms)", id, algo, sol.workspace_size,
             ms, static_cast<double>(sol.time));
    if (!c.served || ms < best_ms) {
      best_ms = ms;
      c.served = true;
      c.solution = sol.solution_id;
      c.workspace = sol.workspace_size;
    }
  }
}

// A packed copy of v, or v itself when it is packed already.
const void* packed(GpuBackend& b, const View& v, StoragePtr* hold) {
  const size_t size = static_cast<size_t>(dtype_size(v.dtype));
  if (v.layout.is_contiguous()) return static_cast<const char*>(v.storage.data()) + v.layout.offset() * size;
  *hold = b.alloc(v.dtype, v.layout.numel());
  b.copy_strided(v, MutView{**hold, Layout(v.layout.shape()), v.dtype});
  return (*hold)->data();
}

// The cache key: everything the solution depends on (the operands are packed, so no strides).
using Key = std::tuple<int, int, bool, std::vector<int64_t>>;

}  // namespace

bool conv_library_supports(const View& x, const View& k, const ConvParams& p, bool transposed) {
  const DType dt = x.dtype;
  if (dt != DType::F16 && dt != DType::BF16 && dt != DType::F32) return false;
  // MIOpen's descriptors take int: every size, element count and parameter must fit.
  constexpr int64_t kInt = std::numeric_limits<int>::max();
  const Shape out = conv_output_shape(x.layout.shape(), k.layout.shape(), p, 2, transposed);
  if (x.layout.numel() > kInt || k.layout.numel() > kInt || out.numel() > kInt || p.groups > kInt) return false;
  for (int a = 0; a < 2; ++a) {
    if (p.padding[a] > kInt || p.stride[a] > kInt || p.dilation[a] > kInt || p.output_padding[a] > kInt) return false;
  }
  return true;
}

StoragePtr conv_library(GpuBackend& b, const ConvCall& call, bool transposed, const Shape& out_shape) {
  const View &x = call.x, &k = call.k;
  const ConvParams& p = call.p;
  const DType dt = x.dtype;
  miopenHandle_t handle = handle_for(b);

  std::vector<int64_t> geometry;
  for (const Shape* s : {&x.layout.shape(), &k.layout.shape(), &out_shape})
    for (int i = 0; i < 4; ++i) geometry.push_back((*s)[i]);
  for (int a = 0; a < 2; ++a)
    geometry.push_back(p.padding[a]), geometry.push_back(p.stride[a]), geometry.push_back(p.dilation[a]);
  geometry.push_back(p.groups);
  const Key key{b.device().index(), static_cast<int>(dt), transposed, std::move(geometry)};

  static std::mutex mutex;
  static std::map<Key, std::shared_ptr<Conv>> cache;
  std::shared_ptr<Conv> conv;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) {
      if (!it->second->served) return nullptr;
      conv = it->second;
    }
  }

  StoragePtr xhold, khold;
  const void* xp = packed(b, x, &xhold);
  const void* wp = packed(b, k, &khold);
  StoragePtr out = b.alloc(dt, out_shape.numel());
  if (!conv) {
    conv = std::make_shared<Conv>();
    const Shape& in_shape = transposed ? out_shape : x.layout.shape();
    const Shape& res_shape = transposed ? x.layout.shape() : out_shape;
    if (describe_problem(*conv, dt, in_shape, k.layout.shape(), res_shape, p))
      choose_solution(*conv, b, handle, transposed, xp, wp, out->data());
    if (!conv->served) conv_log_declined(call, "MIOpen has no solution that compiles and runs");
    std::lock_guard<std::mutex> lock(mutex);
    cache.emplace(key, conv);
    if (!conv->served) return nullptr;
  }
  StoragePtr workspace = conv->workspace ? b.alloc(conv->workspace) : nullptr;
  const miopenStatus_t s = run(handle, *conv, transposed, conv->solution, xp, wp, out->data(),
                               workspace ? workspace->data() : nullptr, conv->workspace);
  if (s != kOk) {
    log_status(detail::str_cat("solution ", conv->solution, ": run failed").c_str(), s);
    conv_log_declined(call, "MIOpen's solution for it failed");
    std::lock_guard<std::mutex> lock(mutex);
    conv->served = false;  // later calls of the key go straight to wick's own path
    return nullptr;
  }
  return out;
}

}  // namespace wick::gpu
