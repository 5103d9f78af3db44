// The CUDA side of wick's GPU layer: the only header (with blas_* and dnn_*) that names the CUDA
// runtime. Everything else calls the wick::gpu names defined here and in hip.h.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <utility>

#include "wick/device.h"

namespace wick::gpu {

inline constexpr DeviceType kDeviceType = DeviceType::Cuda;
inline constexpr const char* kVendor = "CUDA";

using Status = cudaError_t;
using Stream = cudaStream_t;
using Event = cudaEvent_t;
using GraphDef = cudaGraph_t;
using GraphExec = cudaGraphExec_t;
inline constexpr Status kSuccess = cudaSuccess;

inline bool is_out_of_memory(Status e) { return e == cudaErrorMemoryAllocation; }
inline const char* error_string(Status e) { return cudaGetErrorString(e); }
inline Status last_error() { return cudaGetLastError(); }

inline Status device_count(int* n) { return cudaGetDeviceCount(n); }
inline Status set_device(int d) { return cudaSetDevice(d); }
inline Status get_device(int* d) { return cudaGetDevice(d); }
inline Status device_synchronize() { return cudaDeviceSynchronize(); }
// "CUDA driver 13.0, runtime 13.0": the CUDA version the driver supports and the one linked.
inline Status driver_version(std::string* out) {
  int driver = 0, runtime = 0;
  Status e = cudaDriverGetVersion(&driver);
  if (e == kSuccess) e = cudaRuntimeGetVersion(&runtime);
  if (e != kSuccess) return e;
  auto text = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
  *out = "CUDA driver " + text(driver) + ", runtime " + text(runtime);
  return kSuccess;
}

struct DeviceProps {
  std::string name;
  std::string arch;  // "sm_90"
  size_t total_memory = 0;
  int warp_size = 32;
  int multiprocessors = 0;
  size_t l2_bytes = 0;
  size_t shared_per_block = 0;
  size_t shared_per_block_optin = 0;  // the most a kernel may ask for (kernel_set_shared_limit)
  // sm_90 and later: a kernel launched with launch_kernel(early = true) may start while the kernel
  // before it on the stream ends (programmatic dependent launch).
  bool early_start = false;
};

inline Status device_props(int d, DeviceProps* out) {
  cudaDeviceProp p;
  Status e = cudaGetDeviceProperties(&p, d);
  if (e != kSuccess) return e;
  out->name = p.name;
  out->arch = "sm_" + std::to_string(p.major) + std::to_string(p.minor);
  out->total_memory = p.totalGlobalMem;
  out->warp_size = p.warpSize;
  out->multiprocessors = p.multiProcessorCount;
  out->l2_bytes = static_cast<size_t>(p.l2CacheSize);
  out->shared_per_block = p.sharedMemPerBlock;
  out->shared_per_block_optin = p.sharedMemPerBlockOptin;
  out->early_start = p.major >= 9;
  return kSuccess;
}

// Lets kernel `f` take up to `bytes` of dynamic shared memory (beyond shared_per_block).
inline Status kernel_set_shared_limit(const void* f, int bytes) {
  return cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

// How many blocks of `block` threads and `shared` bytes of dynamic shared memory of kernel `f`
// one multiprocessor holds at once.
inline Status kernel_blocks_per_sm(int* n, const void* f, int block, size_t shared) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(n, f, block, shared);
}

// kernel<<<grid, block, shared, s>>>(args...). With `early` (a device whose DeviceProps::early_start
// is true), the kernel may be placed on the device while the kernel before it on s still runs: it
// must be one that calls await_inputs() (runtime.h) before it reads what an earlier kernel wrote or
// writes anything.
template <typename... Params, typename... Args>
inline Status launch_kernel(bool early, void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared, Stream s,
                            Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared;
  config.stream = s;
  config.attrs = &attribute;
  config.numAttrs = early ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

inline Status stream_create(Stream* s) { return cudaStreamCreateWithFlags(s, cudaStreamNonBlocking); }
inline Status stream_synchronize(Stream s) { return cudaStreamSynchronize(s); }

// The device's stream-ordered pool keeps freed memory (release threshold: never).
inline Status pool_keep_memory(int d) {
  cudaMemPool_t pool;
  Status e = cudaDeviceGetDefaultMemPool(&pool, d);
  if (e != kSuccess) return e;
  uint64_t threshold = UINT64_MAX;
  return cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
}
inline Status pool_release_cached(int d) {
  cudaMemPool_t pool;
  Status e = cudaDeviceGetDefaultMemPool(&pool, d);
  if (e != kSuccess) return e;
  return cudaMemPoolTrimTo(pool, 0);
}
inline Status malloc_async(void** p, size_t n, Stream s) { return cudaMallocAsync(p, n, s); }
inline Status mem_get_info(size_t* free, size_t* total) { return cudaMemGetInfo(free, total); }
inline Status free_async(void* p, Stream s) { return cudaFreeAsync(p, s); }
inline Status host_alloc_pinned(void** p, size_t n) { return cudaMallocHost(p, n); }
inline Status host_free_pinned(void* p) { return cudaFreeHost(p); }

inline Status copy_h2d_async(void* dst, const void* src, size_t n, Stream s) {
  return cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s);
}
inline Status copy_d2h_async(void* dst, const void* src, size_t n, Stream s) {
  return cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, s);
}
inline Status copy_d2d_async(void* dst, const void* src, size_t n, Stream s) {
  return cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s);
}
inline Status copy2d_d2d_async(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                               Stream s) {
  return cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, cudaMemcpyDeviceToDevice, s);
}
inline Status memset_async(void* p, int value, size_t n, Stream s) { return cudaMemsetAsync(p, value, n, s); }

