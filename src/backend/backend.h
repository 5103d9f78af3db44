// The Backend interface: one virtual method per op, named after Candle's BackendStorage trait.
//
// The front end (src/ops) has already checked every argument when a method is called: dtypes
// match, shapes agree, dims are in range, broadcasting is done (stride-0 layouts). A method reads
// any strided View and returns new contiguous storage, or writes in place into a MutView; it
// checks only what needs the data (index ranges). Methods may run asynchronously: a GPU backend
// returns as soon as the work is queued, and raises device-side errors at the next
// synchronize() or to_host().
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "backend/nn_params.h"
#include "backend/op.h"
#include "backend/storage.h"
#include "wick/dtype.h"
#include "wick/layout.h"
#include "wick/scalar.h"

namespace wick {

// A strided view of a Storage holding elements of `dtype`.
struct View {
  const Storage& storage;
  const Layout& layout;
  DType dtype;
};

struct MutView {
  Storage& storage;
  const Layout& layout;
  DType dtype;
};

// copy2d: `rows` rows of `cols` elements, row i of src at src_offset + i * src_stride.
struct Copy2dParams {
  int64_t rows, cols;
  int64_t src_stride, dst_stride;
  int64_t src_offset, dst_offset;
};

// Testing aid: allocations filled with a poison pattern, and guard bytes around each one that
// are checked when it is freed.
struct AllocCheck {
  bool poison = false;
  size_t guard_bytes = 0;
};

// Times the work a backend runs between start() and stop(): events on the device's stream for a
// GPU (so the host's queueing is not counted), a steady clock for backends that run ops
// synchronously. elapsed_ms() waits for that work; a timer may be started again.
class Timer {
 public:
  virtual ~Timer() = default;
  virtual void start() = 0;
  virtual void stop() = 0;
  virtual double elapsed_ms() = 0;
};

// No allocation is larger: it keeps size arithmetic inside backends (rounding, guards, size
// classes) far from overflow, and is far above any device's memory.
inline constexpr size_t kMaxAllocBytes = size_t(1) << 56;

class NnKernels;
class QuantKernels;

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;  // "cpu", "cuda:0", "reference"
  virtual Device device() const = 0;
  // Whether this backend implements `op` for these dtypes (see op_dtype_arity for what the list
  // holds). Never true where op_defined is false.
  virtual bool supports(OpKey op, std::span<const DType> dtypes) const = 0;

  // ---- memory -----------------------------------------------------------------------------
  // Contents undefined. OutOfMemoryError, at once, when the memory cannot be had (sizes past
  // kMaxAllocBytes are refused before asking the system).
  virtual StoragePtr alloc(size_t nbytes) = 0;
  // numel elements of dtype; OutOfMemoryError when their byte count does not fit.
  StoragePtr alloc(DType dtype, int64_t numel);
  virtual StoragePtr from_host(const void* src, size_t nbytes) = 0;
  // Copies nbytes starting at byte_offset of `src` to host memory; waits for queued work.
  virtual void to_host(const Storage& src, size_t byte_offset, size_t nbytes, void* dst) = 0;
  virtual void synchronize() = 0;
  // Frees memory made by alloc (called by ~Storage; never throws).
  virtual void release(void* data, size_t nbytes) noexcept = 0;
  // The bytes alloc has handed out and release not yet had back: now, and the most at once since
  // the backend was made or reset_peak_memory. A backend counts them in its alloc and release.
  MemoryUse memory_use() const { return {in_use_.load(), peak_.load()}; }
  void reset_peak_memory() { peak_.store(in_use_.load()); }
  // Sets a backend-specific option (such as the GPU's "conv" path); false if the backend has no
  // such option or value.
  virtual bool set_option(std::string_view key, std::string_view value) {
    (void)key;
    (void)value;
    return false;
  }
  // Gives memory the backend keeps for reuse back to the system.
  virtual void empty_cache() {}
  // wick::device_memory's free and total bytes: the host's physical memory unless overridden.
  virtual DeviceMemory device_memory();
  // Turns the testing aid on or off; returns false if the backend has none. guard_violations
  // counts freed allocations whose guard bytes had changed.
  virtual bool set_alloc_check(AllocCheck check) {
    (void)check;
    return false;
  }
  virtual int64_t guard_violations() const { return 0; }
  // A timer of this backend's work (wick bench).
  virtual std::unique_ptr<Timer> make_timer() = 0;

  // ---- copies -----------------------------------------------------------------------------
  // Writes src into dst (same shape and dtype; dst any layout without self-overlap).
  virtual void copy_strided(const View& src, const MutView& dst) = 0;
  virtual void copy2d(const Storage& src, Storage& dst, DType dtype, const Copy2dParams& p) = 0;
  // Writes `value` (converted to dst.dtype) to every element of dst.
  virtual void const_set(const MutView& dst, Scalar value) = 0;

