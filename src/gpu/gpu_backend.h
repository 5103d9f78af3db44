// The GPU backend: one instance per device, compiled as CUDA (nvcc) or HIP (hipcc) from the same
// sources. Every op is queued on the device's one non-blocking stream and returns at once; index
// errors found by kernels are raised at the next synchronize() or to_host().
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/random_streams.h"
#include "gpu/gpu_api.h"
#include "gpu/nn/nn_kernels.h"
#include "gpu/quant/quant_kernels.h"
#include "gpu/runtime.h"

namespace wick::gpu {

class GpuBackend final : public Backend {
 public:
  explicit GpuBackend(int index);

  std::string name() const override;
  Device device() const override { return Device(kDeviceType, index_); }
  bool supports(OpKey op, std::span<const DType> dtypes) const override { return default_supports(*this, op, dtypes); }

  StoragePtr alloc(size_t nbytes) override;
  using Backend::alloc;
  StoragePtr from_host(const void* src, size_t nbytes) override;
  void to_host(const Storage& src, size_t byte_offset, size_t nbytes, void* dst) override;
  void synchronize() override;
  void release(void* data, size_t nbytes) noexcept override;
  void empty_cache() override;
  DeviceMemory device_memory() override;
  bool set_alloc_check(AllocCheck check) override;
  int64_t guard_violations() const override { return guard_violations_; }
  // Events recorded on the device's stream.
  std::unique_ptr<Timer> make_timer() override;
  // A CUDA or HIP graph of the ops `ops` queues on the stream (include/wick/graph.h): the returned
  // function launches it.
  std::function<void()> record(std::function<void()> ops);

  WICK_BACKEND_OP_OVERRIDES

  void set_seed(uint64_t seed) override;
  const NnKernels* nn() const override { return &nn_; }
  const QuantKernels* quant() const override { return &quant_; }
  // "conv": "gemm" (wick's own im2col + GEMM path) or "library" (cuDNN / MIOpen where it serves).
  // "attention": "library" (cuDNN's fused attention where it serves, else wick's own kernels; the
  // default), "own" (wick's kernels, on the matrix units where the device has them) or "rows"
  // (wick's kernels without the matrix units: the path of a device that has none).
  // "early_start": "on" (the default where the device can) or "off": the kernels of recorded graphs
  // written for it start while the kernel before them ends (GpuBackend::launch_early).
  // "qmatmul": "library" (the default: wick's choice by the rows of x), "tiles" (the matrix-unit
  // tile kernel wherever it applies, one row of x too) or "dot" (never the tile kernel: the integer
  // dot products up to 16 rows of x, dequantize and the GEMM past them).
  bool set_option(std::string_view key, std::string_view value) override;
  enum class AttentionPath { Library, Own, Rows };
  // The "attention" option, unless WICK_ATTENTION=own or rows in the environment forces one.
  AttentionPath attention_path() const;
  enum class QmatmulPath { Auto, Tiles, Dot };
  // The "qmatmul" option, unless WICK_QMATMUL=tiles or dot in the environment forces one.
  QmatmulPath qmatmul_path() const;

