// dist::Communicator's front end: argument checks, the tensors made contiguous (the dim of a
// gather or scatter moved to the front), outputs allocated, buffers kept alive through a group, and
// the call handed to the rank's Engine (shared memory on the CPU, NCCL or RCCL on a GPU).
#include <algorithm>
#include <cstdlib>
#include <exception>
#include <functional>
#include <string_view>
#include <thread>

#include "backend/backend.h"
#include "backend/registry.h"
#include "core/checked.h"
#include "dist/engine.h"
#if WICK_HAS_GPU
#include "gpu/gpu_api.h"
#endif
#include "wick/dist.h"

namespace wick::dist {

namespace {

using detail::Engine;
using wick::detail::str_cat;

// The open group of this thread: its depth, the engines it has started, and the storage its calls
// read and write, kept until the group ends.
struct GroupState {
  int depth = 0;
  std::vector<Engine*> engines;
  std::vector<StoragePtr> keep;
  std::vector<std::function<void()>> after;  // what the calls do with their results once they are there
};
thread_local GroupState t_group;

// The collectives of a GPU device's backend; NotSupportedError in a build without NCCL's or
// RCCL's header.
const detail::GpuCollectives& gpu_collectives(Device device, const char* op) {
  const detail::GpuCollectives* c = nullptr;
#if WICK_HAS_GPU
  if (device.type() == gpu::kBuiltDeviceType) c = gpu::gpu_collectives();
#endif
  if (c == nullptr) throw NotSupportedError(str_cat("dist: ", op, ": no collectives for ", device, " (wick was built without NCCL's or RCCL's header)"));
  return *c;
}

std::string describe(const Tensor& x) { return str_cat(x.shape(), " ", x.dtype(), " on ", x.device()); }

void check_reducible(const Tensor& x, ReduceOp op, const char* what) {
  if (x.dtype() == DType::I16)
    throw DTypeError(str_cat("dist: ", what, ": ", name(op), " of ", describe(x), " (no reduction of i16: NCCL has no 16-bit integer)"));
  if (op == ReduceOp::Avg && !is_float(x.dtype()))
    throw DTypeError(str_cat("dist: ", what, ": avg of ", describe(x), " (avg takes float dtypes)"));
}

}  // namespace

const char* name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    case ReduceOp::Avg: return "avg";
  }
  return "?";
}

std::string transport(Device device) {
  if (device.is_cpu()) return "shared memory";
  return gpu_collectives(device, "transport").describe();
}

Communicator::Communicator(std::shared_ptr<Engine> engine) : engine_(std::move(engine)) {}
Communicator::~Communicator() = default;

std::vector<Communicator> Communicator::local(const std::vector<Device>& devices, const Options& options) {
  if (devices.empty()) throw Error("dist: local: no devices");
  if (options.timeout.count() <= 0) throw Error(str_cat("dist: local: timeout of ", options.timeout.count(), " ms"));
  const Device first = devices.front();
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i].type() != first.type())
      throw DeviceError(str_cat("dist: local: ranks on ", first, " and ", devices[i], " (one kind of device per group)"));
    for (size_t j = 0; j < i && !first.is_cpu(); ++j)
      if (devices[j] == devices[i])
        throw DeviceError(str_cat("dist: local: ", devices[i], " twice (a GPU holds one rank of a group)"));
  }
  detail::Engines engines;
  if (first.is_cpu()) {
    engines = detail::cpu_local(static_cast<int>(devices.size()), options);
  } else {
    for (Device d : devices) backend_for(d, "dist: local");  // a missing device or backend names itself
    engines = gpu_collectives(first, "local").local(devices, options);
  }
  std::vector<Communicator> out;
  for (auto& e : engines) out.push_back(Communicator(std::move(e)));
  return out;
}

Communicator Communicator::join(const std::string& rendezvous, int size, int rank, Device device, const Options& options) {
  if (size < 1 || rank < 0 || rank >= size)
    throw Error(str_cat("dist: join: rank ", rank, " of ", size, " (ranks are 0 to size - 1)"));
  if (rendezvous.empty()) throw Error("dist: join: an empty rendezvous path");
  if (options.timeout.count() <= 0) throw Error(str_cat("dist: join: timeout of ", options.timeout.count(), " ms"));
  if (device.is_cpu()) return Communicator(detail::cpu_join(rendezvous, size, rank, options));
  backend_for(device, "dist: join");  // a missing device or backend names itself
  return Communicator(gpu_collectives(device, "join").join(rendezvous, size, rank, device, options));
}