  // ---- elementwise ------------------------------------------------------------------------
  virtual StoragePtr cast(const View& x, DType to) = 0;
  virtual StoragePtr affine(const View& x, double mul, double add) = 0;
  virtual StoragePtr powf(const View& x, double exponent) = 0;
  virtual StoragePtr elu(const View& x, double alpha) = 0;
  virtual StoragePtr unary(UnaryOp op, const View& x) = 0;
  // a and b have the same shape and dtype.
  virtual StoragePtr binary(BinaryOp op, const View& a, const View& b) = 0;
  virtual StoragePtr cmp(CmpOp op, const View& a, const View& b) = 0;  // -> u8
  // All three have one shape; on_true and on_false one dtype.
  virtual StoragePtr where(const View& cond, const View& on_true, const View& on_false) = 0;

  // ---- reductions -------------------------------------------------------------------------
  // Output has x's shape with every reduced dim set to 1. dims: sorted, unique, non-empty,
  // none of size 0 for min/max/argmin/argmax; exactly one for argmin/argmax (-> u32).
  virtual StoragePtr reduce(ReduceOp op, const View& x, std::span<const int> dims) = 0;
  // Inclusive prefix sum along dim.
  virtual StoragePtr cumsum(const View& x, int dim) = 0;
  // Stable sort of the last dim -> u32 indices.
  virtual StoragePtr argsort(const View& x, bool ascending) = 0;

  // ---- indexing ---------------------------------------------------------------------------
  // Index dtypes: is_index_dtype. The dtype's maximum value skips (gather/index_select write 0,
  // the others leave dst alone); any other index outside [0, size) raises IndexError and, for
  // the in-place ops, leaves dst unchanged.
  //
  // out = ids.shape; out[..i..] = x[.. ids[..i..] at dim ..]. ids and x agree except at dim.
  virtual StoragePtr gather(const View& x, const View& ids, int dim) = 0;
  // dst[.. ids[..i..] at dim ..] = src[..i..]. ids.shape == src.shape; dst agrees except at dim.
  // Where several elements land on one, the last along dim wins.
  virtual void scatter_set(const MutView& dst, const View& ids, const View& src, int dim) = 0;
  virtual void scatter_add_set(const MutView& dst, const View& ids, const View& src, int dim) = 0;
  // ids of rank 1; out = x.shape with dim replaced by ids' length.
  virtual StoragePtr index_select(const View& x, const View& ids, int dim) = 0;
  // out = x, then out[.. ids[j] at dim ..] += src[.. j at dim ..]; ids of rank 1.
  virtual StoragePtr index_add(const View& x, const View& ids, const View& src, int dim) = 0;

  // ---- matmul, convolution, pooling, upsampling ---------------------------------------------
  // a (..., m, k) times b (..., k, n) -> (..., m, n). The batch dims of a and b are equal (the
  // front end broadcast them: stride 0 is common); any strides are accepted.
  virtual StoragePtr matmul(const View& a, const View& b) = 0;
  // x (N, C_in, L) with k (C_out, C_in / groups, K) -> (N, C_out, L_out); parameters in axis 0.
  virtual StoragePtr conv1d(const View& x, const View& k, const ConvParams& p) = 0;
  // x (N, C_in, L) with k (C_in, C_out / groups, K) -> (N, C_out, L_out).
  virtual StoragePtr conv_transpose1d(const View& x, const View& k, const ConvParams& p) = 0;
  // x (N, C_in, H, W) with k (C_out, C_in / groups, KH, KW) -> (N, C_out, H_out, W_out).
  virtual StoragePtr conv2d(const View& x, const View& k, const ConvParams& p) = 0;
  // x (N, C_in, H, W) with k (C_in, C_out / groups, KH, KW) -> (N, C_out, H_out, W_out).
  virtual StoragePtr conv_transpose2d(const View& x, const View& k, const ConvParams& p) = 0;
  // x (N, C, H, W) -> (N, C, H_out, W_out): window means (divided by kh * kw) and maxima
  // (NaN propagates).
  virtual StoragePtr avg_pool2d(const View& x, const PoolParams& p) = 0;
  virtual StoragePtr max_pool2d(const View& x, const PoolParams& p) = 0;
  // x (N, C, L) -> (N, C, out_l): out[i] = x[min(L - 1, floor(i * L / out_l))].
  virtual StoragePtr upsample_nearest1d(const View& x, int64_t out_l) = 0;
  // x (N, C, H, W) -> (N, C, out_h, out_w), the same rule along each axis.
  virtual StoragePtr upsample_nearest2d(const View& x, int64_t out_h, int64_t out_w) = 0;
  virtual StoragePtr upsample_bilinear2d(const View& x, const BilinearParams& p) = 0;

