// Option values shared by the `wick` and `wick-parity` programs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wick/dtype.h"

namespace wick::cli {

// The usage text of `wick` (parity's options included: wick-parity is reached as `wick parity`).
extern const char* const kUsage;

// "f32,bf16" -> {F32, BF16}; std::runtime_error naming an unknown dtype.
std::vector<DType> parse_dtype_list(const std::string& list);
// An unsigned 64-bit decimal; std::runtime_error otherwise.
uint64_t parse_seed(const std::string& text);

}  // namespace wick::cli