Communicator Communicator::from_env(Device device, const Options& options) {
  auto integer = [](const char* var) {
    const char* v = std::getenv(var);
    if (v == nullptr || *v == '\0') throw Error(str_cat("dist: from_env: ", var, " is not set (wick launch sets it)"));
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end != '\0' || n < 0 || n > (1 << 20)) throw Error(str_cat("dist: from_env: ", var, "=\"", v, "\" is not a rank count"));
    return static_cast<int>(n);
  };
  const int rank = integer("WICK_RANK"), size = integer("WICK_WORLD_SIZE");
  const char* path = std::getenv("WICK_RENDEZVOUS");
  if (path == nullptr || *path == '\0') throw Error("dist: from_env: WICK_RENDEZVOUS is not set (wick launch sets it)");
  return join(path, size, rank, device, options);
}

const Engine& Communicator::engine(const char* op) const {
  if (engine_ == nullptr) throw Error(str_cat("dist: ", op, ": an undefined communicator"));
  return *engine_;
}

int Communicator::rank() const { return engine("rank").rank(); }
int Communicator::size() const { return engine("size").size(); }
Device Communicator::device() const { return engine("device").device(); }

namespace {

// One call: its checked, contiguous input and its output, both kept alive through a group.
class Call {
 public:
  Call(Engine& engine, const char* op) : engine_(engine), op_(op) {
    if (t_group.depth > 0 && std::find(t_group.engines.begin(), t_group.engines.end(), &engine) == t_group.engines.end()) {
      engine.group_start();
      t_group.engines.push_back(&engine);
    }
  }
  // x on this rank's device, made contiguous with `dim` first.
  Tensor input(const Tensor& x, int dim = 0) {
    if (!x.defined()) throw Error(str_cat("dist: ", op_, ": an undefined tensor"));
    if (x.device() != engine_.device())
      throw DeviceError(str_cat("dist: ", op_, ": a tensor on ", x.device(), " for the rank on ", engine_.device()));
    Tensor c = (dim == 0 ? x : x.transpose(0, dim)).contiguous();
    keep(c);
    return c;
  }
  Tensor output(const Shape& shape, DType dtype) {
    Backend& b = backend_for(engine_.device(), op_);
    Tensor out(b.alloc(dtype, shape.numel()), Layout(shape), dtype);
    keep(out);
    return out;
  }
  static const void* ptr(const Tensor& t) {
    return static_cast<const char*>(t.storage()->data()) + t.offset() * dtype_size(t.dtype());
  }
  static void* mut(const Tensor& t) { return const_cast<void*>(ptr(t)); }

 private:
  void keep(const Tensor& t) {
    if (t_group.depth > 0) t_group.keep.push_back(t.storage());
  }
  Engine& engine_;
  const char* op_;
};

// The transport's result `out` (the joined dim first) with that dim moved back to `dim`: a view
// copied into a tensor of its own, at once, or inside a group once the group has run.
Tensor dim_back(const Tensor& out, int dim) {
  if (dim == 0) return out;
  const Tensor view = out.transpose(0, dim);
  if (t_group.depth == 0) return view.contiguous();
  Tensor result(backend_for(out.device(), "dist").alloc(out.dtype(), out.numel()), Layout(view.shape()), out.dtype());
  t_group.after.push_back([result, view]() mutable { result.copy_from(view); });
  return result;
}

int check_dim(const Tensor& x, int dim, const char* op) {
  if (x.rank() == 0) throw ShapeError(str_cat("dist: ", op, ": a rank-0 tensor has no dim to join along"));
  return normalize_dim(dim, x.rank(), op);
}

void check_peer(int peer, int size, const char* what, const char* op) {
  if (peer < 0 || peer >= size) throw Error(str_cat("dist: ", op, ": ", what, " ", peer, " of ", size, " ranks"));
}

}  // namespace

Tensor Communicator::all_reduce(const Tensor& x, ReduceOp op) const {
  Engine& e = const_cast<Engine&>(engine("all_reduce"));
  Call call(e, "all_reduce");
  const Tensor in = call.input(x);
  check_reducible(x, op, "all_reduce");
  Tensor out = call.output(in.shape(), in.dtype());
  if (in.numel() > 0) e.all_reduce(Call::ptr(in), Call::mut(out), static_cast<size_t>(in.numel()), in.dtype(), op);
  return out;
}

void Communicator::all_reduce_(Tensor& x, ReduceOp op) const {
  Engine& e = const_cast<Engine&>(engine("all_reduce_"));
  Call call(e, "all_reduce_");
  if (x.defined() && !x.is_contiguous())
    throw ShapeError(str_cat("dist: all_reduce_: ", describe(x), " is not contiguous (in place needs one block)"));
  const Tensor in = call.input(x);
  check_reducible(x, op, "all_reduce_");
  if (in.numel() > 0) e.all_reduce(Call::ptr(in), Call::mut(in), static_cast<size_t>(in.numel()), in.dtype(), op);
}

