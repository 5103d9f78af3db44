#include "json.h"

#include <fstream>

#include "wick/io.h"

namespace wick::models {

nlohmann::json read_json_file(const std::string& path, std::string_view reader) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw io::FormatError(detail::str_cat(reader, ": ", path, ": cannot be read"));
  const auto depth_limit = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxJsonDepth)
      throw io::FormatError(detail::str_cat(reader, ": ", path, ": objects and arrays nest deeper than ", kMaxJsonDepth));
    return true;
  };
  try {
    return nlohmann::json::parse(in, depth_limit);
  } catch (const nlohmann::json::exception& e) {
    throw io::FormatError(detail::str_cat(reader, ": ", path, ": not JSON (", e.what(), ")"));
  }
}

}  // namespace wick::models
