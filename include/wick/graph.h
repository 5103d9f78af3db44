// Recorded work: the ops a function queues on one device, recorded once and replayed many times,
// so that a step a model repeats (a decode step) costs the host one launch instead of one per op.
// On a GPU a Graph is a CUDA or HIP graph; on the CPU, whose ops the host runs anyway, replay()
// calls the function again. Both give the same results as running the function.
//
// A recording fixes everything the host passes to the ops: shapes, strides, scalars, and the
// memory each op reads and writes. So:
//   - inputs are tensors made before recording, whose contents the caller changes between replays
//     (copy_from, slice_set); results are written into tensors made before recording
//     (copy_from). A tensor the function makes is a temporary: it must be gone when the function
//     returns (an Error otherwise), and its memory belongs to the Graph, which holds it for
//     its lifetime (memory_use does not count it). On a GPU the graphs of a device take that
//     memory from one arena they share (they run one at a time), so that their kernels follow
//     each other with no allocation between them; a recording larger than the arena takes the
//     rest from the device's pool, and the arena grows for the recordings after it;
//   - the function may not copy between the host and the device or wait for the device
//     (to_vector, item, synchronize, a tensor made from host values): an Error names the call;
//   - the function should have run once normally before, so that the libraries it calls have made
//     their handles and workspaces (a workspace made while recording is an Error, as above);
//   - while recording, no other thread may queue work to the device.
// An error inside the function ends the recording, discards it and reaches the caller.
#pragma once

#include <functional>
#include <memory>

#include "wick/device.h"

namespace wick {

class Graph {
 public:
  Graph() = default;  // undefined: replay() is an Error

  // The ops that `ops` queues on `device`, recorded; nothing runs until replay().
  static Graph record(Device device, std::function<void()> ops);

  // Queues the recorded ops on the device (asynchronously on a GPU, like any op).
  void replay() const;
  bool defined() const { return impl_ != nullptr; }
  Device device() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace wick
