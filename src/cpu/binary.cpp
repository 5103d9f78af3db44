// Binary ops, comparisons and where.
#include "kernels/binary.h"

#include "backend/op_dispatch.h"
#include "core/dispatch.h"
#include "cpu/cpu_backend.h"
#include "cpu/loops.h"

namespace wick::cpu {

StoragePtr CpuBackend::binary(BinaryOp op, const View& a, const View& b) {
  StoragePtr out = alloc(a.dtype, a.layout.numel());
  Layout out_layout(a.layout.shape());
  dispatch(a.dtype, [&]<typename T>() {
    dispatch_binary(op, [&]<BinaryOp Op>() {
      kernels::Binary<Op> f;
      map_elementwise(
          [f](T x, T y) { return kernels::from_opmath<T>(f(kernels::to_opmath(x), kernels::to_opmath(y))); },
          out->as<T>(), out_layout, operand<T>(a), operand<T>(b));
    });
  });
  return out;
}

StoragePtr CpuBackend::cmp(CmpOp op, const View& a, const View& b) {
  StoragePtr out = alloc(DType::U8, a.layout.numel());
  Layout out_layout(a.layout.shape());
  dispatch(a.dtype, [&]<typename T>() {
    dispatch_cmp(op, [&]<CmpOp Op>() {
      kernels::Cmp<Op> f;
      map_elementwise([f](T x, T y) { return static_cast<uint8_t>(f(kernels::to_opmath(x), kernels::to_opmath(y))); },
                      out->as<uint8_t>(), out_layout, operand<T>(a), operand<T>(b));
    });
  });
  return out;
}

StoragePtr CpuBackend::where(const View& cond, const View& on_true, const View& on_false) {
  StoragePtr out = alloc(on_true.dtype, on_true.layout.numel());
  Layout out_layout(on_true.layout.shape());
  dispatch(cond.dtype, [&]<typename C>() {
    if constexpr (std::is_integral_v<C>) {
      dispatch(on_true.dtype, [&]<typename T>() {
        map_elementwise([](C c, T t, T f) { return c != 0 ? t : f; }, out->as<T>(), out_layout, operand<C>(cond),
                        operand<T>(on_true), operand<T>(on_false));
      });
    } else {
      throw_not_supported(*this, OpCode::Where, cond.dtype);
    }
  });
  return out;
}

}  // namespace wick::cpu
