// The GPU backend's fused nn kernels (backend/nn_kernels.h), one .cu file per op in this folder.
// Compiled by nvcc and hipcc alike; no kernel depends on the hardware's warp or wave size.
#pragma once

#include "backend/nn_kernels.h"

namespace wick::gpu {

class GpuBackend;

class GpuNnKernels final : public NnKernels {
 public:
  explicit GpuNnKernels(GpuBackend& backend) : backend_(backend) {}

  bool supports(NnOp op, DType dtype) const override {
    return op_defined(op, {&dtype, 1}) &&
           (op == NnOp::Softmax || op == NnOp::LogSoftmax || op == NnOp::RmsNorm || op == NnOp::LayerNorm ||
            op == NnOp::Rope || op == NnOp::RopeI || op == NnOp::RopeThd || op == NnOp::Attention);
  }
  StoragePtr softmax(const View& x, int dim, bool log) const override;
  StoragePtr rms_norm(const View& x, const View& weight, double eps) const override;
  StoragePtr layer_norm(const View& x, const View& weight, const View* bias, double eps) const override;
  StoragePtr rope(const View& x, const View& cos, const View& sin, RopePairs pairs, bool thd) const override;
  StoragePtr attention(const View& q, const View& k, const View& v, const View* mask,
                       const AttentionArgs& args) const override;

 private:
  GpuBackend& backend_;
};

}  // namespace wick::gpu
