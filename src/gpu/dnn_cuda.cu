// cuDNN convolutions behind gpu/conv.h, through cuDNN's graph API: each convolution is a one-node
// operation graph. The first call of a (shapes, strides, alignment, dtype, parameters) key times
// the engine configurations cuDNN's heuristics propose, on the call's own buffers, and keeps the
// fastest plan for the process. Engines that would break wick's numerics are never candidates:
// inputs down-converted, reductions in half precision, non-deterministic results, and TF32 tensor
// cores for f32 unless set_allow_tf32(true); nor are engines compiled at run time (see
// admissible_engine). Input and output take any strides; the kernel is packed
// first when it is not contiguous. The transposed forms are cuDNN's backward-data pass.
// WICK_CONV_LOG=1 prints each key's candidates and timings to stderr.
#include <cudnn.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "gpu/conv.h"
#include "gpu/dnn_graph_cuda.h"
#include "gpu/gpu_backend.h"

namespace wick::gpu {

namespace {

using cudnn::alignment_of;
using cudnn::data_type;
using cudnn::Desc;
using cudnn::kOk;

void log_status(const char* what, cudnnStatus_t s) { conv_log("%s: %s", what, cudnnGetErrorString(s)); }

enum Uid : int64_t { kUidX = 1, kUidW = 2, kUidY = 3 };

// A 4-d tensor. A size-1 dim gets the stride a packed layout of the dims inside it would give, so
// that cuDNN reads the intended memory order from the strides alone.
Desc tensor(int64_t uid, DType dt, const Layout& l, int64_t alignment) {
  int64_t dims[4], strides[4];
  for (int i = 3; i >= 0; --i) {
    dims[i] = l.dim(i);
    strides[i] = l.dim(i) != 1 ? l.stride(i) : i == 3 ? 1 : strides[i + 1] * dims[i + 1];
  }
  const cudnnDataType_t type = data_type(dt);
  Desc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type)
      .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims, 4)
      .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides, 4)
      .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid)
      .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment);
  return t;
}

// The descriptors of one convolution and the plan chosen for it, kept for the process (a plan
// refers to the descriptors it was made from). No plan: cuDNN serves no candidate for the key.
struct Conv {
  std::vector<Desc> parts;
  std::unique_ptr<Desc> plan;
  int64_t workspace = 0;
};

// Finalises a descriptor before anything refers to it; false (and a log line) when cuDNN refuses it.
bool ready(Desc& d, const char* what) {
  const cudnnStatus_t s = d.finalize();
  if (s != kOk)
    conv_log("the %s descriptor was refused (attribute %d): %s", what, d.failed_attribute(), cudnnGetErrorString(s));
  return s == kOk;
}

// Builds the operation graph; false when cuDNN refuses it.
bool build_graph(Conv& c, cudnnHandle_t handle, DType dt, const Layout& x_l, const Layout& w_l, const Layout& y_l,
                 const int64_t align[3], const ConvParams& p, bool transposed) {
  c.parts.reserve(6);
  Desc& x = c.parts.emplace_back(tensor(kUidX, dt, x_l, align[0]));
  Desc& w = c.parts.emplace_back(tensor(kUidW, dt, w_l, align[1]));
  Desc& y = c.parts.emplace_back(tensor(kUidY, dt, y_l, align[2]));
  if (!ready(x, "x") || !ready(w, "w") || !ready(y, "y")) return false;

  const cudnnDataType_t compute = dt == DType::F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t spatial = 2;
  Desc& conv = c.parts.emplace_back(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &compute)
      .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, &mode)
      .set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, &spatial)
      .set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, p.dilation, 2)
      .set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, p.stride, 2)
      .set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, p.padding, 2)
      .set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, p.padding, 2);
  if (!ready(conv, "convolution")) return false;

  // y = conv(x, w); the transposed form computes dx from dy, so x there is the op's output.
  Desc& op = c.parts.emplace_back(transposed ? CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR
                                             : CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  const double one_d = 1, zero_d = 0;
  const float one_f = 1, zero_f = 0;
  const bool f64 = dt == DType::F64;
  const cudnnBackendAttributeType_t scalar = f64 ? CUDNN_TYPE_DOUBLE : CUDNN_TYPE_FLOAT;
  const void* one = f64 ? static_cast<const void*>(&one_d) : &one_f;
  const void* zero = f64 ? static_cast<const void*>(&zero_d) : &zero_f;
  // The operation's attributes: alpha, beta, convolution, w, x (dx), y (dy).
  using A = cudnnBackendAttributeName_t;
  constexpr A kForward[] = {
      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y};
  constexpr A kBackwardData[] = {
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY};
  const A* at = transposed ? kBackwardData : kForward;
  op.set(at[0], scalar, one).set(at[1], scalar, zero).set(at[2], conv).set(at[3], w).set(at[4], x).set(at[5], y);
  if (!ready(op, "operation")) return false;
  Desc& graph = c.parts.emplace_back(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, op).set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle);
  return ready(graph, "graph");
}

