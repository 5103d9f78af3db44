// The optional kernel interface of the nn wing: the fused transformer ops a backend implements
// (Backend::nn()). The front end (src/nn) has checked every argument, as for Backend methods, and
// calls a kernel only where supports() says it exists; elsewhere it composes the op from Backend
// methods. Inputs are strided Views; results are new contiguous storage.
#pragma once

#include "backend/backend.h"
#include "backend/op.h"

namespace wick {

class NnKernels {
 public:
  virtual ~NnKernels() = default;

  // Whether the fused kernel of `op` exists for `dtype` (never beyond op_defined).
  virtual bool supports(NnOp op, DType dtype) const = 0;

  // softmax of x along dim, or log_softmax when `log`; x's shape, computed in the dtype's math
  // type (f32 for halves) from the maximum of each slice.
  virtual StoragePtr softmax(const View& x, int dim, bool log) const = 0;
  // x (..., d) / sqrt(mean(x^2) + eps) * weight, over the last dim; weight (d).
  virtual StoragePtr rms_norm(const View& x, const View& weight, double eps) const = 0;
  // (x - mean) / sqrt(var + eps) * weight + bias over the last dim (biased variance); weight and
  // bias (d); bias null: none.
  virtual StoragePtr layer_norm(const View& x, const View& weight, const View* bias, double eps) const = 0;
};

}  // namespace wick
