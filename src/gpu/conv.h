// The GPU backend's convolutions: the vendor library (dnn_cuda.cu: cuDNN, dnn_rocm.cu: MIOpen)
// where it serves, wick's own im2col/col2im + GEMM (conv_gemm.cu) otherwise. All take 4-d views
// (the 1d ops insert a height of 1) and return the output of out_shape.
#pragma once

#include <string>

#include "backend/backend.h"
#include "backend/nn_params.h"

namespace wick::gpu {

class GpuBackend;

StoragePtr conv_gemm(GpuBackend& b, const View& x, const View& k, const ConvParams& p, bool transposed,
                     const Shape& out_shape);

// One convolution as the library sees it (4-d views), for error messages.
struct ConvCall {
  const char* op;  // the Backend op: "conv1d", "conv_transpose2d", ...
  const View& x;
  const View& k;
  const ConvParams& p;
};
// "conv2d: input [8, 64, 56, 56] (strides [...]) bf16, kernel [...], padding (1, 1), ..."
std::string describe(const ConvCall& c);

// Whether the library takes this convolution (dtype, layouts and parameters), and runs it; the
// run gives nullptr when the library declines it (no algorithm, or one that failed), and the
// caller takes wick's own path.
bool conv_library_supports(const View& x, const View& k, const ConvParams& p, bool transposed);
StoragePtr conv_library(GpuBackend& b, const ConvCall& call, bool transposed, const Shape& out_shape);

// WICK_CONV_LOG=1 (any value but "0"): the library's candidates, their times and why one was
// declined, one "wick conv: ..." line each on stderr. Both libraries log through these.
bool conv_log_enabled();
[[gnu::format(printf, 1, 2)]] void conv_log(const char* format, ...);
// Logs that wick's own path serves a convolution the library declined, and why.
void conv_log_declined(const ConvCall& c, const char* why);

}  // namespace wick::gpu
