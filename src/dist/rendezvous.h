// How the processes of a group meet: rank 0 publishes a file at the rendezvous path (the CPU
// ranks' shared memory, or NCCL's unique id), the others wait for it and map it.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

namespace wick::dist::detail {

// A shared mapping of a file, unmapped when it goes.
class Mapping {
 public:
  Mapping(void* base, size_t bytes) : base_(base), bytes_(bytes) {}
  ~Mapping();
  Mapping(Mapping&& o) noexcept : base_(o.base_), bytes_(o.bytes_) { o.base_ = nullptr; }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  Mapping& operator=(Mapping&&) = delete;
  void* data() const { return base_; }
  size_t size() const { return bytes_; }
  // Hands the mapping over (the caller unmaps it).
  void* release() {
    void* b = base_;
    base_ = nullptr;
    return b;
  }

 private:
  void* base_;
  size_t bytes_;
};

// Creates `path` holding `bytes` bytes that `fill` writes, made under a private name and then
// linked, so that no reader sees it half written; DistError where the path exists already (left by
// another run) or cannot be made.
void publish(const std::string& path, size_t bytes, const std::function<void(void*)>& fill);

// Maps `path` once it exists, waiting until `deadline`; DistError on a timeout or a file of
// another size (naming `rank` and the path).
Mapping await(const std::string& path, size_t bytes, std::chrono::steady_clock::time_point deadline, int rank);

}  // namespace wick::dist::detail
