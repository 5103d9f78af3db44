#include "io/file_bytes.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "backend/registry.h"
#include "backend/storage.h"
#include "core/checks.h"

namespace wick::io::impl {

FileBytes::~FileBytes() {
  if (map_ != nullptr) munmap(map_, static_cast<size_t>(size));
}

std::shared_ptr<const FileBytes> FileBytes::map(const std::string& path, std::string_view format) {
  auto bytes = std::make_shared<FileBytes>();
  // Non-blocking: a FIFO opens at once (to be refused below) instead of waiting for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error(detail::str_cat(format, ": cannot open ", path, ": ", std::strerror(errno)));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw Error(detail::str_cat(format, ": cannot look at ", path, ": ", std::strerror(e)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    const char* kind = S_ISDIR(st.st_mode)                          ? "a directory"
                       : S_ISFIFO(st.st_mode)                       ? "a FIFO"
                       : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                       : S_ISSOCK(st.st_mode)                       ? "a socket"
                                                                    : "not a regular file";
    throw Error(detail::str_cat(format, ": ", path, " is ", kind, ", not a regular file"));
  }
  bytes->size = static_cast<int64_t>(st.st_size);
  if (bytes->size > 0) {
    // Private and writable: a tensor that aliases the mapping may be written, and the writes stay
    // in this process (copied pages), never in the file.
    void* p = mmap(nullptr, static_cast<size_t>(bytes->size), PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    const int e = errno;
    ::close(fd);
    if (p == MAP_FAILED) throw Error(detail::str_cat(format, ": cannot map ", path, ": ", std::strerror(e)));
    bytes->map_ = p;
    bytes->data = static_cast<const uint8_t*>(p);
  } else {
    ::close(fd);
  }
  return bytes;
}

std::shared_ptr<const FileBytes> FileBytes::own(std::vector<uint8_t> data) {
  auto bytes = std::make_shared<FileBytes>();
  bytes->owned_ = std::move(data);
  bytes->data = bytes->owned_.data();
  bytes->size = static_cast<int64_t>(bytes->owned_.size());
  return bytes;
}

Tensor tensor_over(const std::shared_ptr<const FileBytes>& bytes, const uint8_t* at, DType dtype, const Shape& shape,
                   Device device) {
  const int64_t numel = shape.numel();
  const auto nbytes = static_cast<size_t>(numel * dtype_size(dtype));
  const bool aligned = reinterpret_cast<uintptr_t>(at) % static_cast<uintptr_t>(dtype_size(dtype)) == 0;
  if (device.type() != DeviceType::Cpu || !aligned || numel == 0)
    return Tensor::from_data(at, numel, dtype, shape, device);
  Backend& cpu = backend_for(device, "tensor_over");
  // The mapping is writable (private): writes through the tensor reach neither the file nor other
  // tensors of other files.
  auto storage = std::make_shared<Storage>(&cpu, const_cast<uint8_t*>(at), nbytes, bytes);
  return ops::wrap(std::move(storage), shape, dtype);
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes, std::string_view format) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw Error(detail::str_cat(format, ": cannot write ", path, ": ", std::strerror(errno)));
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) throw Error(detail::str_cat(format, ": writing ", path, " failed: ", std::strerror(errno)));
}

}  // namespace wick::io::impl
