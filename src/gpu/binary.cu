// Binary ops, comparisons and where.
#include "backend/op_dispatch.h"
#include "core/dispatch.h"
#include "gpu/elementwise.cuh"
#include "gpu/gpu_backend.h"
#include "kernels/binary.h"

namespace wick::gpu {

namespace {

template <typename T, BinaryOp Op>
struct BinaryFn {
  __device__ T operator()(T a, T b) const {
    return kernels::from_opmath<T>(kernels::Binary<Op>{}(kernels::to_opmath(a), kernels::to_opmath(b)));
  }
};

template <typename T, CmpOp Op>
struct CmpFn {
  __device__ uint8_t operator()(T a, T b) const {
    return static_cast<uint8_t>(kernels::Cmp<Op>{}(kernels::to_opmath(a), kernels::to_opmath(b)));
  }
};

template <typename C, typename T>
struct WhereFn {
  __device__ T operator()(C c, T t, T f) const { return c != 0 ? t : f; }
};

}  // namespace

StoragePtr GpuBackend::binary(BinaryOp op, const View& a, const View& b) {
  activate();
  StoragePtr out = alloc(a.dtype, a.layout.numel());
  const Layout out_layout(a.layout.shape());
  dispatch(a.dtype, [&]<typename T>() {
    dispatch_binary(op, [&]<BinaryOp Op>() {
      map_elementwise(*this, BinaryFn<T, Op>{}, out->as<T>(), out_layout, operand<T>(a), operand<T>(b));
    });
  });
  return out;
}

StoragePtr GpuBackend::cmp(CmpOp op, const View& a, const View& b) {
  activate();
  StoragePtr out = alloc(DType::U8, a.layout.numel());
  const Layout out_layout(a.layout.shape());
  dispatch(a.dtype, [&]<typename T>() {
    dispatch_cmp(op, [&]<CmpOp Op>() {
      map_elementwise(*this, CmpFn<T, Op>{}, out->as<uint8_t>(), out_layout, operand<T>(a), operand<T>(b));
    });
  });
  return out;
}

StoragePtr GpuBackend::where(const View& cond, const View& on_true, const View& on_false) {
  activate();
  StoragePtr out = alloc(on_true.dtype, on_true.layout.numel());
  const Layout out_layout(on_true.layout.shape());
  dispatch(cond.dtype, [&]<typename C>() {
    if constexpr (std::is_integral_v<C>) {
      dispatch(on_true.dtype, [&]<typename T>() {
        map_elementwise(*this, WhereFn<C, T>{}, out->as<T>(), out_layout, operand<C>(cond), operand<T>(on_true),
                        operand<T>(on_false));
      });
    } else {
      throw_not_supported(*this, OpCode::Where, cond.dtype);
    }
  });
  return out;
}

}  // namespace wick::gpu
