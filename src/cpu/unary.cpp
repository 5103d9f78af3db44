// Unary ops, affine, powf and elu.
#include "kernels/unary.h"

#include "backend/op_dispatch.h"
#include "core/dispatch.h"
#include "cpu/cpu_backend.h"
#include "cpu/loops.h"
#include "kernels/cast.h"
#include "wick/error.h"

namespace wick::cpu {

namespace {

// out = f(x) in x's math type, over a new contiguous tensor of x's shape and dtype.
template <typename T, typename F>
StoragePtr map_opmath(Backend& b, const View& x, const F& f) {
  StoragePtr out = b.alloc(x.dtype, x.layout.numel());
  map_elementwise([&](T v) { return kernels::from_opmath<T>(f(kernels::to_opmath(v))); }, out->as<T>(),
                  Layout(x.layout.shape()), operand<T>(x));
  return out;
}

}  // namespace

StoragePtr CpuBackend::unary(UnaryOp op, const View& x) {
  return dispatch(x.dtype, [&]<typename T>() {
    return dispatch_unary(op, [&]<UnaryOp Op>() -> StoragePtr {
      if constexpr (kernels::is_float_v<T> || unary_defined_for_int(Op)) {
        return map_opmath<T>(*this, x, kernels::Unary<Op>{});
      } else {
        throw_not_supported(*this, Op, x.dtype);
      }
    });
  });
}

StoragePtr CpuBackend::affine(const View& x, double mul, double add) {
  return dispatch(x.dtype, [&]<typename T>() {
    if constexpr (kernels::is_float_v<T>) {
      using M = kernels::opmath_t<T>;
      return map_opmath<T>(*this, x, kernels::Affine<M>{M(mul), M(add)});
    } else {  // integers: in f64, back with the float -> int rules
      kernels::Affine<double> f{mul, add};
      return map_opmath<T>(*this, x, [f](T v) { return kernels::cast<T>(f(static_cast<double>(v))); });
    }
  });
}

StoragePtr CpuBackend::powf(const View& x, double exponent) {
  return dispatch(x.dtype, [&]<typename T>() -> StoragePtr {
    using M = kernels::opmath_t<T>;
    if constexpr (kernels::is_float_v<T>)
      return map_opmath<T>(*this, x, kernels::Powf<M>{M(exponent)});
    else
      throw_not_supported(*this, OpCode::Powf, x.dtype);
  });
}

StoragePtr CpuBackend::elu(const View& x, double alpha) {
  return dispatch(x.dtype, [&]<typename T>() -> StoragePtr {
    using M = kernels::opmath_t<T>;
    if constexpr (kernels::is_float_v<T>)
      return map_opmath<T>(*this, x, kernels::Elu<M>{M(alpha)});
    else
      throw_not_supported(*this, OpCode::Elu, x.dtype);
  });
}

}  // namespace wick::cpu
