// MIOpen convolutions behind gpu/conv.h, through the immediate-mode solution API: the first
// solution MIOpen lists for a (shape, dtype, parameters) key is compiled once and kept for the
// process, so a new shape costs no benchmarking run. Input and kernel are packed first when they
// are not contiguous; the transposed forms are MIOpen's backward-data pass. MIOpen has no f64
// convolution: f64 takes wick's own path.
#include <cstring>
#include <map>
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
#define WICK_MIOPEN_FOR(c, call)                                                       \
  do {                                                                                 \
    miopenStatus_t wick_s_ = (call);                                                   \
    if (wick_s_ != miopenStatusSuccess) fail(wick_s_, #call, __FILE__, __LINE__, (c)); \
  } while (0)
#define WICK_MIOPEN(call) WICK_MIOPEN_FOR(nullptr, call)

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

struct Descriptors {
  miopenTensorDescriptor_t x = nullptr, y = nullptr, w = nullptr;
  miopenConvolutionDescriptor_t conv = nullptr;
  Descriptors() {
    WICK_MIOPEN(miopenCreateTensorDescriptor(&x));
    WICK_MIOPEN(miopenCreateTensorDescriptor(&y));
    WICK_MIOPEN(miopenCreateTensorDescriptor(&w));
    WICK_MIOPEN(miopenCreateConvolutionDescriptor(&conv));
  }
  ~Descriptors() {
    miopenDestroyTensorDescriptor(x);
    miopenDestroyTensorDescriptor(y);
    miopenDestroyTensorDescriptor(w);
    miopenDestroyConvolutionDescriptor(conv);
  }
};

void set_tensor(miopenTensorDescriptor_t d, DType dt, const Shape& shape) {
  int dims[4], strides[4];
  int64_t acc = 1;
  for (int i = 3; i >= 0; --i) {
    dims[i] = static_cast<int>(shape[i]);
    strides[i] = static_cast<int>(acc);
    acc *= shape[i];
  }
  WICK_MIOPEN(miopenSetTensorDescriptor(d, data_type(dt), 4, dims, strides));
}

// A packed copy of v, or v itself when it is packed already.
const void* packed(GpuBackend& b, const View& v, StoragePtr* hold) {
  const size_t size = static_cast<size_t>(dtype_size(v.dtype));
  if (v.layout.is_contiguous()) return static_cast<const char*>(v.storage.data()) + v.layout.offset() * size;
  *hold = b.alloc(v.dtype, v.layout.numel());
  b.copy_strided(v, MutView{**hold, Layout(v.layout.shape()), v.dtype});
  return (*hold)->data();
}

using Key = std::tuple<int, int, bool, std::vector<int64_t>>;

}  // namespace

bool conv_library_supports(const View& x, const View& k, const ConvParams& p, bool transposed) {
  (void)transposed;
  (void)p;
  const DType dt = x.dtype;
  if (dt != DType::F16 && dt != DType::BF16 && dt != DType::F32) return false;
  return x.layout.numel() < (int64_t(1) << 31) && k.layout.numel() < (int64_t(1) << 31);
}

StoragePtr conv_library(GpuBackend& b, const ConvCall& call, bool transposed, const Shape& out_shape) {
  const View &x = call.x, &k = call.k;
  const ConvParams& p = call.p;
  const DType dt = x.dtype;
  miopenHandle_t handle = handle_for(b);
  StoragePtr xhold, khold;
  const void* xp = packed(b, x, &xhold);
  const void* wp = packed(b, k, &khold);
  StoragePtr out = b.alloc(dt, out_shape.numel());
  // x and y are the convolution's input and output; the transposed form runs it backward.
  Descriptors d;
  set_tensor(d.x, dt, transposed ? out_shape : x.layout.shape());
  set_tensor(d.y, dt, transposed ? x.layout.shape() : out_shape);
  set_tensor(d.w, dt, k.layout.shape());
  const int pads[2] = {static_cast<int>(p.padding[0]), static_cast<int>(p.padding[1])};
  const int strides[2] = {static_cast<int>(p.stride[0]), static_cast<int>(p.stride[1])};
  const int dilations[2] = {static_cast<int>(p.dilation[0]), static_cast<int>(p.dilation[1])};
  WICK_MIOPEN(miopenInitConvolutionNdDescriptor(d.conv, 2, pads, strides, dilations, miopenConvolution));
  WICK_MIOPEN(miopenSetConvolutionGroupCount(d.conv, static_cast<int>(p.groups)));

  static std::mutex mutex;
  static std::map<Key, miopenConvSolution_t> cache;
  std::vector<int64_t> geometry;
  for (const Shape* s : {&x.layout.shape(), &k.layout.shape(), &out_shape})
    for (int i = 0; i < 4; ++i) geometry.push_back((*s)[i]);
  for (int a = 0; a < 2; ++a)
    geometry.push_back(p.padding[a]), geometry.push_back(p.stride[a]), geometry.push_back(p.dilation[a]);
  geometry.push_back(p.groups);
  const Key key{b.device().index(), static_cast<int>(dt), transposed, geometry};
  miopenConvSolution_t solution{};
  bool known = false;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) solution = it->second, known = true;
  }
  if (!known) {
    size_t count = 0;
    if (!transposed) {
      WICK_MIOPEN_FOR(&call, miopenConvolutionForwardGetSolution(handle, d.w, d.x, d.conv, d.y, 1, &count, &solution));
      if (count == 0) return nullptr;
      WICK_MIOPEN_FOR(&call,
                      miopenConvolutionForwardCompileSolution(handle, d.w, d.x, d.conv, d.y, solution.solution_id));
    } else {
      WICK_MIOPEN_FOR(&call,
                      miopenConvolutionBackwardDataGetSolution(handle, d.y, d.w, d.conv, d.x, 1, &count, &solution));
      if (count == 0) return nullptr;
      WICK_MIOPEN_FOR(
          &call, miopenConvolutionBackwardDataCompileSolution(handle, d.y, d.w, d.conv, d.x, solution.solution_id));
    }
    std::lock_guard<std::mutex> lock(mutex);
    cache[key] = solution;
  }
  StoragePtr workspace = solution.workspace_size ? b.alloc(solution.workspace_size) : nullptr;
  void* ws = workspace ? workspace->data() : nullptr;
  if (!transposed) {
    WICK_MIOPEN_FOR(&call, miopenConvolutionForwardImmediate(handle, d.w, wp, d.x, xp, d.conv, d.y, out->data(), ws,
                                                             solution.workspace_size, solution.solution_id));
  } else {
    WICK_MIOPEN_FOR(&call, miopenConvolutionBackwardDataImmediate(handle, d.y, xp, d.w, wp, d.conv, d.x, out->data(),
                                                                  ws, solution.workspace_size, solution.solution_id));
  }
  return out;
}

}  // namespace wick::gpu