inline Status event_create(Event* e) { return cudaEventCreate(e); }
// An event only waited on or queried, never timed: lighter to record.
inline Status event_create_untimed(Event* e) { return cudaEventCreateWithFlags(e, cudaEventDisableTiming); }
inline Status event_destroy(Event e) { return cudaEventDestroy(e); }
inline Status event_record(Event e, Stream s) { return cudaEventRecord(e, s); }
inline Status event_synchronize(Event e) { return cudaEventSynchronize(e); }
// kSuccess once the work before e has finished, kNotReady while it runs, else an error.
inline Status event_query(Event e) { return cudaEventQuery(e); }
inline constexpr Status kNotReady = cudaErrorNotReady;
inline Status event_elapsed_ms(float* ms, Event a, Event b) { return cudaEventElapsedTime(ms, a, b); }

// Stream capture (wick::Graph): the work queued on s between begin and end becomes a graph, not
// run. Thread-local mode: only this thread's calls that could break the capture are refused.
inline Status capture_begin(Stream s) { return cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal); }
inline Status capture_end(Stream s, GraphDef* g) { return cudaStreamEndCapture(s, g); }
// Whether work queued on s now is being recorded (a capture is active on it).
inline bool capturing(Stream s) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(s, &status) == cudaSuccess && status == cudaStreamCaptureStatusActive;
}
inline Status graph_instantiate(GraphExec* e, GraphDef g) { return cudaGraphInstantiate(e, g, 0); }
inline Status graph_launch(GraphExec e, Stream s) { return cudaGraphLaunch(e, s); }
inline Status graph_destroy(GraphDef g) { return cudaGraphDestroy(g); }
inline Status graph_exec_destroy(GraphExec e) { return cudaGraphExecDestroy(e); }

// ---- device side ------------------------------------------------------------------------------
// Shuffles within a logical warp of `width` lanes (at most 32): correct on 32- and 64-wide
// hardware alike.
template <typename T>
__device__ inline T shfl(T v, int lane, int width) {
  return __shfl_sync(0xffffffffu, v, lane, width);
}
template <typename T>
__device__ inline T shfl_down(T v, unsigned delta, int width) {
  return __shfl_down_sync(0xffffffffu, v, delta, width);
}
template <typename T>
__device__ inline T shfl_xor(T v, int mask, int width) {
  return __shfl_xor_sync(0xffffffffu, v, mask, width);
}

}  // namespace wick::gpu
