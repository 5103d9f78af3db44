// The HIP (ROCm) side of wick's GPU layer: the only header (with blas_* and dnn_*) that names the
// HIP runtime. It maps the same wick::gpu names as cuda.h.
#pragma once

#include <cstdint>
#include <hip/hip_runtime.h>
#include <string>
#include <utility>

#include "wick/device.h"

namespace wick::gpu {

inline constexpr DeviceType kDeviceType = DeviceType::Rocm;
inline constexpr const char* kVendor = "ROCm";

using Status = hipError_t;
using Stream = hipStream_t;
using Event = hipEvent_t;
using GraphDef = hipGraph_t;
using GraphExec = hipGraphExec_t;
inline constexpr Status kSuccess = hipSuccess;

inline bool is_out_of_memory(Status e) { return e == hipErrorOutOfMemory; }
inline const char* error_string(Status e) { return hipGetErrorString(e); }
inline Status last_error() { return hipGetLastError(); }

inline Status device_count(int* n) { return hipGetDeviceCount(n); }
inline Status set_device(int d) { return hipSetDevice(d); }
inline Status get_device(int* d) { return hipGetDevice(d); }
inline Status device_synchronize() { return hipDeviceSynchronize(); }
// "HIP driver 6.4.43482, runtime 6.4.43482": versions encoded as major * 10^7 + minor * 10^5 + patch.
inline Status driver_version(std::string* out) {
  int driver = 0, runtime = 0;
  Status e = hipDriverGetVersion(&driver);
  if (e == kSuccess) e = hipRuntimeGetVersion(&runtime);
  if (e != kSuccess) return e;
  auto text = [](int v) {
    return std::to_string(v / 10000000) + "." + std::to_string(v / 100000 % 100) + "." + std::to_string(v % 100000);
  };
  *out = "HIP driver " + text(driver) + ", runtime " + text(runtime);
  return kSuccess;
}

struct DeviceProps {
  std::string name;
  std::string arch;  // "gfx942:sramecc+:xnack-"
  size_t total_memory = 0;
  int warp_size = 64;
  int multiprocessors = 0;
  size_t l2_bytes = 0;
  size_t shared_per_block = 0;
  size_t shared_per_block_optin = 0;  // the most a kernel may ask for (kernel_set_shared_limit)
  bool early_start = false;           // HIP has no dependent launch: each kernel starts after the one before
};

inline Status device_props(int d, DeviceProps* out) {
  hipDeviceProp_t p;
  Status e = hipGetDeviceProperties(&p, d);
  if (e != kSuccess) return e;
  out->name = p.name;
  out->arch = p.gcnArchName;
  out->total_memory = p.totalGlobalMem;
  out->warp_size = p.warpSize;
  out->multiprocessors = p.multiProcessorCount;
  out->l2_bytes = static_cast<size_t>(p.l2CacheSize);
  out->shared_per_block = p.sharedMemPerBlock;
  out->shared_per_block_optin = p.sharedMemPerBlockOptin;
  return kSuccess;
}

// kernel<<<grid, block, shared, s>>>(args...): `early` is CUDA's dependent launch (cuda.h), which
// HIP does not have.
template <typename... Params, typename... Args>
inline Status launch_kernel(bool /*early*/, void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared, Stream s,
                            Args&&... args) {
  kernel<<<grid, block, shared, s>>>(std::forward<Args>(args)...);
  return hipGetLastError();
}

// Lets kernel `f` take up to `bytes` of dynamic shared memory (beyond shared_per_block).
inline Status kernel_set_shared_limit(const void* f, int bytes) {
  return hipFuncSetAttribute(f, hipFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

// How many blocks of `block` threads and `shared` bytes of dynamic shared memory of kernel `f`
// one multiprocessor holds at once.
inline Status kernel_blocks_per_sm(int* n, const void* f, int block, size_t shared) {
  return hipOccupancyMaxActiveBlocksPerMultiprocessor(n, f, block, shared);
}

inline Status stream_create(Stream* s) { return hipStreamCreateWithFlags(s, hipStreamNonBlocking); }
inline Status stream_synchronize(Stream s) { return hipStreamSynchronize(s); }

inline Status pool_keep_memory(int d) {
  hipMemPool_t pool;
  Status e = hipDeviceGetDefaultMemPool(&pool, d);
  if (e != kSuccess) return e;
  uint64_t threshold = UINT64_MAX;
  return hipMemPoolSetAttribute(pool, hipMemPoolAttrReleaseThreshold, &threshold);
}
inline Status pool_release_cached(int d) {
  hipMemPool_t pool;
  Status e = hipDeviceGetDefaultMemPool(&pool, d);
  if (e != kSuccess) return e;
  return hipMemPoolTrimTo(pool, 0);
}
inline Status malloc_async(void** p, size_t n, Stream s) { return hipMallocAsync(p, n, s); }
inline Status mem_get_info(size_t* free, size_t* total) { return hipMemGetInfo(free, total); }
inline Status free_async(void* p, Stream s) { return hipFreeAsync(p, s); }
inline Status host_alloc_pinned(void** p, size_t n) { return hipHostMalloc(p, n, hipHostMallocDefault); }
inline Status host_free_pinned(void* p) { return hipHostFree(p); }

inline Status copy_h2d_async(void* dst, const void* src, size_t n, Stream s) {
  return hipMemcpyAsync(dst, src, n, hipMemcpyHostToDevice, s);
}
inline Status copy_d2h_async(void* dst, const void* src, size_t n, Stream s) {
  return hipMemcpyAsync(dst, src, n, hipMemcpyDeviceToHost, s);
}
inline Status copy_d2d_async(void* dst, const void* src, size_t n, Stream s) {
  return hipMemcpyAsync(dst, src, n, hipMemcpyDeviceToDevice, s);
}
inline Status copy2d_d2d_async(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                               Stream s) {
  return hipMemcpy2DAsync(dst, dpitch, src, spitch, width, height, hipMemcpyDeviceToDevice, s);
}
inline Status memset_async(void* p, int value, size_t n, Stream s) { return hipMemsetAsync(p, value, n, s); }

inline Status event_create(Event* e) { return hipEventCreate(e); }
// An event only waited on or queried, never timed: lighter to record.
inline Status event_create_untimed(Event* e) { return hipEventCreateWithFlags(e, hipEventDisableTiming); }
inline Status event_destroy(Event e) { return hipEventDestroy(e); }
inline Status event_record(Event e, Stream s) { return hipEventRecord(e, s); }
inline Status event_synchronize(Event e) { return hipEventSynchronize(e); }
// kSuccess once the work before e has finished, kNotReady while it runs, else an error.
inline Status event_query(Event e) { return hipEventQuery(e); }
inline constexpr Status kNotReady = hipErrorNotReady;
inline Status event_elapsed_ms(float* ms, Event a, Event b) { return hipEventElapsedTime(ms, a, b); }

// Stream capture (wick::Graph): the work queued on s between begin and end becomes a graph, not
// run. Thread-local mode: only this thread's calls that could break the capture are refused.
inline Status capture_begin(Stream s) { return hipStreamBeginCapture(s, hipStreamCaptureModeThreadLocal); }
inline Status capture_end(Stream s, GraphDef* g) { return hipStreamEndCapture(s, g); }
// Whether work queued on s now is being recorded (a capture is active on it).
inline bool capturing(Stream s) {
  hipStreamCaptureStatus status = hipStreamCaptureStatusNone;
  return hipStreamIsCapturing(s, &status) == hipSuccess && status == hipStreamCaptureStatusActive;
}
inline Status graph_instantiate(GraphExec* e, GraphDef g) { return hipGraphInstantiate(e, g, nullptr, nullptr, 0); }
inline Status graph_launch(GraphExec e, Stream s) { return hipGraphLaunch(e, s); }
inline Status graph_destroy(GraphDef g) { return hipGraphDestroy(g); }
inline Status graph_exec_destroy(GraphExec e) { return hipGraphExecDestroy(e); }

// ---- device side ------------------------------------------------------------------------------
// Shuffles within a logical warp of `width` lanes (at most 32): on 64-wide wavefronts each half
// is its own logical warp.
template <typename T>
__device__ inline T shfl(T v, int lane, int width) {
  return __shfl(v, lane, width);
}
template <typename T>
__device__ inline T shfl_down(T v, unsigned delta, int width) {
  return __shfl_down(v, delta, width);
}
template <typename T>
__device__ inline T shfl_xor(T v, int mask, int width) {
  return __shfl_xor(v, mask, width);
}

}  // namespace wick::gpu
