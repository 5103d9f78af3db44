// Names of the Backend ops and their variants, generated from master lists, and the table of
// which dtypes each op is defined for (the same on every backend; docs/numerics.md prints it).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "wick/dtype.h"

namespace wick {

// X(Enum, name, defined for integer dtypes)
#define WICK_FORALL_UNARY_OPS(X) \
  X(Exp, "exp", false)           \
  X(Log, "log", false)           \
  X(Sin, "sin", false)           \
  X(Cos, "cos", false)           \
  X(Tanh, "tanh", false)         \
  X(Abs, "abs", true)            \
  X(Neg, "neg", true)            \
  X(Recip, "recip", false)       \
  X(Sqr, "sqr", true)            \
  X(Sqrt, "sqrt", false)         \
  X(Gelu, "gelu", false)         \
  X(GeluErf, "gelu_erf", false)  \
  X(Erf, "erf", false)           \
  X(Relu, "relu", true)          \
  X(Silu, "silu", false)         \
  X(Sigmoid, "sigmoid", false)   \
  X(Floor, "floor", true)        \
  X(Ceil, "ceil", true)          \
  X(Round, "round", true)        \
  X(Sign, "sign", true)

#define WICK_FORALL_BINARY_OPS(X) \
  X(Add, "add")                   \
  X(Sub, "sub")                   \
  X(Mul, "mul")                   \
  X(Div, "div")                   \
  X(Maximum, "maximum")           \
  X(Minimum, "minimum")

#define WICK_FORALL_CMP_OPS(X) \
  X(Eq, "eq")                  \
  X(Ne, "ne")                  \
  X(Lt, "lt")                  \
  X(Le, "le")                  \
  X(Gt, "gt")                  \
  X(Ge, "ge")

#define WICK_FORALL_REDUCE_OPS(X) \
  X(Sum, "sum")                   \
  X(Min, "min")                   \
  X(Max, "max")                   \
  X(ArgMin, "argmin")             \
  X(ArgMax, "argmax")

// The fused transformer ops of the nn wing (src/nn, include/wick/nn.h). Every backend runs them:
// through its own kernels (Backend::nn()), or composed from the methods below by the front end.
// supports() says which backends have the fused kernel.
#define WICK_FORALL_NN_OPS(X)          \
  X(Softmax, "softmax")                \
  X(LogSoftmax, "log_softmax")         \
  X(RmsNorm, "rms_norm")               \
  X(AddRmsNorm, "add_rms_norm")        \
  X(LayerNorm, "layer_norm")           \
  X(Rope, "rope")                      \
  X(RopeI, "rope_i")                   \
  X(RopeThd, "rope_thd")               \
  X(RopeWriteAt, "rope_write_at")      \
  X(Attention, "attention")            \
  X(PagedAttention, "paged_attention") \
  X(SiluMul, "silu_mul")               \
  X(MoeRoute, "moe_route")             \
  X(MoeCombine, "moe_combine")         \
  X(MatmulGrouped, "matmul_grouped")

// The quantized-weight ops (src/quant, include/wick/quant.h). Every backend runs them: through
// its own kernels (Backend::quant()), or by the front end (dequantize on the host; dequantize then
// matmul). The dtype is the float side: the result of dequantize, x of matmul, the input of quantize.
#define WICK_FORALL_QUANT_OPS(X) \
  X(Quantize, "quantize")        \
  X(Dequantize, "dequantize")    \
  X(Matmul, "matmul")            \
  X(MatmulGrouped, "matmul_grouped")

// Backend methods that compute (memory management, seeding and sync are always supported), and
// the nn family.
#define WICK_FORALL_OPCODES(X)               \
  X(CopyStrided, "copy_strided")             \
  X(Copy2d, "copy2d")                        \
  X(ConstSet, "const_set")                   \
  X(Cast, "cast")                            \
  X(Affine, "affine")                        \
  X(Powf, "powf")                            \
  X(Elu, "elu")                              \
  X(Unary, "unary")                          \
  X(Binary, "binary")                        \
  X(Cmp, "cmp")                              \
  X(Where, "where")                          \
  X(Reduce, "reduce")                        \
  X(Gather, "gather")                        \
  X(ScatterSet, "scatter_set")               \
  X(ScatterAddSet, "scatter_add_set")        \
  X(IndexSelect, "index_select")             \
  X(IndexAdd, "index_add")                   \
  X(Cumsum, "cumsum")                        \
  X(Argsort, "argsort")                      \
  X(RandUniform, "rand_uniform")             \
  X(RandNormal, "rand_normal")               \
  X(Matmul, "matmul")                        \
  X(Conv1d, "conv1d")                        \
  X(ConvTranspose1d, "conv_transpose1d")     \
  X(Conv2d, "conv2d")                        \
  X(ConvTranspose2d, "conv_transpose2d")     \
  X(AvgPool2d, "avg_pool2d")                 \
  X(MaxPool2d, "max_pool2d")                 \
  X(UpsampleNearest1d, "upsample_nearest1d") \
  X(UpsampleNearest2d, "upsample_nearest2d") \
  X(UpsampleBilinear2d, "upsample_bilinear2d") \
  X(Nn, "nn")                                \
  X(Quant, "quant")

#define WICK_ENUM_ENTRY(e, ...) e,
enum class UnaryOp : uint8_t { WICK_FORALL_UNARY_OPS(WICK_ENUM_ENTRY) };
enum class BinaryOp : uint8_t { WICK_FORALL_BINARY_OPS(WICK_ENUM_ENTRY) };
enum class CmpOp : uint8_t { WICK_FORALL_CMP_OPS(WICK_ENUM_ENTRY) };
enum class ReduceOp : uint8_t { WICK_FORALL_REDUCE_OPS(WICK_ENUM_ENTRY) };
enum class NnOp : uint8_t { WICK_FORALL_NN_OPS(WICK_ENUM_ENTRY) };
enum class QuantOp : uint8_t { WICK_FORALL_QUANT_OPS(WICK_ENUM_ENTRY) };
enum class OpCode : uint8_t { WICK_FORALL_OPCODES(WICK_ENUM_ENTRY) };
#undef WICK_ENUM_ENTRY

#define WICK_COUNT_ENTRY(...) +1
inline constexpr int kNumUnaryOps = 0 WICK_FORALL_UNARY_OPS(WICK_COUNT_ENTRY);
inline constexpr int kNumBinaryOps = 0 WICK_FORALL_BINARY_OPS(WICK_COUNT_ENTRY);
inline constexpr int kNumCmpOps = 0 WICK_FORALL_CMP_OPS(WICK_COUNT_ENTRY);
inline constexpr int kNumReduceOps = 0 WICK_FORALL_REDUCE_OPS(WICK_COUNT_ENTRY);
inline constexpr int kNumNnOps = 0 WICK_FORALL_NN_OPS(WICK_COUNT_ENTRY);
inline constexpr int kNumQuantOps = 0 WICK_FORALL_QUANT_OPS(WICK_COUNT_ENTRY);
inline constexpr int kNumOpCodes = 0 WICK_FORALL_OPCODES(WICK_COUNT_ENTRY);
#undef WICK_COUNT_ENTRY

// Whether a unary op is defined for integer dtypes (abs, neg, sqr, relu, sign, and the rounding
// ops as the identity); every unary op is defined for float dtypes.
constexpr bool unary_defined_for_int(UnaryOp op) {
  switch (op) {
#define WICK_INT_CASE(e, n, ints) \
  case UnaryOp::e: return ints;
    WICK_FORALL_UNARY_OPS(WICK_INT_CASE)
#undef WICK_INT_CASE
  }
  return false;
}

std::string_view op_name(UnaryOp op);
std::string_view op_name(BinaryOp op);
std::string_view op_name(CmpOp op);
std::string_view op_name(ReduceOp op);
std::string_view op_name(NnOp op);
std::string_view op_name(QuantOp op);
std::string_view op_name(OpCode op);

// One Backend op, with the variant for the families (unary.exp, binary.add, reduce.argmax).
struct OpKey {
  OpCode code;
  uint8_t variant = 0;

