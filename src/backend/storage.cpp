#include "backend/storage.h"

#include <unistd.h>

#include "backend/backend.h"
#include "backend/nn_kernels.h"
#include "backend/quant_kernels.h"
#include "wick/error.h"

namespace wick {

Storage::~Storage() {
  if (backend_ && !borrowed_) backend_->release(data_, nbytes_);
}

Device Storage::device() const { return backend_->device(); }

DeviceMemory Backend::device_memory() {
  const auto page = static_cast<int64_t>(sysconf(_SC_PAGESIZE));
  return {static_cast<int64_t>(sysconf(_SC_AVPHYS_PAGES)) * page, static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * page};
}

StoragePtr Backend::alloc(DType dtype, int64_t numel) {
  int64_t bytes = 0;
  WICK_CHECK(numel >= 0 && !__builtin_mul_overflow(numel, dtype_size(dtype), &bytes) &&
                 static_cast<uint64_t>(bytes) <= kMaxAllocBytes,
             OutOfMemoryError, "alloc", "cannot allocate ", numel, " elements of ", dtype, " on ", name());
  return alloc(static_cast<size_t>(bytes));
}

bool default_supports(const Backend& backend, OpKey op, std::span<const DType> dtypes) {
  if (!op_defined(op, dtypes)) return false;
  if (op.code == OpCode::Quant) {
    const QuantKernels* q = backend.quant();
    return q != nullptr && q->supports(static_cast<QuantOp>(op.variant), dtypes[0]);
  }
  if (op.code != OpCode::Nn) return true;
  const NnKernels* nn = backend.nn();
  return nn != nullptr && nn->supports(static_cast<NnOp>(op.variant), dtypes[0]);
}

// A backend's kernels report what they lack in supports(); the front end never calls these then.
StoragePtr NnKernels::rope(const View&, const View&, const View&, RopePairs pairs, bool thd) const {
  const NnOp op = thd ? NnOp::RopeThd : pairs == RopePairs::Interleaved ? NnOp::RopeI : NnOp::Rope;
  throw NotSupportedError(detail::str_cat(OpKey(op).name(), ": this backend has no fused kernel"));
}

StoragePtr NnKernels::rope_write_at(const View&, const View&, const View&, const View&, const View&, RopePairs,
                                    const View&, const MutView&, const MutView&, bool) const {
  throw NotSupportedError(detail::str_cat(OpKey(NnOp::RopeWriteAt).name(), ": this backend has no fused kernel"));
}

StoragePtr NnKernels::rope_write_attention(const View&, const View&, const View&, const View&, const View&, RopePairs,
                                           const View&, const MutView&, const MutView&, int64_t, const View*,
                                           const AttentionArgs&) const {
  return nullptr;
}

void NnKernels::check_positions(const View&, int64_t, bool) const {}

StoragePtr NnKernels::attention(const View&, const View&, const View&, const View*, const AttentionArgs&) const {
  throw NotSupportedError(detail::str_cat(OpKey(NnOp::Attention).name(), ": this backend has no fused kernel"));
}

StoragePtr NnKernels::paged_attention(const View&, const View&, const View&, const View&, const View&, const View&,
                                      const AttentionArgs&) const {
  throw NotSupportedError(detail::str_cat(OpKey(NnOp::PagedAttention).name(), ": this backend has no fused kernel"));
}

StoragePtr NnKernels::quantize_q8_0(const View&) const { return nullptr; }

NnKernels::MoeRouteStorage NnKernels::moe_route(const View&, int64_t, bool) const { return {}; }

StoragePtr NnKernels::moe_combine(const View&, const View&, const View&, int64_t) const { return nullptr; }

StoragePtr NnKernels::matmul_grouped(const View&, const View&, int64_t, const View&, int64_t) const { return nullptr; }

void throw_not_supported(const Backend& backend, OpKey op, DType dtype) {
  throw NotSupportedError(detail::str_cat(op.name(), ": not supported for dtype ", dtype, " on ", backend.name()));
}

}  // namespace wick
