// The JSON files of a checkpoint's directory (config.json, tokenizer.json, tokenizer_config.json,
// generation_config.json), read for the model library. Private to models/.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace wick::models {

// How deep objects and arrays of these files may nest. Real files nest five deep at most
// (tokenizer.json's post_processor); nlohmann's dump and comparisons recurse once a level, so a
// file of a few megabytes of "[" would otherwise overflow the stack.
inline constexpr int kMaxJsonDepth = 32;

// The parsed text of the file at `path`. An io::FormatError "<reader>: <path>: ..." when the file
// cannot be read, is not a regular file (a FIFO, a device, a directory), is not JSON, or nests
// deeper than kMaxJsonDepth.
nlohmann::json read_json_file(const std::string& path, std::string_view reader);

}  // namespace wick::models
