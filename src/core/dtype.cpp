#include "wick/dtype.h"

#include <ostream>

namespace wick {

bool parse_dtype(std::string_view name, DType* out) {
  for (DType dt : kAllDTypes) {
    if (dtype_name(dt) == name) {
      *out = dt;
      return true;
    }
  }
  return false;
}

std::ostream& operator<<(std::ostream& os, DType dt) { return os << dtype_name(dt); }

}  // namespace wick
