// The CPU backend's fused nn kernels (backend/nn_kernels.h): one file per op in this folder, each
// multithreaded over the slices it normalises (attention: over tiles of query rows).
#pragma once

#include "backend/nn_kernels.h"

namespace wick::cpu {

class CpuNnKernels final : public NnKernels {
 public:
  explicit CpuNnKernels(Backend& backend) : backend_(backend) {}

  // Every nn op, for every dtype it is defined for, but rope_write_at: on a CPU its composition
  // (rope, then the scatter of rows) costs what one pass would, with no launch to save; and the
  // mixture's moe_route, moe_combine and matmul_grouped, whose host compositions are the CPU's
  // kernels.
  bool supports(NnOp op, DType dtype) const override {
    return op != NnOp::RopeWriteAt && op != NnOp::MoeRoute && op != NnOp::MoeCombine && op != NnOp::MatmulGrouped &&
           op_defined(op, {&dtype, 1});
  }
  WICK_NN_KERNEL_OVERRIDES

 private:
  Backend& backend_;
};

}  // namespace wick::cpu