Tensor Communicator::all_gather(const Tensor& x, int dim) const {
  Engine& e = const_cast<Engine&>(engine("all_gather"));
  Call call(e, "all_gather");
  const int d = check_dim(x, dim, "dist: all_gather");
  const Tensor in = call.input(x, d);
  Shape dims = in.shape();
  dims[0] = checked::mul(dims[0], e.size(), "dist: all_gather", " of ", describe(x), " over ", e.size(), " ranks");
  Tensor out = call.output(dims, in.dtype());
  if (in.numel() > 0) e.all_gather(Call::ptr(in), Call::mut(out), static_cast<size_t>(in.numel()), in.dtype());
  return dim_back(out, d);
}

Tensor Communicator::reduce_scatter(const Tensor& x, ReduceOp op, int dim) const {
  Engine& e = const_cast<Engine&>(engine("reduce_scatter"));
  Call call(e, "reduce_scatter");
  const int d = check_dim(x, dim, "dist: reduce_scatter");
  check_reducible(x, op, "reduce_scatter");
  if (x.shape()[d] % e.size() != 0)
    throw ShapeError(str_cat("dist: reduce_scatter: dim ", d, " of ", describe(x), " does not split in ", e.size(), " equal parts"));
  const Tensor in = call.input(x, d);
  Shape dims = in.shape();
  dims[0] /= e.size();
  Tensor out = call.output(dims, in.dtype());
  if (out.numel() > 0)
    e.reduce_scatter(Call::ptr(in), Call::mut(out), static_cast<size_t>(out.numel()), in.dtype(), op);
  return dim_back(out, d);
}

Tensor Communicator::broadcast(const Tensor& x, int root) const {
  Engine& e = const_cast<Engine&>(engine("broadcast"));
  check_peer(root, e.size(), "root", "broadcast");
  Call call(e, "broadcast");
  const Tensor in = call.input(x);
  Tensor out = call.output(in.shape(), in.dtype());
  if (in.numel() > 0) e.broadcast(Call::ptr(in), Call::mut(out), static_cast<size_t>(in.numel()), in.dtype(), root);
  return out;
}

void Communicator::send(const Tensor& x, int peer) const {
  Engine& e = const_cast<Engine&>(engine("send"));
  check_peer(peer, e.size(), "peer", "send");
  if (peer == e.rank()) throw Error(str_cat("dist: send: rank ", peer, " to itself"));
  Call call(e, "send");
  const Tensor in = call.input(x);
  if (in.numel() > 0) e.send(Call::ptr(in), static_cast<size_t>(in.numel()), in.dtype(), peer);
}

Tensor Communicator::recv(const Shape& shape, DType dtype, int peer) const {
  Engine& e = const_cast<Engine&>(engine("recv"));
  check_peer(peer, e.size(), "peer", "recv");
  if (peer == e.rank()) throw Error(str_cat("dist: recv: rank ", peer, " from itself"));
  Call call(e, "recv");
  Tensor out = call.output(shape, dtype);
  if (out.numel() > 0) e.recv(Call::mut(out), static_cast<size_t>(out.numel()), dtype, peer);
  return out;
}

void Communicator::synchronize() const { const_cast<Engine&>(engine("synchronize")).synchronize(); }
void Communicator::abort() const { const_cast<Engine&>(engine("abort")).abort(); }

void on_threads(int n, const std::function<void(int)>& f) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(std::max(n, 0)));
  auto run = [&f, &errors](int r) {
    try {
      f(r);
    } catch (...) {
      errors[static_cast<size_t>(r)] = std::current_exception();
    }
  };
  // Rank 0 on this thread: a rank on a thread of its own makes a second OpenMP pool beside the
  // caller's, whose idle workers compete with the working ones for the processors (on 2 cores, a
  // 1B-shape Q4_0 decode of `wick bench-model`: 25.0 tokens/s so, 27.4-29.9 this way; with
  // OMP_WAIT_POLICY=active, where idle workers never sleep, 14.4 against 29.1).
  std::vector<std::thread> threads;
  for (int r = 1; r < n; ++r) threads.emplace_back(run, r);
  if (n > 0) run(0);
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

void group(const std::function<void()>& calls) {
  GroupState& g = t_group;
  ++g.depth;
  // Ends what this level opened: the outermost level runs every engine's group, in the order the
  // engines were first used, and releases the buffers.
  auto finish = [&g](bool ok) {
    if (--g.depth > 0) return;
    std::vector<Engine*> engines = std::move(g.engines);
    g.engines.clear();
    std::exception_ptr first;
    for (Engine* e : engines) {
      try {
        e->group_end();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    g.keep.clear();
    std::vector<std::function<void()>> after = std::move(g.after);
    g.after.clear();
    if (ok && first) std::rethrow_exception(first);
    if (ok)
      for (auto& f : after) f();
  };
  try {
    calls();
  } catch (...) {
    // A call refused (or a callback threw) partway: the group's calls no longer match the other
    // ranks', so its communicators are aborted, and the peers learn of it instead of waiting.
    if (g.depth == 1) {
      for (Engine* e : g.engines) e->abort();  // ends their groups too
      g.engines.clear();
    }
    finish(false);
    throw;
  }
  finish(true);
}

}  // namespace wick::dist
