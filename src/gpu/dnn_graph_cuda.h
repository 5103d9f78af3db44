// What wick's users of cuDNN's graph API share (dnn_cuda.cu: convolutions; dnn_attention_cuda.cu:
// fused attention): descriptors that remember why cuDNN refused them, errors that name the op, one
// handle per device, the heuristics' engine configurations, plans and their execution. CUDA only.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "gpu/gpu_backend.h"

namespace wick::gpu::cudnn {

constexpr cudnnStatus_t kOk = CUDNN_STATUS_SUCCESS;

// Raises a failed call as wick::Error (OutOfMemoryError when cuDNN ran out of memory), its message
// led by `what`, the op that made the call.
[[noreturn]] inline void fail(cudnnStatus_t s, const char* call, const char* file, int line, const std::string& what) {
  const char* base = std::strrchr(file, '/');
  std::string msg = detail::str_cat(what, ": cuDNN call ", call, " failed at ", base ? base + 1 : file, ":", line, ": ",
                                    cudnnGetErrorString(s));
  if (s == CUDNN_STATUS_ALLOC_FAILED) throw OutOfMemoryError(msg);
  throw ::wick::Error(msg);
}

}  // namespace wick::gpu::cudnn

// Runs a cuDNN call and raises its failure. `what` (a string naming the op, e.g. describe(call))
// is evaluated only on failure.
#define WICK_CUDNN_FOR(what, call)                                                                             \
  do {                                                                                                         \
    cudnnStatus_t wick_s_ = (call);                                                                            \
    if (wick_s_ != CUDNN_STATUS_SUCCESS) ::wick::gpu::cudnn::fail(wick_s_, #call, __FILE__, __LINE__, (what)); \
  } while (0)

namespace wick::gpu::cudnn {

// The device's cuDNN handle, made on first use and kept for the process, bound to the backend's
// stream. `what` names the op in the error raised when cuDNN cannot be started.
inline cudnnHandle_t handle_for(GpuBackend& b, const char* what) {
  static std::mutex mutex;
  static std::vector<cudnnHandle_t> handles;
  std::lock_guard<std::mutex> lock(mutex);
  const size_t i = static_cast<size_t>(b.device().index());
  if (handles.size() <= i) handles.resize(i + 1, nullptr);
  if (!handles[i]) {
    WICK_CUDNN_FOR(what, cudnnCreate(&handles[i]));
    WICK_CUDNN_FOR(what, cudnnSetStream(handles[i], b.stream()));
  }
  return handles[i];
}

// cuDNN's type for a float dtype; CUDNN_DATA_DOUBLE for any other (the callers filter first).
inline cudnnDataType_t data_type(DType dt) {
  switch (dt) {
    case DType::F16: return CUDNN_DATA_HALF;
    case DType::BF16: return CUDNN_DATA_BFLOAT16;
    case DType::F32: return CUDNN_DATA_FLOAT;
    default: return CUDNN_DATA_DOUBLE;
  }
}

// The largest power of two up to 16 that divides the address: what cuDNN may assume of it.
inline int64_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  int64_t al = 16;
  while (al > 1 && a % static_cast<uintptr_t>(al) != 0) al /= 2;
  return al;
}

// One graph-API descriptor. Attribute setters record the first failing status, which finalize()
// returns: building a graph cuDNN cannot serve is not an error, the caller falls back.
class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t type) {
    WICK_CUDNN_FOR("cuDNN graph", cudnnBackendCreateDescriptor(type, &d_));
  }
  Desc(Desc&& o) noexcept
      : d_(std::exchange(o.d_, nullptr)),
        status_(o.status_),
        finalized_(o.finalized_),
        failed_attribute_(o.failed_attribute_) {}
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  Desc& operator=(Desc&& o) noexcept {
    std::swap(d_, o.d_);
    std::swap(status_, o.status_);
    std::swap(finalized_, o.finalized_);
    std::swap(failed_attribute_, o.failed_attribute_);
    return *this;
  }
  ~Desc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }

  cudnnBackendDescriptor_t get() const { return d_; }
  // The attribute whose setting failed first (a cudnnBackendAttributeName_t), -1 when none did.
  int failed_attribute() const { return failed_attribute_; }
  template <typename T>
  Desc& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T* values, int64_t n = 1) {
    if (status_ == kOk) {
      status_ = cudnnBackendSetAttribute(d_, name, type, n, values);
      if (status_ != kOk) failed_attribute_ = name;
    }
    return *this;
  }
  Desc& set(cudnnBackendAttributeName_t name, const Desc& other) {
    cudnnBackendDescriptor_t o = other.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &o);
  }
  cudnnStatus_t finalize() {
    if (status_ == kOk && !finalized_) {
      status_ = cudnnBackendFinalize(d_);
      finalized_ = true;
    }
    return status_;
  }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
  cudnnStatus_t status_ = kOk;
  bool finalized_ = false;
  int failed_attribute_ = -1;
};

