// silu(gate) * up, one parallel pass over any strided gate and up.
#include "core/dispatch.h"
#include "cpu/loops.h"
#include "cpu/nn/nn_kernels.h"
#include "kernels/nn.h"

namespace wick::cpu {

StoragePtr CpuNnKernels::silu_mul(const View& gate, const View& up) const {
  StoragePtr out = backend_.alloc(gate.dtype, gate.layout.numel());
  const Layout out_layout(gate.layout.shape());
  dispatch(gate.dtype, [&]<typename T>() {
    if constexpr (kernels::is_float_v<T>) {
      map_elementwise<kExpGrain>(
          [](T g, T u) {
            return kernels::from_opmath<T>(kernels::silu_mul_value(kernels::to_opmath(g), kernels::to_opmath(u)));
          },
          out->as<T>(), out_layout, operand<T>(gate), operand<T>(up));
    } else {
      throw_not_supported(backend_, NnOp::SiluMul, gate.dtype);
    }
  });
  return out;
}

}  // namespace wick::cpu
