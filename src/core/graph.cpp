// wick::Graph (include/wick/graph.h): a GPU's recording (gpu_api.h), or on the CPU, whose ops the
// host runs anyway, the function itself, called again on each replay.
#include "wick/graph.h"

#include "backend/registry.h"
#include "wick/error.h"

#if WICK_HAS_GPU
#include "gpu/gpu_api.h"
#endif

namespace wick {

struct Graph::Impl {
  Device device;
  std::function<void()> replay;
};

Graph Graph::record(Device device, std::function<void()> ops) {
  if (!ops) throw Error(detail::str_cat("Graph::record: no function to record on ", device));
  backend_for(device, "Graph::record");  // a DeviceError for a device not present
  Graph g;
#if WICK_HAS_GPU
  if (device.is_gpu()) ops = gpu::gpu_record(device.index(), std::move(ops));
#endif
  g.impl_ = std::make_shared<Impl>(Impl{device, std::move(ops)});
  return g;
}

void Graph::replay() const {
  if (!impl_) throw Error("Graph::replay: an undefined graph (made by Graph(), not Graph::record)");
  impl_->replay();
}

Device Graph::device() const {
  if (!impl_) throw Error("Graph::device: an undefined graph");
  return impl_->device;
}

}  // namespace wick