// The engine configurations a heuristic proposes for a graph, best first.
std::vector<Desc> engine_configs(const Desc& graph, cudnnBackendHeurMode_t mode) {
  std::string error;
  std::vector<Desc> configs = cudnn::engine_configs(graph, mode, &error);
  if (!error.empty()) conv_log("%s", error.c_str());
  return configs;
}

// The engine's global index, or -1 when its numerics break wick's contract for this dtype.
int64_t admissible_engine(const Desc& config, DType dt) {
  const cudnn::EngineInfo engine = cudnn::read_engine(config);
  if (!engine.error.empty()) {
    conv_log("%s", engine.error.c_str());
    return -1;
  }
  const int64_t index = engine.index;
  // Runtime-compiled engines are left out: their first run compiles kernels (milliseconds), and one
  // of them (engine 71 of cuDNN 9 on an H100) writes bf16 outputs of small grouped convolutions at
  // misaligned addresses, a fault that ends the CUDA context.
  if (engine.has(CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION)) {
    conv_log("engine %lld left out (compiled at run time)", static_cast<long long>(index));
    return -1;
  }
  for (const cudnnBackendNumericalNote_t note : engine.numerical) {
    const bool tf32 = note == CUDNN_NUMERICAL_NOTE_TENSOR_CORE && dt == DType::F32 && !allow_tf32();
    if (tf32 || note == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS ||
        note == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION || note == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) {
      conv_log("engine %lld left out (numerical note %d)", static_cast<long long>(index), static_cast<int>(note));
      return -1;
    }
  }
  return index;
}

cudnnStatus_t execute(cudnnHandle_t handle, const Desc& plan, void* x, void* w, void* y, void* workspace) {
  const int64_t uids[3] = {kUidX, kUidW, kUidY};
  void* pointers[3] = {x, w, y};
  return cudnn::execute(handle, plan, 3, uids, pointers, workspace);
}

// Times the admissible candidates of the heuristics on the call's buffers and keeps the fastest
// in c. The candidates write the output, which the caller writes again.
void choose_plan(Conv& c, const ConvCall& call, GpuBackend& b, cudnnHandle_t handle, void* x, void* w, void* y) {
  const DType dt = call.x.dtype;
  constexpr size_t kMaxCandidates = 12;
  constexpr int kRuns = 3;
  std::vector<Desc> configs = engine_configs(c.parts.back(), CUDNN_HEUR_MODE_A);
  for (Desc& d : engine_configs(c.parts.back(), CUDNN_HEUR_MODE_FALLBACK)) configs.push_back(std::move(d));
  conv_log("%zu engine configurations proposed", configs.size());

  const std::unique_ptr<Timer> timer = b.make_timer();
  std::vector<int64_t> tried;
  double best_ms = 0;
  for (Desc& config : configs) {
    if (tried.size() == kMaxCandidates) break;
    const int64_t engine = admissible_engine(config, dt);
    if (engine < 0 || std::find(tried.begin(), tried.end(), engine) != tried.end()) continue;
    tried.push_back(engine);
    std::unique_ptr<Desc> plan = cudnn::make_plan(handle, config);
    if (const cudnnStatus_t s = plan->finalize(); s != kOk) {
      log_status(detail::str_cat("engine ", engine, ": no plan").c_str(), s);
      continue;
    }
    int64_t workspace = 0;
    WICK_CUDNN_FOR(describe(call), cudnn::workspace_size(*plan, &workspace));
    StoragePtr ws;
    try {
      if (workspace > 0) ws = b.alloc(static_cast<size_t>(workspace));
    } catch (const OutOfMemoryError&) {
      continue;  // a candidate that needs more memory than is free
    }
    void* wsp = ws ? ws->data() : nullptr;
    // One timed run; a failure there drops the candidate, a failure later is an error.
    auto timed_run = [&](double* ms) {
      timer->start();
      const cudnnStatus_t s = execute(handle, *plan, x, w, y, wsp);
      timer->stop();
      *ms = timer->elapsed_ms();
      return s;
    };
    double first_ms = 0;
    if (const cudnnStatus_t s = timed_run(&first_ms); s != kOk) {
      log_status(detail::str_cat("engine ", engine, ": run failed").c_str(), s);
      continue;
    }
    // The first run also loads the engine's kernels: only a much slower one rules it out.
    if (c.plan && first_ms > 4 * best_ms) {
      conv_log("engine %lld: %.4f ms on its first run", static_cast<long long>(engine), first_ms);
      continue;
    }
    std::vector<double> times(kRuns);
    for (double& t : times) WICK_CUDNN_FOR(describe(call), timed_run(&t));
    std::sort(times.begin(), times.end());
    const double ms = times[kRuns / 2];
    conv_log("engine %lld, workspace %lld B: %.4f ms", static_cast<long long>(engine),
             static_cast<long long>(workspace), ms);
    if (!c.plan || ms < best_ms) {
      best_ms = ms;
      c.parts.push_back(std::move(config));  // the plan refers to it
      c.plan = std::move(plan);
      c.workspace = workspace;
    }
  }
}

