// Shared pieces of the GPU backend: the checking macro, the device-side error record, launch
// geometry and the device dispatch of kernels. Compiled by nvcc (CUDA) or hipcc (ROCm).
#pragma once

#include <algorithm>
#include <cstdint>

#include "backend/op.h"
#include "gpu/vendor.h"
#include "wick/error.h"

namespace wick::gpu {

// Throws wick::Error (OutOfMemoryError for an allocation failure) naming the call, where it was
// made and the vendor's message.
[[noreturn]] void throw_error(Status e, const char* call, const char* file, int line);

#define WICK_GPU_CHECK(call)                                              \
  do {                                                                    \
    ::wick::gpu::Status wick_gpu_err_ = (call);                           \
    if (wick_gpu_err_ != ::wick::gpu::kSuccess) [[unlikely]]              \
      ::wick::gpu::throw_error(wick_gpu_err_, #call, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: raises the launch's error, if any.
#define WICK_GPU_CHECK_LAUNCH() WICK_GPU_CHECK(::wick::gpu::last_error())

// An error found by a kernel (an index out of range), recorded in device memory and raised as
// IndexError at the next synchronisation. The first error wins.
struct KernelError {
  int32_t code;  // 0: none; OpCode + 1 of the op that found it; kPositionError: a KV-cache position
  int32_t dim;
  int64_t index;
  int64_t size;
  int32_t index_dtype;  // DType of the indices
};

// Records an error of kind `code` (KernelError::code) unless one is recorded already.
__device__ inline void report_error(KernelError* e, int32_t code, int dim, int64_t index, int64_t size,
                                    DType index_dtype) {
  if (atomicCAS(&e->code, 0, code) == 0) {
    e->dim = dim;
    e->index = index;
    e->size = size;
    e->index_dtype = static_cast<int32_t>(index_dtype);
  }
}

__device__ inline void report_index_error(KernelError* e, OpCode op, int dim, int64_t index, int64_t size,
                                          DType index_dtype) {
  report_error(e, static_cast<int32_t>(op) + 1, dim, index, size, index_dtype);
}

// A position outside a KV cache's capacity, found for KvCache::write_at (kPositionWrite),
// KvCache::rope_write_at (kPositionRope) or nn::paged_rope_write (kPositionPagedRope: a slot of the
// pool), kept in KernelError::dim.
inline constexpr int32_t kPositionError = -1;
inline constexpr int kPositionWrite = 0, kPositionRope = 1, kPositionPagedRope = 2;
__device__ inline void report_position_error(KernelError* e, int what, int64_t position, int64_t capacity) {
  report_error(e, kPositionError, what, position, capacity, DType::I64);
}

// An index of paged attention out of range, kept in KernelError::dim: 0 a token's sequence (size:
// the tables' rows), 1 its position (size: the positions a table row holds), 2 a block (size: the
// pool's blocks).
inline constexpr int32_t kPagedError = -2;
__device__ inline void report_paged_error(KernelError* e, int what, int64_t index, int64_t size) {
  report_error(e, kPagedError, what, index, size, DType::I32);
}

// A group of quant::qmatmul_grouped out of range, kept in KernelError::dim: 0 its expert (size: the
// experts), 1 its rows (index: the first or end row out of range; size: the rows of x); 2 and 3 the
// same of nn::matmul_grouped.
inline constexpr int32_t kGroupError = -3;
__device__ inline void report_group_error(KernelError* e, int what, int64_t index, int64_t size) {
  report_error(e, kGroupError, what, index, size, DType::I64);
}

// Writes `zero` into the rows of out (p rows of n values) that no group of `groups` (g rows of
// [expert, first row, end row)) names: the grouped products' rows outside every group, written by
// their own kernels so that no memset comes before them (in a recorded graph a node of its own,
// past which no kernel starts early). A group names its rows where its expert is in [0, experts)
// and 0 <= first <= end <= p: the groups the kernels compute. Each block takes the rows from its
// linear index on, every gridDim.x * gridDim.y, with its first 32 threads: they read the groups
// side by side and exchange what they found by shuffles, so there is no barrier. Called after the
// groups are ready (await_inputs), by blocks of at least 32 threads.
template <typename T>
__device__ void zero_rows_no_group_names(const int64_t* groups, int64_t g, int64_t experts, int64_t p, int64_t n,
                                         T* out, T zero) {
  constexpr int kCheckLanes = 32;
  if (threadIdx.x >= kCheckLanes) return;
  const int64_t blocks = int64_t{gridDim.x} * gridDim.y;
  for (int64_t r = int64_t{blockIdx.y} * gridDim.x + blockIdx.x; r < p; r += blocks) {
    int named = 0;
    for (int64_t i = threadIdx.x; i < g; i += kCheckLanes) {
      const int64_t e = groups[3 * i], first = groups[3 * i + 1], end = groups[3 * i + 2];
      named |= e >= 0 && e < experts && first >= 0 && first <= end && end <= p && first <= r && r < end;
    }
    for (int mask = 1; mask < kCheckLanes; mask *= 2) named |= shfl_xor(named, mask, kCheckLanes);
    if (named) continue;
    for (int64_t c = threadIdx.x; c < n; c += kCheckLanes) out[r * n + c] = zero;
  }
}

// A slot of nn::moe_combine outside the rows of y (size).
inline constexpr int32_t kCombineError = -4;
__device__ inline void report_combine_error(KernelError* e, int64_t slot, int64_t size) {
  report_error(e, kCombineError, 0, slot, size, DType::I64);
}

// ---- kernels that start early ------------------------------------------------------------------
// On NVIDIA GPUs from sm_90 a kernel launched by GpuBackend::launch_early may be placed on the device
// while the kernel before it on the stream still runs (programmatic dependent launch), so that its
// blocks are resident and set up when that kernel ends, not launched then. Such a kernel calls
// await_inputs() in every block, before it reads anything an earlier kernel wrote and before it
// writes anything; before it, it may only compute addresses and ask for prefetches (prefetch_l2).
// It then calls let_next_start(), which lets the next early kernel be placed in turn. Elsewhere
// (HIP, older devices, or launched as usual) both are no-ops.
__device__ __forceinline__ void await_inputs() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void let_next_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// The two in turn: a kernel with nothing to do before its inputs are ready calls this first.
__device__ __forceinline__ void start_after_inputs() {
  await_inputs();
  let_next_start();
}

// Asks for `bytes` of global memory from `p` (both multiples of 16) to be read into the L2 cache,
// without waiting for them (sm_90's bulk prefetch; elsewhere nothing). The cache is where every
// write lands, so a prefetch never yields stale data, even of memory a kernel still writes.
__device__ __forceinline__ void prefetch_l2(const void* p, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#else
  (void)p;
  (void)bytes;
#endif
}

// Threads per block of the elementwise kernels, and the largest grid of a grid-stride loop
// (blocks x threads stays far below 2^32, as AMD requires).
inline constexpr int kBlock = 256;
inline constexpr int64_t kMaxBlocks = 65535;

inline unsigned grid_for(int64_t work_items, int threads = kBlock) {
  return static_cast<unsigned>(std::clamp<int64_t>((work_items + threads - 1) / threads, 1, kMaxBlocks));
}

}  // namespace wick::gpu
