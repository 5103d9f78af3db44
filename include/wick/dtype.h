// The element types. One master list generates the enum, the C++ type map and the tables.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string_view>

#include "wick/float_types.h"

namespace wick {

// X(Enum, C++ type, name). Order is the enum's order and must not change (it is in file formats
// of the tools' outputs).
#define WICK_FORALL_DTYPES(X) \
  X(U8, uint8_t, "u8")        \
  X(U32, uint32_t, "u32")     \
  X(I16, int16_t, "i16")      \
  X(I32, int32_t, "i32")      \
  X(I64, int64_t, "i64")      \
  X(BF16, bf16, "bf16")       \
  X(F16, f16, "f16")          \
  X(F32, float, "f32")        \
  X(F64, double, "f64")       \
  X(F8E4M3, f8e4m3, "f8e4m3")

enum class DType : uint8_t {
#define WICK_X(e, t, n) e,
  WICK_FORALL_DTYPES(WICK_X)
#undef WICK_X
};

inline constexpr int kNumDTypes = 0
#define WICK_X(e, t, n) +1
    WICK_FORALL_DTYPES(WICK_X)
#undef WICK_X
    ;
static_assert(kNumDTypes == 10, "update the dtype tables and docs/numerics.md with the list");

inline constexpr DType kAllDTypes[] = {
#define WICK_X(e, t, n) DType::e,
    WICK_FORALL_DTYPES(WICK_X)
#undef WICK_X
};

// Whether dt is one of the enum's values (a DType made from an arbitrary integer may not be).
constexpr bool is_valid(DType dt) { return static_cast<int>(dt) < kNumDTypes; }

// Size of one element in bytes (0 for an invalid dtype).
constexpr int64_t dtype_size(DType dt) {
  switch (dt) {
#define WICK_X(e, t, n) \
  case DType::e: return sizeof(t);
    WICK_FORALL_DTYPES(WICK_X)
#undef WICK_X
  }
  return 0;
}

// "f32", "bf16", ...
constexpr std::string_view dtype_name(DType dt) {
  switch (dt) {
#define WICK_X(e, t, n) \
  case DType::e: return n;
    WICK_FORALL_DTYPES(WICK_X)
#undef WICK_X
  }
  return "?";
}

// Parses a name as printed by dtype_name; returns false for an unknown name.
bool parse_dtype(std::string_view name, DType* out);

constexpr bool is_float(DType dt) {
  return dt == DType::BF16 || dt == DType::F16 || dt == DType::F32 || dt == DType::F64 || dt == DType::F8E4M3;
}
constexpr bool is_int(DType dt) { return !is_float(dt); }
constexpr bool is_unsigned(DType dt) { return dt == DType::U8 || dt == DType::U32; }

// dtype_of<T> maps a C++ element type to its DType.
template <typename T>
struct DTypeOf {
  static_assert(sizeof(T) == 0,
                "wick: no dtype holds this element type; use uint8_t, uint32_t, int16_t, int32_t, int64_t, "
                "wick::bf16, wick::f16, float, double or wick::f8e4m3 (size_t and uint64_t: int64_t)");
};
#define WICK_X(e, t, n)                      \
  template <>                                \
  struct DTypeOf<t> {                        \
    static constexpr DType value = DType::e; \
  };
WICK_FORALL_DTYPES(WICK_X)
#undef WICK_X
template <typename T>
inline constexpr DType dtype_of = DTypeOf<T>::value;

std::ostream& operator<<(std::ostream& os, DType dt);

}  // namespace wick
