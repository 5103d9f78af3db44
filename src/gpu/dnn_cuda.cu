// cuDNN convolutions behind gpu/conv.h. Input and output take any strides (N-d descriptors); the
// kernel is packed first when it is not. The transposed forms are cuDNN's backward-data pass.
// The algorithm for each (shape, strides, dtype, parameters) is chosen once, by timing cuDNN's
// candidates on the call's own buffers, and kept for the process; f32 runs as true f32 (FMA math)
// unless TF32 is allowed.
#include <cudnn.h>

#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "gpu/conv.h"
#include "gpu/gpu_backend.h"

namespace wick::gpu {

namespace {

[[noreturn]] void fail(cudnnStatus_t s, const char* call, const char* file, int line) {
  const char* base = std::strrchr(file, '/');
  std::string msg = detail::str_cat("conv: cuDNN call ", call, " failed at ", base ? base + 1 : file, ":", line, ": ",
                                    cudnnGetErrorString(s));
  if (s == CUDNN_STATUS_ALLOC_FAILED) throw OutOfMemoryError(msg);
  throw ::wick::Error(msg);
}
#define WICK_CUDNN(call)                                                           \
  do {                                                                             \
    cudnnStatus_t wick_s_ = (call);                                                \
    if (wick_s_ != CUDNN_STATUS_SUCCESS) fail(wick_s_, #call, __FILE__, __LINE__); \
  } while (0)

cudnnHandle_t handle_for(GpuBackend& b) {
  static std::mutex mutex;
  static std::vector<cudnnHandle_t> handles;  // kept for the process
  std::lock_guard<std::mutex> lock(mutex);
  const size_t i = static_cast<size_t>(b.device().index());
  if (handles.size() <= i) handles.resize(i + 1, nullptr);
  if (!handles[i]) {
    WICK_CUDNN(cudnnCreate(&handles[i]));
    WICK_CUDNN(cudnnSetStream(handles[i], b.stream()));
  }
  return handles[i];
}

cudnnDataType_t data_type(DType dt) {
  switch (dt) {
    case DType::F16: return CUDNN_DATA_HALF;
    case DType::BF16: return CUDNN_DATA_BFLOAT16;
    case DType::F32: return CUDNN_DATA_FLOAT;
    default: return CUDNN_DATA_DOUBLE;
  }
}

// Descriptors of one convolution, destroyed with it.
struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  Descriptors() {
    WICK_CUDNN(cudnnCreateTensorDescriptor(&x));
    WICK_CUDNN(cudnnCreateTensorDescriptor(&y));
    WICK_CUDNN(cudnnCreateFilterDescriptor(&w));
    WICK_CUDNN(cudnnCreateConvolutionDescriptor(&conv));
  }
  ~Descriptors() {
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyConvolutionDescriptor(conv);
  }
};

void set_tensor(cudnnTensorDescriptor_t d, DType dt, const Layout& l) {
  int dims[4], strides[4];
  for (int i = 0; i < 4; ++i) {
    dims[i] = static_cast<int>(l.dim(i));
    strides[i] = static_cast<int>(l.dim(i) == 1 ? 1 : l.stride(i));
  }
  WICK_CUDNN(cudnnSetTensorNdDescriptor(d, data_type(dt), 4, dims, strides));
}

// The cache key: everything the choice of algorithm depends on.
using Key = std::tuple<int, int, bool, std::vector<int64_t>, int64_t>;

struct Choice {
  int algo;
  size_t workspace;
};

int32_t fits_int(int64_t v) { return v <= std::numeric_limits<int32_t>::max() ? static_cast<int32_t>(v) : -1; }

}  // namespace

bool conv_library_supports(const View& x, const View& k, const ConvParams& p, bool transposed) {
  (void)transposed;
  (void)p;
  const DType dt = x.dtype;
  if (dt != DType::F16 && dt != DType::BF16 && dt != DType::F32 && dt != DType::F64) return false;
  // 32-bit dims and strides in the descriptors.
  for (int i = 0; i < 4; ++i) {
    if (fits_int(x.layout.dim(i)) < 0 || fits_int(x.layout.stride(i)) < 0 || fits_int(k.layout.dim(i)) < 0)
      return false;
  }
  return x.layout.extent() < (int64_t(1) << 31);
}

StoragePtr conv_library(GpuBackend& b, const View& x, const View& k, const ConvParams& p, bool transposed,
                        const Shape& out_shape) {
  const DType dt = x.dtype;
  cudnnHandle_t handle = handle_for(b);
  // The filter must be packed.
  StoragePtr packed;
  const Storage* ks = &k.storage;
  int64_t k_offset = k.layout.offset();
  if (!k.layout.is_contiguous()) {
    packed = b.alloc(dt, k.layout.numel());
    b.copy_strided(k, MutView{*packed, Layout(k.layout.shape()), dt});
    ks = packed.get();
    k_offset = 0;
  }
  StoragePtr out = b.alloc(dt, out_shape.numel());
  const Layout out_l(out_shape);
  // x and y are the convolution's input and output; the transposed form runs it backward.
  const Layout& in_l = transposed ? out_l : x.layout;
  const Layout& res_l = transposed ? x.layout : out_l;
  Descriptors d;
  set_tensor(d.x, dt, in_l);
  set_tensor(d.y, dt, res_l);
  const Shape& ksh = k.layout.shape();
  WICK_CUDNN(cudnnSetFilter4dDescriptor(d.w, data_type(dt), CUDNN_TENSOR_NCHW, static_cast<int>(ksh[0]),
                                        static_cast<int>(ksh[1]), static_cast<int>(ksh[2]), static_cast<int>(ksh[3])));
  const cudnnDataType_t compute = dt == DType::F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  WICK_CUDNN(cudnnSetConvolution2dDescriptor(d.conv, static_cast<int>(p.padding[0]), static_cast<int>(p.padding[1]),
                                             static_cast<int>(p.stride[0]), static_cast<int>(p.stride[1]),
                                             static_cast<int>(p.dilation[0]), static_cast<int>(p.dilation[1]),
                                             CUDNN_CROSS_CORRELATION, compute));
  WICK_CUDNN(cudnnSetConvolutionGroupCount(d.conv, static_cast<int>(p.groups)));
  const bool tensor_cores = dt == DType::F16 || dt == DType::BF16 || (dt == DType::F32 && allow_tf32());
  WICK_CUDNN(cudnnSetConvolutionMathType(d.conv, tensor_cores ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));

  // Choose (once per key) the first heuristic algorithm whose workspace can be allocated.
  static std::mutex mutex;
  static std::map<Key, Choice> cache;
  std::vector<int64_t> geometry;
  for (const Layout* l : {&x.layout, &k.layout}) {
    for (int i = 0; i < 4; ++i) geometry.push_back(l->dim(i)), geometry.push_back(l->stride(i));
  }
  for (int a = 0; a < 2; ++a) {
    geometry.push_back(p.padding[a]), geometry.push_back(p.stride[a]), geometry.push_back(p.dilation[a]);
    geometry.push_back(p.output_padding[a]);
  }
  const Key key{b.device().index(), static_cast<int>(dt), transposed, geometry, p.groups * 2 + allow_tf32()};
  Choice choice{-1, 0};
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) choice = it->second;
  }
  const size_t size = static_cast<size_t>(dtype_size(dt));
  const void* w = static_cast<const char*>(ks->data()) + k_offset * size;
  const void* xp = static_cast<const char*>(x.storage.data()) + x.layout.offset() * size;
  if (choice.algo < 0) {
    // The search runs every candidate on these buffers (it writes the output, which the call
    // below writes again) with a workspace of at most kSearchWorkspace bytes.
    constexpr int kMax = 16;
    constexpr size_t kSearchWorkspace = size_t(512) << 20;
    StoragePtr search = b.alloc(kSearchWorkspace);
    int found = 0;
    if (!transposed) {
      cudnnConvolutionFwdAlgoPerf_t perf[kMax];
      WICK_CUDNN(cudnnFindConvolutionForwardAlgorithmEx(handle, d.x, xp, d.w, w, d.conv, d.y, out->data(), kMax, &found,
                                                        perf, search->data(), kSearchWorkspace));
      for (int i = 0; i < found && choice.algo < 0; ++i)
        if (perf[i].status == CUDNN_STATUS_SUCCESS) choice = {static_cast<int>(perf[i].algo), perf[i].memory};
    } else {
      cudnnConvolutionBwdDataAlgoPerf_t perf[kMax];
      WICK_CUDNN(cudnnFindConvolutionBackwardDataAlgorithmEx(handle, d.w, w, d.y, xp, d.conv, d.x, out->data(), kMax,
                                                             &found, perf, search->data(), kSearchWorkspace));
      for (int i = 0; i < found && choice.algo < 0; ++i)
        if (perf[i].status == CUDNN_STATUS_SUCCESS) choice = {static_cast<int>(perf[i].algo), perf[i].memory};
    }
    if (choice.algo < 0) return nullptr;
    std::lock_guard<std::mutex> lock(mutex);
    cache[key] = choice;
  }
  StoragePtr workspace = choice.workspace ? b.alloc(choice.workspace) : nullptr;
  const double one_d = 1.0, zero_d = 0.0;
  const float one_f = 1.0f, zero_f = 0.0f;
  const void* one = dt == DType::F64 ? static_cast<const void*>(&one_d) : &one_f;
  const void* zero = dt == DType::F64 ? static_cast<const void*>(&zero_d) : &zero_f;
  void* ws = workspace ? workspace->data() : nullptr;
  if (!transposed) {
    WICK_CUDNN(cudnnConvolutionForward(handle, one, d.x, xp, d.w, w, d.conv,
                                       static_cast<cudnnConvolutionFwdAlgo_t>(choice.algo), ws, choice.workspace, zero,
                                       d.y, out->data()));
  } else {
    WICK_CUDNN(cudnnConvolutionBackwardData(handle, one, d.w, w, d.y, xp, d.conv,
                                            static_cast<cudnnConvolutionBwdDataAlgo_t>(choice.algo), ws,
                                            choice.workspace, zero, d.x, out->data()));
  }
  return out;
}

}  // namespace wick::gpu