// The engine configurations a heuristic proposes for a finalised operation graph, best first.
// None when the heuristic fails; `error` then says why.
inline std::vector<Desc> engine_configs(const Desc& graph, cudnnBackendHeurMode_t mode, std::string* error) {
  Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  cudnnStatus_t s = heur.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph)
                        .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode)
                        .finalize();
  int64_t count = 0;
  if (s == kOk)
    s = cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                 nullptr);
  if (s != kOk) {
    *error = detail::str_cat("heuristics failed: ", cudnnGetErrorString(s));
    return {};
  }
  std::vector<Desc> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) raw.push_back(configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR).get());
  s = cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count,
                               raw.data());
  if (s != kOk) {
    *error = detail::str_cat("reading the heuristics' results failed: ", cudnnGetErrorString(s));
    return {};
  }
  if (count < static_cast<int64_t>(configs.size())) configs.erase(configs.begin() + count, configs.end());
  return configs;
}

// What an engine configuration's engine says of itself.
struct EngineInfo {
  int64_t index = -1;  // the engine's global index
  std::vector<cudnnBackendNumericalNote_t> numerical;
  std::vector<cudnnBackendBehaviorNote_t> behavior;
  std::string error;  // set when reading failed; the rest is then incomplete

  bool has(cudnnBackendBehaviorNote_t note) const {
    for (cudnnBackendBehaviorNote_t b : behavior)
      if (b == note) return true;
    return false;
  }
};

inline EngineInfo read_engine(const Desc& config) {
  EngineInfo info;
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t e = engine.get();
  int64_t n = 0;
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  cudnnStatus_t s =
      cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e);
  if (s == kOk) s = cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &info.index);
  if (s == kOk)
    s = cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                 CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes);
  if (s != kOk) {
    info.error = detail::str_cat("reading an engine failed: ", cudnnGetErrorString(s));
    return info;
  }
  info.numerical.assign(notes, notes + n);
  cudnnBackendBehaviorNote_t behavior[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
  s = cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                               CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &n, behavior);
  if (s != kOk) {
    info.error = detail::str_cat("reading an engine's behavior notes failed: ", cudnnGetErrorString(s));
    return info;
  }
  info.behavior.assign(behavior, behavior + n);
  return info;
}

// The execution plan of an engine configuration; its finalize() gives cuDNN's verdict.
inline std::unique_ptr<Desc> make_plan(cudnnHandle_t handle, const Desc& config) {
  auto plan = std::make_unique<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle)
      .set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config)
      .finalize();
  return plan;
}

inline cudnnStatus_t workspace_size(const Desc& plan, int64_t* bytes) {
  int64_t n = 0;
  return cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, bytes);
}

// Queues a plan on the handle's stream with the n tensors' data: device pointers, or host pointers
// to the values of by-value tensors.
inline cudnnStatus_t execute(cudnnHandle_t handle, const Desc& plan, int64_t n, const int64_t* uids,
                             void* const* pointers, void* workspace) {
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  const cudnnStatus_t s = pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids, n)
                              .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, pointers, n)
                              .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &workspace)
                              .finalize();
  return s == kOk ? cudnnBackendExecute(handle, plan.get(), pack.get()) : s;
}

}  // namespace wick::gpu::cudnn