  OpKey(OpCode c) : code(c) {}  // NOLINT: implicit on purpose, OpKey{OpCode::Cast}
  OpKey(UnaryOp op) : code(OpCode::Unary), variant(static_cast<uint8_t>(op)) {}    // NOLINT
  OpKey(BinaryOp op) : code(OpCode::Binary), variant(static_cast<uint8_t>(op)) {}  // NOLINT
  OpKey(CmpOp op) : code(OpCode::Cmp), variant(static_cast<uint8_t>(op)) {}        // NOLINT
  OpKey(ReduceOp op) : code(OpCode::Reduce), variant(static_cast<uint8_t>(op)) {}  // NOLINT
  OpKey(NnOp op) : code(OpCode::Nn), variant(static_cast<uint8_t>(op)) {}          // NOLINT
  OpKey(QuantOp op) : code(OpCode::Quant), variant(static_cast<uint8_t>(op)) {}    // NOLINT

  // "unary.exp", "cast", "nn.softmax", ...
  std::string name() const;
  // Every op and variant, in a fixed order.
  static std::span<const OpKey> all();
};

// How many dtypes the op's signature takes: 2 for cast (from, to), where (cond, value) and the
// index ops (value, index); 1 otherwise.
int op_dtype_arity(OpKey op);

// Whether the op has a meaning for these dtypes (wick's contract, the same for every backend):
// for example exp is defined for float dtypes only, neg for every dtype. A backend may support
// less (Backend::supports), never more.
bool op_defined(OpKey op, std::span<const DType> dtypes);

bool is_index_dtype(DType dt);

// The op x dtype table of op_defined as markdown ("yes" where an op is defined for the dtype with
// some second dtype, for the two-dtype ops); docs/numerics.md holds it, and a test keeps it so.
std::string support_table_markdown();  // an integer dtype usable as indices or as a where condition

}  // namespace wick
