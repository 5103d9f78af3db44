#include "json.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "wick/io.h"

namespace wick::models {

namespace {

// The bytes of a regular file. Opened without blocking and looked at before any read: a FIFO
// would wait for a writer forever, and a device such as /dev/zero never ends.
std::string read_regular_file(const std::string& path, std::string_view reader) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw io::FormatError(detail::str_cat(reader, ": ", path, ": cannot be read: ", std::strerror(errno)));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const bool dir = S_ISDIR(st.st_mode);
    ::close(fd);
    throw io::FormatError(
        detail::str_cat(reader, ": ", path, ": ", dir ? "a directory" : "not a regular file", ", not a JSON file"));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // a file that shrank is read as far as it goes, and the parser judges it
    done += static_cast<size_t>(n);
  }
  const int e = errno;
  ::close(fd);
  if (done < text.size() && e != 0 && e != EINTR)
    throw io::FormatError(detail::str_cat(reader, ": ", path, ": cannot be read: ", std::strerror(e)));
  text.resize(done);
  return text;
}

}  // namespace

nlohmann::json read_json_file(const std::string& path, std::string_view reader) {
  const std::string text = read_regular_file(path, reader);
  const auto depth_limit = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxJsonDepth)
      throw io::FormatError(detail::str_cat(reader, ": ", path, ": objects and arrays nest deeper than ", kMaxJsonDepth));
    return true;
  };
  try {
    return nlohmann::json::parse(text, depth_limit);
  } catch (const nlohmann::json::exception& e) {
    throw io::FormatError(detail::str_cat(reader, ": ", path, ": not JSON (", e.what(), ")"));
  }
}

}  // namespace wick::models
