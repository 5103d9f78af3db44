// silu(gate) * up through the elementwise engine: 16-byte packs where gate and up are dense, the
// strided kernel where they are, say, the two halves of one stacked product's rows.
#include "core/dispatch.h"
#include "gpu/elementwise.cuh"
#include "gpu/gpu_backend.h"
#include "gpu/nn/nn_kernels.h"
#include "kernels/nn.h"

namespace wick::gpu {

namespace {

template <typename T>
struct SiluMulFn {
  __device__ T operator()(T gate, T up) const {
    return kernels::from_opmath<T>(kernels::silu_mul_value(kernels::to_opmath(gate), kernels::to_opmath(up)));
  }
};

}  // namespace

StoragePtr GpuNnKernels::silu_mul(const View& gate, const View& up) const {
  GpuBackend& b = backend_;
  b.activate();
  StoragePtr out = b.alloc(gate.dtype, gate.layout.numel());
  const Layout out_layout(gate.layout.shape());
  dispatch(gate.dtype, [&]<typename T>() {
    if constexpr (kernels::is_float_v<T>) {
      map_elementwise(b, SiluMulFn<T>{}, out->as<T>(), out_layout, operand<T>(gate), operand<T>(up));
    } else {
      throw_not_supported(b, NnOp::SiluMul, gate.dtype);
    }
  });
  return out;
}

}  // namespace wick::gpu
