// wick's errors. Every message starts with the op's name and gives the shapes, dtypes and device
// involved; the library throws and never aborts.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace wick {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Incompatible or invalid shapes, dims, ranks, sizes.
class ShapeError : public Error {
 public:
  using Error::Error;
};

// A dtype an op does not accept, or operands of different dtypes.
class DTypeError : public Error {
 public:
  using Error::Error;
};

// A device that does not exist or is not built in, or operands on different devices.
class DeviceError : public Error {
 public:
  using Error::Error;
};

// An index out of range in an index op, or a view past the end of a dim.
class IndexError : public Error {
 public:
  using Error::Error;
};

// A device allocation failed even after the allocator released its cached blocks.
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

// A backend does not implement an op for these dtypes (see Backend::supports).
class NotSupportedError : public Error {
 public:
  using Error::Error;
};

namespace detail {

template <typename... Args>
std::string str_cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

}  // namespace detail
}  // namespace wick

// Throws ErrorType("op: <message parts>") when `cond` is false. The message is built only on
// failure. `op` is a string naming the op; the other arguments are streamed in order.
#define WICK_CHECK(cond, ErrorType, op, ...)                           \
  do {                                                                 \
    if (!(cond)) [[unlikely]]                                          \
      throw ErrorType(::wick::detail::str_cat(op, ": ", __VA_ARGS__)); \
  } while (0)

#define WICK_THROW(ErrorType, op, ...) throw ErrorType(::wick::detail::str_cat(op, ": ", __VA_ARGS__))
