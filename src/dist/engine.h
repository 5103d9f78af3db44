// The transport under dist::Communicator: one rank's collectives over raw contiguous buffers. The
// front end (src/dist/communicator.cpp) has checked shapes, dtypes, devices, peers and roots, and
// keeps the buffers alive until the call (or its group) has finished. Counts are in elements of
// `dtype`; buffers are device memory of device().
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "wick/dist.h"

namespace wick::dist::detail {

class Engine {
 public:
  virtual ~Engine() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual Device device() const = 0;

  virtual void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) = 0;
  // recv holds size() * count elements: rank r's count at r * count.
  virtual void all_gather(const void* send, void* recv, size_t count, DType dtype) = 0;
  // send holds size() * count elements; recv gets the reduction of part rank().
  virtual void reduce_scatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) = 0;
  // On the root send is read; on every rank recv is written.
  virtual void broadcast(const void* send, void* recv, size_t count, DType dtype, int root) = 0;
  virtual void send(const void* buf, size_t count, DType dtype, int peer) = 0;
  virtual void recv(void* buf, size_t count, DType dtype, int peer) = 0;

  // The calls between start and end run as one group (they nest; the front end pairs them).
  virtual void group_start() = 0;
  virtual void group_end() = 0;
  virtual void synchronize() = 0;
  virtual void abort() = 0;
};

using Engines = std::vector<std::shared_ptr<Engine>>;

// CPU ranks through shared memory (src/dist/shm.cpp): n ranks of this process, or one rank of a
// group of processes meeting at the file `rendezvous`.
Engines cpu_local(int n, const Options& options);
std::shared_ptr<Engine> cpu_join(const std::string& rendezvous, int size, int rank, const Options& options);

// The collectives of a GPU backend (Backend::collectives()): NCCL or RCCL.
class GpuCollectives {
 public:
  virtual ~GpuCollectives() = default;
  // "NCCL 2.28.9 (/usr/lib/x86_64-linux-gnu/libnccl.so.2)": the library, loading it if need be.
  virtual std::string describe() const = 0;
  virtual Engines local(const std::vector<Device>& devices, const Options& options) const = 0;
  virtual std::shared_ptr<Engine> join(const std::string& rendezvous, int size, int rank, Device device,
                                       const Options& options) const = 0;
};

}  // namespace wick::dist::detail
