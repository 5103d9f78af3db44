// The GPU backend's convolutions: the vendor library (dnn_cuda.cu: cuDNN, dnn_rocm.cu: MIOpen)
// where it serves, wick's own im2col/col2im + GEMM (conv_gemm.cu) otherwise. All take 4-d views
// (the 1d ops insert a height of 1) and return the output of out_shape.
#pragma once

#include "backend/backend.h"
#include "backend/nn_params.h"

namespace wick::gpu {

class GpuBackend;

StoragePtr conv_gemm(GpuBackend& b, const View& x, const View& k, const ConvParams& p, bool transposed,
                     const Shape& out_shape);

// Whether the library takes this convolution (dtype, layouts and parameters), and runs it; the
// run gives nullptr when the library finds no algorithm for it.
bool conv_library_supports(const View& x, const View& k, const ConvParams& p, bool transposed);
StoragePtr conv_library(GpuBackend& b, const View& x, const View& k, const ConvParams& p, bool transposed,
                        const Shape& out_shape);

}  // namespace wick::gpu
