// wick: one C++ tensor library, the same ops and answers on CPU, CUDA and ROCm.
#pragma once

#include "wick/device.h"
#include "wick/dtype.h"
#include "wick/error.h"
#include "wick/graph.h"
#include "wick/layout.h"
#include "wick/nn.h"
#include "wick/nn_options.h"
#include "wick/ops.h"
#include "wick/io.h"
#include "wick/quant.h"
#include "wick/scalar.h"
#include "wick/shape.h"
#include "wick/tensor.h"

namespace wick {

// "0.1.0"
const char* version();

}  // namespace wick
