#include "parity/cases.h"

#include <sstream>

namespace wick::parity {

Form Variant::form(int k, int n) const {
  if (name == "transposed" || name == "large") return k == 0 ? Form::Transposed : Form::Contiguous;
  if (name == "narrow") return Form::Narrow;
  if (name == "stride2") return Form::Stride2;
  if (name == "broadcast") return k == n - 1 ? Form::Broadcast : Form::Contiguous;
  if (name == "size1") return k == n - 1 ? Form::Transposed : Form::Contiguous;
  if (name == "permuted") return k % 2 == 0 ? Form::Permuted : Form::Contiguous;
  return Form::Contiguous;
}

std::vector<Variant> standard_variants(DType dtype) {
  std::vector<Variant> v = {
      {"contiguous", {4, 5, 6}}, {"transposed", {4, 5, 6}}, {"narrow", {4, 5, 6}}, {"stride2", {4, 5, 6}},
      {"broadcast", {4, 5, 6}},  {"size1", {4, 1, 6}},      {"empty", {4, 0, 6}},  {"rank0", {}},
      {"prime", {1031}},         {"permuted", {4, 5, 6}},
  };
  if (is_float(dtype)) v.push_back({"special", {4, 5, 6}, Values::Special});
  // Large enough to split across threads, with chunks starting inside rows of a strided operand.
  if (dtype == DType::F32 || dtype == DType::F16 || dtype == DType::I32) v.push_back({"large", {67, 33, 31}});
  return v;
}

std::string label(DType dt) { return std::string(dtype_name(dt)); }

std::string label(DType value, DType index) { return label(value) + "/" + label(index); }

std::string shape_label(const Shape& shape, const std::string& extra) {
  std::ostringstream os;
  os << shape;
  if (!extra.empty()) os << " " << extra;
  return os.str();
}

}  // namespace wick::parity
