#include "dist/rendezvous.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "wick/dist.h"

namespace wick::dist::detail {

namespace {

using wick::detail::str_cat;

[[noreturn]] void sys_fail(const std::string& what, int err) {
  throw DistError(str_cat("dist: join: ", what, ": ", std::strerror(err)));
}

void* map_fd(int fd, size_t bytes, const std::string& path) {
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) sys_fail(str_cat("mapping ", bytes, " bytes of ", path), errno);
  return base;
}

}  // namespace

Mapping::~Mapping() {
  if (base_ != nullptr) munmap(base_, bytes_);
}

void publish(const std::string& path, size_t bytes, const std::function<void(void*)>& fill) {
  const std::string tmp = str_cat(path, ".", getpid(), ".tmp");
  const int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) sys_fail(str_cat("creating ", tmp), errno);
  struct Cleanup {
    int fd;
    const std::string& tmp;
    ~Cleanup() {
      ::close(fd);
      ::unlink(tmp.c_str());
    }
  } cleanup{fd, tmp};
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) sys_fail(str_cat("sizing ", tmp, " to ", bytes, " bytes"), errno);
  {
    Mapping m(map_fd(fd, bytes, tmp), bytes);
    fill(m.data());
  }
  if (::link(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    sys_fail(str_cat("rendezvous ", path, err == EEXIST ? " exists already (left by another run?)" : ""), err);
  }
}

Mapping await(const std::string& path, size_t bytes, std::chrono::steady_clock::time_point deadline, int rank) {
  int fd;
  while ((fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC)) < 0) {
    if (errno != ENOENT) sys_fail(str_cat("opening ", path), errno);
    if (std::chrono::steady_clock::now() > deadline)
      throw DistError(str_cat("dist: join: rank ", rank, " timed out waiting for rank 0 to create ", path));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  struct stat st {};
  const int stat_rc = ::fstat(fd, &st);
  const int err = errno;
  if (stat_rc != 0 || static_cast<size_t>(st.st_size) != bytes) {
    ::close(fd);
    if (stat_rc != 0) sys_fail(path, err);
    throw DistError(str_cat("dist: join: rank ", rank, ": ", path, " holds ", st.st_size, " bytes, not the ", bytes,
                            " of this group (another size, or another kind of device?)"));
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int map_err = errno;
  ::close(fd);
  if (base == MAP_FAILED) sys_fail(str_cat("mapping ", path), map_err);
  return Mapping(base, bytes);
}

}  // namespace wick::dist::detail