  // ---- the nn wing ---------------------------------------------------------------------------
  // This backend's fused transformer kernels (backend/nn_kernels.h), or null: the front end then
  // composes every nn op from the methods above.
  virtual const NnKernels* nn() const { return nullptr; }

  // ---- quantized weights -----------------------------------------------------------------------
  // This backend's kernels for the GGUF block formats (backend/quant_kernels.h), or null: the front
  // end then dequantizes on the host and multiplies with matmul.
  virtual const QuantKernels* quant() const { return nullptr; }

  // ---- random -----------------------------------------------------------------------------
  // Philox4x32-10 (src/kernels/philox.h): each call consumes one stream of the generator.
  virtual StoragePtr rand_uniform(const Shape& shape, DType dtype, double lo, double up) = 0;
  virtual StoragePtr rand_normal(const Shape& shape, DType dtype, double mean, double std) = 0;
  virtual void set_seed(uint64_t seed) = 0;

 protected:
  void count_alloc(size_t nbytes) {
    const int64_t now = in_use_.fetch_add(static_cast<int64_t>(nbytes)) + static_cast<int64_t>(nbytes);
    for (int64_t peak = peak_.load(); now > peak && !peak_.compare_exchange_weak(peak, now);) {
    }
  }
  void count_release(size_t nbytes) { in_use_.fetch_sub(static_cast<int64_t>(nbytes)); }

 private:
  std::atomic<int64_t> in_use_{0}, peak_{0};
};

// The op methods above as one list of declarations, for the backends to declare their overrides
// in one line (WICK_BACKEND_OP_OVERRIDES in the class body); `override` checks every one against
// Backend. Memory, seeding and options stay written out in each backend.
#define WICK_BACKEND_OP_OVERRIDES \
  void copy_strided(const View& src, const MutView& dst) override; \
  void copy2d(const Storage& src, Storage& dst, DType dtype, const Copy2dParams& p) override; \
  void const_set(const MutView& dst, Scalar value) override; \
  StoragePtr cast(const View& x, DType to) override; \
  StoragePtr affine(const View& x, double mul, double add) override; \
  StoragePtr powf(const View& x, double exponent) override; \
  StoragePtr elu(const View& x, double alpha) override; \
  StoragePtr unary(UnaryOp op, const View& x) override; \
  StoragePtr binary(BinaryOp op, const View& a, const View& b) override; \
  StoragePtr cmp(CmpOp op, const View& a, const View& b) override; \
  StoragePtr where(const View& cond, const View& on_true, const View& on_false) override; \
  StoragePtr reduce(ReduceOp op, const View& x, std::span<const int> dims) override; \
  StoragePtr cumsum(const View& x, int dim) override; \
  StoragePtr argsort(const View& x, bool ascending) override; \
  StoragePtr gather(const View& x, const View& ids, int dim) override; \
  void scatter_set(const MutView& dst, const View& ids, const View& src, int dim) override; \
  void scatter_add_set(const MutView& dst, const View& ids, const View& src, int dim) override; \
  StoragePtr index_select(const View& x, const View& ids, int dim) override; \
  StoragePtr index_add(const View& x, const View& ids, const View& src, int dim) override; \
  StoragePtr matmul(const View& a, const View& b) override; \
  StoragePtr conv1d(const View& x, const View& k, const ConvParams& p) override; \
  StoragePtr conv_transpose1d(const View& x, const View& k, const ConvParams& p) override; \
  StoragePtr conv2d(const View& x, const View& k, const ConvParams& p) override; \
  StoragePtr conv_transpose2d(const View& x, const View& k, const ConvParams& p) override; \
  StoragePtr avg_pool2d(const View& x, const PoolParams& p) override; \
  StoragePtr max_pool2d(const View& x, const PoolParams& p) override; \
  StoragePtr upsample_nearest1d(const View& x, int64_t out_l) override; \
  StoragePtr upsample_nearest2d(const View& x, int64_t out_h, int64_t out_w) override; \
  StoragePtr upsample_bilinear2d(const View& x, const BilinearParams& p) override; \
  StoragePtr rand_uniform(const Shape& shape, DType dtype, double lo, double up) override; \
  StoragePtr rand_normal(const Shape& shape, DType dtype, double mean, double std) override;

// What Backend::supports answers for a backend whose methods cover op_defined: that, and for
// the nn family whether nn() has the fused kernel.
bool default_supports(const Backend& backend, OpKey op, std::span<const DType> dtypes);

// Raised by a backend method called with dtypes it does not implement (the front end asks
// supports() first, so users see this only when calling a backend directly).
[[noreturn]] void throw_not_supported(const Backend& backend, OpKey op, DType dtype);

// The timer of a backend whose ops run synchronously on the host: a steady clock, with
// backend.synchronize() at start and stop.
std::unique_ptr<Timer> make_host_timer(Backend& backend);

}  // namespace wick
