#include "backend/op.h"

#include <sstream>
#include <vector>

namespace wick {

#define WICK_NAME_CASE(e, n, ...) \
  case decltype(op)::e: return n;

std::string_view op_name(UnaryOp op) {
  switch (op) { WICK_FORALL_UNARY_OPS(WICK_NAME_CASE) }
  return "?";
}
std::string_view op_name(BinaryOp op) {
  switch (op) { WICK_FORALL_BINARY_OPS(WICK_NAME_CASE) }
  return "?";
}
std::string_view op_name(CmpOp op) {
  switch (op) { WICK_FORALL_CMP_OPS(WICK_NAME_CASE) }
  return "?";
}
std::string_view op_name(ReduceOp op) {
  switch (op) { WICK_FORALL_REDUCE_OPS(WICK_NAME_CASE) }
  return "?";
}
std::string_view op_name(NnOp op) {
  switch (op) { WICK_FORALL_NN_OPS(WICK_NAME_CASE) }
  return "?";
}
std::string_view op_name(QuantOp op) {
  switch (op) { WICK_FORALL_QUANT_OPS(WICK_NAME_CASE) }
  return "?";
}
std::string_view op_name(OpCode op) {
  switch (op) { WICK_FORALL_OPCODES(WICK_NAME_CASE) }
  return "?";
}
#undef WICK_NAME_CASE

std::string OpKey::name() const {
  std::string base(op_name(code));
  switch (code) {
    case OpCode::Unary: return base + "." + std::string(op_name(static_cast<UnaryOp>(variant)));
    case OpCode::Binary: return base + "." + std::string(op_name(static_cast<BinaryOp>(variant)));
    case OpCode::Cmp: return base + "." + std::string(op_name(static_cast<CmpOp>(variant)));
    case OpCode::Reduce: return base + "." + std::string(op_name(static_cast<ReduceOp>(variant)));
    case OpCode::Nn: return base + "." + std::string(op_name(static_cast<NnOp>(variant)));
    case OpCode::Quant: return base + "." + std::string(op_name(static_cast<QuantOp>(variant)));
    default: return base;
  }
}

std::span<const OpKey> OpKey::all() {
  static const std::vector<OpKey> keys = [] {
    std::vector<OpKey> k;
    for (int c = 0; c < kNumOpCodes; ++c) {
      auto code = static_cast<OpCode>(c);
      switch (code) {
        case OpCode::Unary:
          for (int v = 0; v < kNumUnaryOps; ++v) k.emplace_back(static_cast<UnaryOp>(v));
          break;
        case OpCode::Binary:
          for (int v = 0; v < kNumBinaryOps; ++v) k.emplace_back(static_cast<BinaryOp>(v));
          break;
        case OpCode::Cmp:
          for (int v = 0; v < kNumCmpOps; ++v) k.emplace_back(static_cast<CmpOp>(v));
          break;
        case OpCode::Reduce:
          for (int v = 0; v < kNumReduceOps; ++v) k.emplace_back(static_cast<ReduceOp>(v));
          break;
        case OpCode::Nn:
          for (int v = 0; v < kNumNnOps; ++v) k.emplace_back(static_cast<NnOp>(v));
          break;
        case OpCode::Quant:
          for (int v = 0; v < kNumQuantOps; ++v) k.emplace_back(static_cast<QuantOp>(v));
          break;
        default: k.emplace_back(code);
      }
    }
    return k;
  }();
  return keys;
}

int op_dtype_arity(OpKey op) {
  switch (op.code) {
    case OpCode::Cast:
    case OpCode::Where:
    case OpCode::Gather:
    case OpCode::ScatterSet:
    case OpCode::ScatterAddSet:
    case OpCode::IndexSelect:
    case OpCode::IndexAdd: return 2;
    default: return 1;
  }
}

bool is_index_dtype(DType dt) { return is_int(dt); }

bool op_defined(OpKey op, std::span<const DType> dtypes) {
  if (static_cast<int>(dtypes.size()) != op_dtype_arity(op)) return false;
  DType dt = dtypes[0];
  switch (op.code) {
    case OpCode::Powf:
    case OpCode::Elu:
    case OpCode::RandUniform:
    case OpCode::RandNormal:
    case OpCode::Matmul:
    case OpCode::Conv1d:
    case OpCode::ConvTranspose1d:
    case OpCode::Conv2d:
    case OpCode::ConvTranspose2d:
    case OpCode::AvgPool2d:
    case OpCode::UpsampleBilinear2d: return is_float(dt);
    case OpCode::Unary: return is_float(dt) || unary_defined_for_int(static_cast<UnaryOp>(op.variant));
    case OpCode::Where: return is_index_dtype(dtypes[0]);
    case OpCode::Nn: return dt == DType::F64 || dt == DType::F32 || dt == DType::F16 || dt == DType::BF16;
    case OpCode::Quant: return dt == DType::F32 || dt == DType::F16 || dt == DType::BF16;
    case OpCode::Gather:
    case OpCode::ScatterSet:
    case OpCode::ScatterAddSet:
    case OpCode::IndexSelect:
    case OpCode::IndexAdd: return is_index_dtype(dtypes[1]);
    default:
      return true;  // copies, casts, affine, binary, cmp, reductions, cumsum, argsort, max_pool2d,
                    // nearest upsampling
  }
}

std::string support_table_markdown() {
  std::ostringstream os;
  os << "| op |";
  for (DType dt : kAllDTypes) os << " " << dtype_name(dt) << " |";
  os << "\n|---|";
  for (size_t i = 0; i < std::size(kAllDTypes); ++i) os << "---|";
  os << "\n";
  for (const OpKey& op : OpKey::all()) {
    os << "| " << op.name() << " |";
    for (DType dt : kAllDTypes) {
      bool any = false;
      if (op_dtype_arity(op) == 1) {
        any = op_defined(op, std::vector<DType>{dt});
      } else {  // the data dtype, with any second dtype (cast target, index or condition dtype)
        for (DType other : kAllDTypes) {
          std::vector<DType> pair =
              op.code == OpCode::Where ? std::vector<DType>{other, dt} : std::vector<DType>{dt, other};
          any = any || op_defined(op, pair);
        }
      }
      os << (any ? " yes |" : " |");
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace wick
