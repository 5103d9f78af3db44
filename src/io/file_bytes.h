// The bytes of a model file, shared by the readers of include/wick/io.h: a private mapping of the
// file (copy-on-write, so that a tensor over it may be written without touching the file) or a
// buffer, and the CPU tensors that alias them without a copy.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "wick/tensor.h"

namespace wick::io::impl {

struct FileBytes {
  const uint8_t* data = nullptr;
  int64_t size = 0;

  FileBytes() = default;
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;
  ~FileBytes();

  // The file at `path`, mapped; an Error naming `format` and the file where it cannot be opened or
  // mapped or is not a regular file.
  static std::shared_ptr<const FileBytes> map(const std::string& path, std::string_view format);
  // `bytes`, owned.
  static std::shared_ptr<const FileBytes> own(std::vector<uint8_t> bytes);

 private:
  void* map_ = nullptr;
  std::vector<uint8_t> owned_;
};

// A tensor of `shape` and `dtype` whose elements are the `bytes.size` bytes at `at` (within
// `bytes`), on `device`. On the CPU, where `at` is aligned for the dtype, it aliases the bytes and
// keeps them alive (no copy); elsewhere the bytes are copied.
Tensor tensor_over(const std::shared_ptr<const FileBytes>& bytes, const uint8_t* at, DType dtype, const Shape& shape,
                   Device device);

// Writes `bytes` to `path`; an Error naming `format` and the file where that fails.
void write_file(const std::string& path, const std::vector<uint8_t>& bytes, std::string_view format);

}  // namespace wick::io::impl
