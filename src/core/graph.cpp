// wick::Graph (include/wick/graph.h) over the backends' recordings, and the recording of a backend
// without one of its own: the function itself, called again on each replay.
#include "wick/graph.h"

#include "backend/registry.h"
#include "wick/error.h"

namespace wick {

namespace {

class CallAgain final : public Backend::Recording {
 public:
  explicit CallAgain(std::function<void()> ops) : ops_(std::move(ops)) {}
  void replay() override { ops_(); }

 private:
  std::function<void()> ops_;
};

}  // namespace

std::unique_ptr<Backend::Recording> Backend::record(std::function<void()> ops) {
  return std::make_unique<CallAgain>(std::move(ops));
}

struct Graph::Impl {
  Device device;
  std::unique_ptr<Backend::Recording> recording;
};

Graph Graph::record(Device device, std::function<void()> ops) {
  if (!ops) throw Error(detail::str_cat("Graph::record: no function to record on ", device));
  Backend& backend = backend_for(device, "Graph::record");
  Graph g;
  g.impl_ = std::make_shared<Impl>(Impl{device, backend.record(std::move(ops))});
  return g;
}

void Graph::replay() const {
  if (!impl_) throw Error("Graph::replay: an undefined graph (made by Graph(), not Graph::record)");
  impl_->recording->replay();
}


Device Graph::device() const {
  if (!impl_) throw Error("Graph::device: an undefined graph");
  return impl_->device;
}

}  // namespace wick
