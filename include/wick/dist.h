// Collectives over several devices: a Communicator is one rank of a group, on one device, and its
// calls run the group's collective ops (all_reduce, all_gather, reduce_scatter, broadcast, send and
// recv) on tensors. GPUs go through NCCL (CUDA) or RCCL (ROCm), loaded when the first GPU
// communicator is made; CPU ranks exchange data through shared memory, within a process or across
// processes of one host. docs/distributed.md says how to run across the GPUs of a host.
//
// Every rank of a group calls the same collectives in the same order with tensors of the same shape
// and dtype (send and recv pair up between two ranks). On a GPU a call is queued on the device's
// stream, like every other op, and returns at once; on the CPU it returns when its result is there.
// A rank that calls something else, fails or stops answering makes every other rank's call raise
// DistError (within Options::timeout) instead of hanging; the communicator is then unusable.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "wick/device.h"
#include "wick/error.h"
#include "wick/shape.h"
#include "wick/tensor.h"

namespace wick::dist {

// A peer failed, stopped answering within the timeout, or called a different collective; or the
// transport (NCCL, RCCL) reported an error. The message names the op, this rank and the cause.
class DistError : public Error {
 public:
  using Error::Error;
};

// How all_reduce and reduce_scatter combine the ranks' values, element by element. Avg is for float
// dtypes only. I16 has no reduction (NCCL and RCCL have no 16-bit integer type); it still moves
// through all_gather, broadcast and send/recv, as every dtype does.
enum class ReduceOp { Sum, Max, Min, Avg };
const char* name(ReduceOp op);

struct Options {
  // How long a call waits for its peers (and a GPU collective may stay unfinished) before it raises
  // DistError and aborts the group.
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
};

namespace detail {
class Engine;
}

class Communicator {
 public:
  Communicator() = default;  // undefined: every call throws
  // Copies are handles to the same rank (as Tensor's are to the same storage).
  Communicator(const Communicator&) = default;
  Communicator& operator=(const Communicator&) = default;
  ~Communicator();

  // The ranks of one process: rank i on devices[i]. GPUs must be distinct devices of one backend;
  // CPU ranks may repeat Device::cpu(). One thread may drive every rank inside dist::group(), or
  // each rank may have a thread of its own.
  static std::vector<Communicator> local(const std::vector<Device>& devices, const Options& options = {});

  // Rank `rank` of `size` ranks spread over processes of one host (one per device), meeting at
  // `rendezvous`: the path of a file that does not exist yet, in a directory every rank can write
  // (rank 0 creates it; the others wait for it, up to the timeout). `wick launch` gives each
  // process its own path, rank and size.
  static Communicator join(const std::string& rendezvous, int size, int rank, Device device, const Options& options = {});
  // join() with the rank, size and path that `wick launch` sets (WICK_RANK, WICK_WORLD_SIZE,
  // WICK_RENDEZVOUS); an Error naming the variable where one is missing or malformed.
  static Communicator from_env(Device device, const Options& options = {});

  bool defined() const { return engine_ != nullptr; }
  int rank() const;
  int size() const;
  Device device() const;

  // The element-wise combination of every rank's x (same shape and dtype on every rank): a new
  // tensor of x's shape. Every rank gets the same bits.
  Tensor all_reduce(const Tensor& x, ReduceOp op = ReduceOp::Sum) const;
  // all_reduce into x itself (contiguous, on this rank's device): no new tensor, as torch's
  // all_reduce works. ShapeError for a non-contiguous x.
  void all_reduce_(Tensor& x, ReduceOp op = ReduceOp::Sum) const;
  // The ranks' x concatenated along `dim` in rank order: x's shape with dim size() times longer.
  Tensor all_gather(const Tensor& x, int dim = 0) const;
  // all_reduce, then this rank's part of the result: x's dim `dim` (a multiple of size()) split in
  // size() equal parts, part rank().
  Tensor reduce_scatter(const Tensor& x, ReduceOp op = ReduceOp::Sum, int dim = 0) const;
  // Rank root's x, on every rank (the others' x gives the shape and dtype to expect).
  Tensor broadcast(const Tensor& x, int root = 0) const;
  // x to rank `peer`, which calls recv with its shape and dtype.
  void send(const Tensor& x, int peer) const;
  Tensor recv(const Shape& shape, DType dtype, int peer) const;

  // Waits until every call made so far has finished; raises what failed.
  void synchronize() const;
  // Ends the group's work now: every call in flight (here and, through the failure it sees, on
  // the other ranks) ends with DistError, and so does every later one.
  void abort() const;

 private:
  explicit Communicator(std::shared_ptr<detail::Engine> engine);
  const detail::Engine& engine(const char* op) const;
  std::shared_ptr<detail::Engine> engine_;
};

// What carries the collectives of ranks on `device`'s kind of device: "shared memory" for the CPU;
// for GPUs the library, its version and the file loaded, e.g. "NCCL 2.28.9
// (/usr/lib/x86_64-linux-gnu/libnccl.so.2)". The library is the system's libnccl.so.2
// (librccl.so.1 on ROCm) unless WICK_NCCL_LIBRARY names another file. Loads it; NotSupportedError
// where it is missing or the build has no collectives.
std::string transport(Device device);

// Runs f(0), ..., f(n - 1) each on a thread of its own (the ranks of local() communicators, one
// thread per rank) and waits for all; then rethrows the lowest rank's exception, if any. Rank 0
// runs on the calling thread, so that one rank (on the CPU: one OpenMP team) makes no second pool
// of threads beside the caller's.
void on_threads(int n, const std::function<void(int rank)>& f);

// Runs `calls` as one group: the collectives they make start together when it returns (NCCL's
// ncclGroupStart/ncclGroupEnd), so that one thread can drive several ranks, and a rank can send to
// and receive from a peer at once. Tensors returned inside hold their values once group()
// returns. Groups nest; the outermost one runs them.
void group(const std::function<void()>& calls);

}  // namespace wick::dist