// The cache key: everything the plan depends on.
using Key = std::tuple<int, int, bool, std::vector<int64_t>>;

int32_t fits_int(int64_t v) { return v <= std::numeric_limits<int32_t>::max() ? static_cast<int32_t>(v) : -1; }

}  // namespace

bool conv_library_supports(const View& x, const View& k, const ConvParams& p, bool transposed) {
  (void)transposed;
  (void)p;
  const DType dt = x.dtype;
  if (dt != DType::F16 && dt != DType::BF16 && dt != DType::F32 && dt != DType::F64) return false;
  // 32-bit dims and strides, as cuDNN's kernels index.
  for (int i = 0; i < 4; ++i) {
    if (fits_int(x.layout.dim(i)) < 0 || fits_int(x.layout.stride(i)) < 0 || fits_int(k.layout.dim(i)) < 0)
      return false;
  }
  return x.layout.extent() < (int64_t(1) << 31);
}

StoragePtr conv_library(GpuBackend& b, const ConvCall& call, bool transposed, const Shape& out_shape) {
  const View &x = call.x, &k = call.k;
  const ConvParams& p = call.p;
  const DType dt = x.dtype;
  cudnnHandle_t handle = cudnn::handle_for(b, "conv");
  const size_t size = static_cast<size_t>(dtype_size(dt));
  // The filter must be packed.
  StoragePtr packed;
  const void* w = static_cast<const char*>(k.storage.data()) + k.layout.offset() * size;
  if (!k.layout.is_contiguous()) {
    packed = b.alloc(dt, k.layout.numel());
    b.copy_strided(k, MutView{*packed, Layout(k.layout.shape()), dt});
    w = packed->data();
  }
  const void* xp = static_cast<const char*>(x.storage.data()) + x.layout.offset() * size;
  StoragePtr out = b.alloc(dt, out_shape.numel());
  const Layout out_l(out_shape), w_l(k.layout.shape());
  // cuDNN's x and y are the convolution's input and output; the transposed form runs it backward.
  const Layout& in_l = transposed ? out_l : x.layout;
  const Layout& res_l = transposed ? x.layout : out_l;
  void* in_p = transposed ? out->data() : const_cast<void*>(xp);
  void* res_p = transposed ? const_cast<void*>(xp) : out->data();
  const int64_t align[3] = {alignment_of(in_p), alignment_of(w), alignment_of(res_p)};

  std::vector<int64_t> geometry;
  for (const Layout* l : {&x.layout, &w_l}) {
    for (int i = 0; i < 4; ++i) geometry.push_back(l->dim(i)), geometry.push_back(l->stride(i));
  }
  for (int a = 0; a < 2; ++a) {
    geometry.push_back(p.padding[a]), geometry.push_back(p.stride[a]), geometry.push_back(p.dilation[a]);
    geometry.push_back(p.output_padding[a]);
  }
  geometry.insert(geometry.end(), {p.groups, allow_tf32(), align[0], align[1], align[2]});
  const Key key{b.device().index(), static_cast<int>(dt), transposed, std::move(geometry)};

  static std::mutex mutex;
  static std::map<Key, std::shared_ptr<Conv>> cache;
  std::shared_ptr<Conv> conv;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) conv = it->second;
  }
  void* wp = const_cast<void*>(w);
  if (!conv) {
    conv = std::make_shared<Conv>();
    if (build_graph(*conv, handle, dt, in_l, w_l, res_l, align, p, transposed))
      choose_plan(*conv, call, b, handle, in_p, wp, res_p);
    if (!conv->plan) conv_log_declined(call, "cuDNN has no admissible plan");
    std::lock_guard<std::mutex> lock(mutex);
    cache.emplace(key, conv);
  }
  if (!conv->plan) return nullptr;
  StoragePtr workspace = conv->workspace ? b.alloc(static_cast<size_t>(conv->workspace)) : nullptr;
  WICK_CUDNN_FOR(describe(call),
                 execute(handle, *conv->plan, in_p, wp, res_p, workspace ? workspace->data() : nullptr));
  return out;
}

}  // namespace wick::gpu
