// The GPU backend's fused nn kernels (backend/nn_kernels.h), one .cu file per op in this folder.
// Compiled by nvcc and hipcc alike; no kernel depends on the hardware's warp or wave size.
#pragma once

#include "backend/nn_kernels.h"

namespace wick::gpu {

class GpuBackend;

class GpuNnKernels final : public NnKernels {
 public:
  explicit GpuNnKernels(GpuBackend& backend) : backend_(backend) {}

  // Every nn op, for every dtype it is defined for.
  bool supports(NnOp op, DType dtype) const override { return op_defined(op, {&dtype, 1}); }
  WICK_NN_KERNEL_OVERRIDES
  StoragePtr rope_write_at(const View& q, const View& k, const View& v, const View& cos, const View& sin,
                           RopePairs pairs, const View& at, const MutView& k_cache, const MutView& v_cache,
                           bool paged) const override;
  StoragePtr rope_write_attention(const View& q, const View& k, const View& v, const View& cos, const View& sin,
                                  RopePairs pairs, const View& at, const MutView& k_cache, const MutView& v_cache,
                                  int64_t length, const View* mask, const AttentionArgs& args) const override;
  void check_positions(const View& at, int64_t capacity, bool rope) const override;
  MoeRouteStorage moe_route(const View& scores, int64_t k, bool renormalize) const override;
  StoragePtr moe_combine(const View& y, const View& weights, const View& slots, int64_t k) const override;
  StoragePtr matmul_grouped(const View& x, const View& w, int64_t experts, const View& groups,
                            int64_t max_rows) const override;

 private:
  GpuBackend& backend_;
};

}  // namespace wick::gpu
