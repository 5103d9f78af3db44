// Building blocks of the case registry: the layout variants every family runs over.
#pragma once

#include <string>
#include <vector>

#include "parity/harness.h"

namespace wick::parity {

// One layout variant: the main shape, and how operand k of n is laid out.
struct Variant {
  std::string name;
  Shape shape;
  Values values = Values::Normal;
  // contiguous, transposed (first operand), narrow, stride2, broadcast (last operand), size1
  // (last operand transposed), empty, rank0, prime, special (float values with NaN/Inf/-0),
  // large (first operand transposed, several threads' worth), permuted (operands 0, 2, .. a
  // rank-3 view permuted (2, 0, 1), the others contiguous)
  Form form(int k, int n) const;
};

// The standard variants over a base shape of rank 3; `special` only for float dtypes.
std::vector<Variant> standard_variants(DType dtype);

// Case labels.
std::string label(DType dt);
std::string label(DType value, DType index);  // "f32/i64"
std::string shape_label(const Shape& shape, const std::string& extra = "");

// The index dtypes, and a short list for crossing with every value dtype.
inline constexpr DType kIndexDTypes[] = {DType::U8, DType::U32, DType::I16, DType::I32, DType::I64};

inline Output out(StoragePtr s, DType dt) { return {std::move(s), dt}; }
inline Output out(const Arg& a) { return {a.storage, a.dtype}; }

}  // namespace wick::parity
