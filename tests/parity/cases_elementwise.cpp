// Cases for unary, affine, powf, elu, binary, cmp and where.
#include "parity/cases.h"

namespace wick::parity {

namespace {

// Ops whose float result is exactly the reference's (no rounding of their own, or one correct
// rounding on both sides).
bool exact_unary(UnaryOp op) {
  switch (op) {
    case UnaryOp::Abs:
    case UnaryOp::Neg:
    case UnaryOp::Sqr:
    case UnaryOp::Relu:
    case UnaryOp::Floor:
    case UnaryOp::Ceil:
    case UnaryOp::Round:
    case UnaryOp::Sign: return true;
    default: return false;
  }
}

Values unary_values(UnaryOp op) {
  switch (op) {
    case UnaryOp::Log:
    case UnaryOp::Sqrt: return Values::Positive;
    case UnaryOp::Round: return Values::Small;  // whole numbers and, through Special, ties .5
    default: return Values::Normal;
  }
}

void add_unary(std::vector<Case>& cases, UnaryOp op, DType dt) {
  if (!op_defined(op, std::vector<DType>{dt})) return;
  for (Variant v : standard_variants(dt)) {
    if (v.values == Values::Normal) v.values = unary_values(op);
    if (op == UnaryOp::Round && is_float(dt) && v.name == "contiguous") v.values = Values::Normal;
    cases.push_back({OpKey(op).name(),
                     label(dt),
                     shape_label(v.shape),
                     v.name,
                     op,
                     {dt},
                     exact_unary(op) ? Compare::Exact : Compare::Float,
                     false,
                     [=](Ctx& c) {
                       Arg x = c.input(dt, v.shape, v.form(0, 1), v.values);
                       return out(c.backend().unary(op, x.view()), dt);
                     }});
  }
}

// affine, powf, elu: one operand and parameters.
template <typename F>
void add_param_op(std::vector<Case>& cases, OpCode code, DType dt, Values values, F&& call) {
  if (!op_defined(code, std::vector<DType>{dt})) return;
  for (Variant v : standard_variants(dt)) {
    if (v.values == Values::Normal) v.values = values;
    cases.push_back({std::string(op_name(code)),
                     label(dt),
                     shape_label(v.shape),
                     v.name,
                     code,
                     {dt},
                     Compare::Float,
                     false,
                     [=](Ctx& c) {
                       Arg x = c.input(dt, v.shape, v.form(0, 1), v.values);
                       return out(call(c.backend(), x.view()), dt);
                     }});
  }
}

void add_binary(std::vector<Case>& cases, BinaryOp op, DType dt) {
  const bool exact = op == BinaryOp::Maximum || op == BinaryOp::Minimum;
  for (const Variant& v : standard_variants(dt)) {
    cases.push_back({OpKey(op).name(),
                     label(dt),
                     shape_label(v.shape),
                     v.name,
                     op,
                     {dt},
                     exact ? Compare::Exact : Compare::Float,
                     false,
                     [=](Ctx& c) {
                       Arg a = c.input(dt, v.shape, v.form(0, 2), v.values);
                       Arg b = c.input(dt, v.shape, v.form(1, 2), v.values);
                       return out(c.backend().binary(op, a.view(), b.view()), dt);
                     }});
  }
}

void add_cmp(std::vector<Case>& cases, CmpOp op, DType dt) {
  for (Variant v : standard_variants(dt)) {
    if (v.values == Values::Normal) v.values = Values::Small;  // many equal pairs
    cases.push_back(
        {OpKey(op).name(), label(dt), shape_label(v.shape), v.name, op, {dt}, Compare::Exact, false, [=](Ctx& c) {
           Arg a = c.input(dt, v.shape, v.form(0, 2), v.values);
           Arg b = c.input(dt, v.shape, v.form(1, 2), v.values);
           return out(c.backend().cmp(op, a.view(), b.view()), DType::U8);
         }});
  }
}

void add_where(std::vector<Case>& cases, DType cond, DType dt) {
  for (const Variant& v : standard_variants(dt)) {
    cases.push_back({"where",
                     label(dt, cond),
                     shape_label(v.shape),
                     v.name,
                     OpCode::Where,
                     {cond, dt},
                     Compare::Exact,
                     false,
                     [=](Ctx& c) {
                       Arg k = c.input(cond, v.shape, v.form(0, 3), Values::Cond);
                       Arg t = c.input(dt, v.shape, v.form(1, 3), v.values);
                       Arg f = c.input(dt, v.shape, v.form(2, 3), v.values);
                       return out(c.backend().where(k.view(), t.view(), f.view()), dt);
                     }});
  }
}

}  // namespace

void add_elementwise_cases(std::vector<Case>& cases) {
  for (int op = 0; op < kNumUnaryOps; ++op)
    for (DType dt : kAllDTypes) add_unary(cases, static_cast<UnaryOp>(op), dt);
  for (DType dt : kAllDTypes) {
    // Integers: x * 3 - 7 is exact; the fractional multiplier exercises truncation.
    const double mul = is_float(dt) ? 1.5 : 2.5, add = is_float(dt) ? -0.25 : -7.0;
    add_param_op(cases, OpCode::Affine, dt, Values::Normal,
                 [=](Backend& b, const View& x) { return b.affine(x, mul, add); });
    add_param_op(cases, OpCode::Powf, dt, Values::Positive, [](Backend& b, const View& x) { return b.powf(x, 1.7); });
    add_param_op(cases, OpCode::Elu, dt, Values::Normal, [](Backend& b, const View& x) { return b.elu(x, 0.8); });
  }
  for (int op = 0; op < kNumBinaryOps; ++op)
    for (DType dt : kAllDTypes) add_binary(cases, static_cast<BinaryOp>(op), dt);
  for (int op = 0; op < kNumCmpOps; ++op)
    for (DType dt : kAllDTypes) add_cmp(cases, static_cast<CmpOp>(op), dt);
  for (DType dt : kAllDTypes)
    for (DType cond : kIndexDTypes) add_where(cases, cond, dt);
}

}  // namespace wick::parity
