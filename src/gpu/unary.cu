// Unary ops, affine, powf and elu.
#include "backend/op_dispatch.h"
#include "core/dispatch.h"
#include "gpu/elementwise.cuh"
#include "gpu/gpu_backend.h"
#include "kernels/cast.h"
#include "kernels/unary.h"

namespace wick::gpu {

namespace {

// f applied in the element type's math type.
template <typename T, typename F>
struct InOpmath {
  F f;
  __device__ T operator()(T v) const { return kernels::from_opmath<T>(f(kernels::to_opmath(v))); }
};

// Integer affine: in f64, back with the float -> int rules.
template <typename T>
struct IntAffine {
  kernels::Affine<double> f;
  __device__ T operator()(T v) const { return kernels::cast<T>(f(static_cast<double>(v))); }
};

template <typename T, typename F>
StoragePtr map1(GpuBackend& b, const View& x, const F& f) {
  StoragePtr out = b.alloc(x.dtype, x.layout.numel());
  map_elementwise(b, f, out->as<T>(), Layout(x.layout.shape()),
                  Operand<T>{static_cast<const T*>(x.storage.data()), &x.layout});
  return out;
}

}  // namespace

StoragePtr GpuBackend::unary(UnaryOp op, const View& x) {
  activate();
  return dispatch(x.dtype, [&]<typename T>() {
    return dispatch_unary(op, [&]<UnaryOp Op>() -> StoragePtr {
      if constexpr (kernels::is_float_v<T> || unary_defined_for_int(Op)) {
        return map1<T>(*this, x, InOpmath<T, kernels::Unary<Op>>{});
      } else {
        throw_not_supported(*this, Op, x.dtype);
      }
    });
  });
}

StoragePtr GpuBackend::affine(const View& x, double mul, double add) {
  activate();
  return dispatch(x.dtype, [&]<typename T>() {
    if constexpr (kernels::is_float_v<T>) {
      using M = kernels::opmath_t<T>;
      return map1<T>(*this, x, InOpmath<T, kernels::Affine<M>>{{M(mul), M(add)}});
    } else {
      return map1<T>(*this, x, IntAffine<T>{{mul, add}});
    }
  });
}

StoragePtr GpuBackend::powf(const View& x, double exponent) {
  activate();
  return dispatch(x.dtype, [&]<typename T>() -> StoragePtr {
    using M = kernels::opmath_t<T>;
    if constexpr (kernels::is_float_v<T>)
      return map1<T>(*this, x, InOpmath<T, kernels::Powf<M>>{{M(exponent)}});
    else
      throw_not_supported(*this, OpCode::Powf, x.dtype);
  });
}

StoragePtr GpuBackend::elu(const View& x, double alpha) {
  activate();
  return dispatch(x.dtype, [&]<typename T>() -> StoragePtr {
    using M = kernels::opmath_t<T>;
    if constexpr (kernels::is_float_v<T>)
      return map1<T>(*this, x, InOpmath<T, kernels::Elu<M>>{{M(alpha)}});
    else
      throw_not_supported(*this, OpCode::Elu, x.dtype);
  });
}

}  // namespace wick::gpu
