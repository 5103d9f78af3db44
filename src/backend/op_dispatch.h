// Run-time op enum -> compile-time template argument, for backends whose kernels are templates
// over the op (one instantiation per op, no switch inside the loop):
//   dispatch_unary(op, [&]<UnaryOp Op>() { ... });
#pragma once

#include <utility>

#include "backend/op.h"

namespace wick {

#define WICK_OP_CASE(e, ...) \
  case Enum::e: return std::forward<F>(f).template operator()<Enum::e>();

template <typename F>
decltype(auto) dispatch_unary(UnaryOp op, F&& f) {
  using Enum = UnaryOp;
  switch (op) { WICK_FORALL_UNARY_OPS(WICK_OP_CASE) }
  __builtin_unreachable();
}

template <typename F>
decltype(auto) dispatch_binary(BinaryOp op, F&& f) {
  using Enum = BinaryOp;
  switch (op) { WICK_FORALL_BINARY_OPS(WICK_OP_CASE) }
  __builtin_unreachable();
}

template <typename F>
decltype(auto) dispatch_cmp(CmpOp op, F&& f) {
  using Enum = CmpOp;
  switch (op) { WICK_FORALL_CMP_OPS(WICK_OP_CASE) }
  __builtin_unreachable();
}

#undef WICK_OP_CASE

}  // namespace wick