  // For the kernels of this backend.
  Stream stream() const { return stream_; }
  // Whether launch_early lets kernels of recorded graphs start early (DeviceProps::early_start),
  // unless the "early_start" option is "off" or WICK_EARLY_START=0 is in the environment.
  bool early_start() const { return early_start_; }
  // kernel<<<grid, block, shared, stream()>>>(args...), placed on the device while the kernel before
  // it still runs where early_start() and a graph is being recorded (Graph::record: where kernels
  // follow each other with no host between them); `kernel` must call await_inputs() (runtime.h) as
  // it says. Not once a library's kernel is in the recording (library_queued()): Llama 3 8B's bf16
  // decode, whose products are cuBLAS's, was 2-4% slower with kernels placed early everywhere, and
  // still 3-5% slower with only those right after cuBLAS's kernels started as usual, all of it from
  // the attention's combine kernel between two of cuBLAS's products (H200, docs/performance.md,
  // "Kernels that start early").
  template <typename... Params, typename... Args>
  void launch_early(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared, Args&&... args) const {
    const bool early = early_start_ && recording_.load(std::memory_order_relaxed) &&
                       !library_recorded_.load(std::memory_order_relaxed);
    WICK_GPU_CHECK(launch_kernel(early, kernel, grid, block, shared, stream_, std::forward<Args>(args)...));
  }
  // A library (cuBLAS, cuDNN) has queued work on the stream: in a recording, every launch_early after
  // it starts as usual.
  void library_queued() const {
    if (recording_.load(std::memory_order_relaxed)) library_recorded_.store(true, std::memory_order_relaxed);
  }
  KernelError* device_error() const { return device_error_; }
  const DeviceProps& props() const { return props_; }
  // Makes this backend's device current on the calling thread.
  void activate() const;
  // How many blocks of `threads` threads and `shared` bytes of dynamic shared memory of `kernel`
  // one multiprocessor of this device holds at once (at least 1); asked of the runtime once per
  // kernel and size, then remembered, so that launchers may ask on every call. A kernel that takes
  // more shared memory than the default limit must have had its limit raised
  // (kernel_set_shared_limit) before it is asked about: the runtime counts 0 blocks otherwise.
  int blocks_per_sm(const void* kernel, int threads, size_t shared) const;
  // The seed and a fresh stream number of the random generator.
  RandomStreams::Draw next_random_stream() { return random_.next(); }

 private:
  StoragePtr conv(const View& x, const View& k, const ConvParams& p, int spatial, bool transposed);
  // Waits for the stream, then raises a recorded kernel error as IndexError.
  void sync_and_raise();
  // An Error naming `op` while the stream is being recorded into a graph: `op` would copy between
  // host and device or wait for the device, which a graph cannot hold.
  void refuse_while_recording(const char* op);

  int index_;
  Stream stream_ = nullptr;
  DeviceProps props_;
  KernelError* device_error_ = nullptr;  // device memory
  KernelError* host_error_ = nullptr;    // pinned mirror
  // Host <-> device copies go through one pinned staging buffer; `staging_free_` marks when the
  // last copy out of it has finished.
  std::mutex staging_mutex_;
  void* staging_ = nullptr;
  size_t staging_bytes_ = 0;
  Event staging_free_ = nullptr;
  // Testing aid: guard sizes of guarded allocations.
  std::mutex check_mutex_;
  AllocCheck check_;
  std::map<void*, size_t> guarded_;
  int64_t guard_violations_ = 0;
  RandomStreams random_;
  // While record() runs: the allocations made since it began (the graph's own, freed in it), and the
  // ones made before it and released during it (freed when it ends, not by the graph, which would
  // free them on every replay). abandoned_: allocations of a discarded recording that outlived it;
  // the graph that owned their addresses is gone, so their release frees nothing.
  // The two flags let alloc and release skip the mutex when neither applies (nearly always).
  std::mutex record_mutex_;
  std::atomic<bool> recording_{false};
  std::atomic<bool> any_abandoned_{false};
  std::set<void*> recorded_;
  std::vector<void*> deferred_;
  std::set<void*> abandoned_;
  // The working memory of recordings (gpu_backend.cu): arena_ the one a recording takes its
  // allocations from, made anew, arena_wanted_ bytes, where a recording outgrew it.
  struct RecordArena;
  std::shared_ptr<RecordArena> arena_;
  size_t arena_wanted_ = size_t(64) << 20;
  size_t recording_live_ = 0, recording_peak_ = 0;  // bytes, the arena's and the pool's
  bool arena_short_ = false;                        // an allocation of this recording came from the pool
  // Recording: `nbytes` of the arena, or null where no free span holds them.
  void* arena_take(size_t nbytes);
  // Recording: gives `data` back to the arena if it came from there.
  bool arena_give(void* data);
  mutable std::mutex occupancy_mutex_;
  mutable std::map<std::tuple<const void*, int, size_t>, int> occupancy_;
  bool conv_own_path_ = false;
  AttentionPath attention_path_ = AttentionPath::Library;
  QmatmulPath qmatmul_path_ = QmatmulPath::Auto;
  bool early_start_ = false;
  mutable std::atomic<bool> library_recorded_{false};  // a library's kernel in the recording under way
  const GpuNnKernels nn_{*this};
  const GpuQuantKernels quant_{*this};
};

}  // namespace wick::gpu
