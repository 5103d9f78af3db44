#include "wick/wick.h"

namespace wick {

const char* version() { return WICK_VERSION; }

}  // namespace wick
