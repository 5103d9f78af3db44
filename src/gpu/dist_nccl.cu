// GPU ranks through NCCL (CUDA) or RCCL (ROCm), which share one API. The library (the system's, or
// the file WICK_NCCL_LIBRARY names) is opened with dlopen when the first communicator is made or
// dist::transport asks, so that wick links without it and a machine without it fails with one
// clear line; the header gives the types. Calls are queued on the device's stream.
//
// Communicators are made in NCCL's blocking mode, as PyTorch makes them: its non-blocking mode
// hands every call to a thread of its own and costs tens of microseconds per call. Making one
// (which waits for every peer) runs on a helper thread, so that it can time out. A watchdog thread
// looks at every communicator every few milliseconds: an error NCCL reports (a peer's connection
// lost), a call stuck inside NCCL (connecting to a peer that is gone) or a call still unfinished
// on the GPU after the timeout (a peer hung or killed) aborts the communicator (ncclCommAbort,
// which ends its kernels and its waits); every later call on it raises DistError with the reason.
#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "dist/engine.h"
#include "dist/rendezvous.h"
#include "backend/registry.h"
#include "gpu/gpu_backend.h"

#if defined(WICK_HAS_NCCL)
#if defined(WICK_BACKEND_HIP)
#include <rccl/rccl.h>
#else
#include <nccl.h>
#endif
#endif

namespace wick::gpu {

#if !defined(WICK_HAS_NCCL)

const dist::detail::GpuCollectives* gpu_collectives() { return nullptr; }

#else

namespace {

using dist::DistError;
using dist::Options;
using dist::ReduceOp;
using dist::detail::Engine;
using dist::detail::Engines;
using wick::detail::str_cat;
using Clock = std::chrono::steady_clock;

#if defined(WICK_BACKEND_HIP)
constexpr const char* kLibrary = "librccl.so.1";
constexpr const char* kName = "RCCL";
#else
constexpr const char* kLibrary = "libnccl.so.2";
constexpr const char* kName = "NCCL";
#endif

// The library's entry points, found with dlsym.
struct Api {
#define WICK_NCCL_FUNCTIONS(X)                                                                                      \
  X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclCommDestroy) X(ncclCommAbort)                      \
  X(ncclCommGetAsyncError) X(ncclGetErrorString) X(ncclGetLastError) X(ncclAllReduce) X(ncclAllGather)              \
  X(ncclReduceScatter) X(ncclBroadcast) X(ncclSend) X(ncclRecv) X(ncclGroupStart) X(ncclGroupEnd)
#define WICK_X(f) decltype(&::f) f = nullptr;
  WICK_NCCL_FUNCTIONS(WICK_X)
#undef WICK_X
  int version = 0;
  std::string path;  // the file loaded
};

// The library file: $WICK_NCCL_LIBRARY (a path or a name for dlopen, to run another build of
// the library than the system's, e.g. the one a Python package ships), else kLibrary.
std::string library_file() {
  const char* chosen = std::getenv("WICK_NCCL_LIBRARY");
  return chosen != nullptr && *chosen != '\0' ? chosen : kLibrary;
}

const Api& api() {
  static const Api a = [] {
    Api a;
    const std::string file = library_file();
    void* lib = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr)
      throw NotSupportedError(str_cat("dist: ", kName, " is not installed: ", file, " did not load (", dlerror(), ")"));
    // Where the loader found it, for describe().
    if (link_map* map = nullptr; dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr)
      a.path = map->l_name;
    auto find = [&](const char* fn) {
      void* f = dlsym(lib, fn);
      if (f == nullptr) throw NotSupportedError(str_cat("dist: ", file, " has no ", fn));
      return f;
    };
#define WICK_X(f) a.f = reinterpret_cast<decltype(a.f)>(find(#f));
    WICK_NCCL_FUNCTIONS(WICK_X)
#undef WICK_X
    a.ncclGetVersion(&a.version);
    return a;
  }();
  return a;
}

std::string error_text(ncclResult_t r, ncclComm_t comm = nullptr) {
  std::string s = str_cat(kName, " error ", static_cast<int>(r), " (", api().ncclGetErrorString(r), ")");
  if (const char* last = api().ncclGetLastError(comm); last != nullptr && *last != '\0') s += str_cat(": ", last);
  return s;
}

// The NCCL type of a dtype; for moving data (not reducing), a dtype NCCL lacks moves as bytes.
bool nccl_type(DType dtype, bool reduce, ncclDataType_t* type, size_t* per_element) {
  *per_element = 1;
  switch (dtype) {
    case DType::U8: *type = ncclUint8; return true;
    case DType::U32: *type = ncclUint32; return true;
    case DType::I32: *type = ncclInt32; return true;
    case DType::I64: *type = ncclInt64; return true;
    case DType::BF16: *type = ncclBfloat16; return true;
    case DType::F16: *type = ncclFloat16; return true;
    case DType::F32: *type = ncclFloat32; return true;
    case DType::F64: *type = ncclFloat64; return true;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
    case DType::F8E4M3: *type = ncclFloat8e4m3; return true;
#endif
    default: break;
  }
  if (reduce) return false;
  *type = ncclUint8;
  *per_element = dtype_size(dtype);
  return true;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
    case ReduceOp::Avg: return ncclAvg;
  }
  return ncclSum;
}

class NcclEngine;

// Watches every live communicator (see the top of the file).
class Watchdog {
 public:
  static Watchdog& get() {
    static Watchdog* w = new Watchdog;  // never destroyed: its thread runs until the process ends
    return *w;
  }
  void add(NcclEngine* e) {
    const std::lock_guard lock(mutex_);
    engines_.push_back(e);
  }
  void remove(NcclEngine* e) {
    const std::lock_guard lock(mutex_);
    std::erase(engines_, e);
  }

 private:
  Watchdog() { std::thread([this] { run(); }).detach(); }
  void run();
  std::mutex mutex_;
  std::vector<NcclEngine*> engines_;
};

class NcclEngine final : public Engine {
 public:
  NcclEngine(ncclComm_t comm, int rank, int size, GpuBackend& backend, const Options& options)
      : comm_(comm), rank_(rank), size_(size), backend_(backend), options_(options) {
    Watchdog::get().add(this);
  }
  ~NcclEngine() override {
    Watchdog::get().remove(this);
    const std::lock_guard lock(mutex_);
    for (auto& c : in_flight_) (void)event_destroy(c.done);
    for (Event e : spare_) (void)event_destroy(e);
    if (!failed_) {
      backend_.activate();
      (void)stream_synchronize(backend_.stream());  // a destructor does not throw
      api().ncclCommDestroy(comm_);
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Device device() const override { return backend_.device(); }

  void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override {
    const auto [type, n] = type_of(dtype, true, "all_reduce");
    call("all_reduce", [&] { return api().ncclAllReduce(send, recv, count * n, type, nccl_op(op), comm_, backend_.stream()); });
  }
  void all_gather(const void* send, void* recv, size_t count, DType dtype) override {
    const auto [type, n] = type_of(dtype, false, "all_gather");
    call("all_gather", [&] { return api().ncclAllGather(send, recv, count * n, type, comm_, backend_.stream()); });
  }
  void reduce_scatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override {
    const auto [type, n] = type_of(dtype, true, "reduce_scatter");
    call("reduce_scatter",
         [&] { return api().ncclReduceScatter(send, recv, count * n, type, nccl_op(op), comm_, backend_.stream()); });
  }
  void broadcast(const void* send, void* recv, size_t count, DType dtype, int root) override {
    const auto [type, n] = type_of(dtype, false, "broadcast");
    call("broadcast", [&] { return api().ncclBroadcast(send, recv, count * n, type, root, comm_, backend_.stream()); });
  }
  void send(const void* buf, size_t count, DType dtype, int peer) override {
    const auto [type, n] = type_of(dtype, false, "send");
    call("send", [&] { return api().ncclSend(buf, count * n, type, peer, comm_, backend_.stream()); });
  }
  void recv(void* buf, size_t count, DType dtype, int peer) override {
    const auto [type, n] = type_of(dtype, false, "recv");
    call("recv", [&] { return api().ncclRecv(buf, count * n, type, peer, comm_, backend_.stream()); });
  }

  void group_start() override {
    check("group");
    api().ncclGroupStart();
    ++t_depth;
    t_group.push_back(this);
  }
  void group_end() override {
    if (t_depth > 1) {
      api().ncclGroupEnd();
      --t_depth;
      return;
    }
    // The outermost end launches the group (and may wait inside NCCL for peers: every communicator
    // of the group is watched while it does), then each communicator marks its work.
    std::vector<NcclEngine*> engines = std::move(t_group);
    t_group.clear();
    for (NcclEngine* e : engines) e->calling_since_.store(Clock::now().time_since_epoch().count());
    const ncclResult_t r = api().ncclGroupEnd();
    --t_depth;
    for (NcclEngine* e : engines) e->calling_since_.store(0);
    for (NcclEngine* e : engines) e->after_launch("group", r);
  }

  // Looks at the calls in flight itself (the watchdog's look, without its 5 ms period), until all
  // have finished or one has failed; an overdue one fails, so this ends.
  void synchronize() override {
    for (int spins = 0;; ++spins) {
      {
        const std::lock_guard lock(mutex_);
        retire_locked();
        if (failed_) throw DistError(str_cat("dist: synchronize on rank ", rank_, ": ", reason_));
        if (in_flight_.empty()) return;
      }
      if (spins < 1000)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  void abort() override {
    while (t_depth > 0) {  // a group this thread left open ends first
      api().ncclGroupEnd();
      --t_depth;
    }
    std::erase(t_group, this);
    fail(str_cat("rank ", rank_, " aborted the group"));
  }

  // The watchdog's look: finished work retired, an error or an overdue call aborts.
  void watch() {
    const std::lock_guard lock(mutex_);
    retire_locked();
  }

 private:
  struct InFlight {
    const char* op;
    Event done;
    Clock::time_point queued;
  };

  // Retires the calls that have finished; fails on an error NCCL reports or an overdue call.
  void retire_locked() {
    if (failed_) return;
    ncclResult_t state = ncclSuccess;
    if (api().ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state != ncclSuccess)
      return fail_locked(error_text(state, comm_));
    if (const int64_t since = calling_since_.load(); since != 0 && Clock::now().time_since_epoch().count() - since >
                                                                        std::chrono::nanoseconds(options_.timeout).count())
      return fail_locked(str_cat("a call still inside ", kName, " after ", options_.timeout.count(), " ms (a peer failed or stopped)"));
    while (!in_flight_.empty()) {
      InFlight& c = in_flight_.front();
      const Status s = event_query(c.done);
      if (s == kNotReady) {
        if (Clock::now() - c.queued > options_.timeout)
          return fail_locked(str_cat(c.op, " unfinished after ", options_.timeout.count(), " ms (a peer failed or stopped)"));
        return;
      }
      spare_.push_back(c.done);
      in_flight_.pop_front();
    }
  }

  std::pair<ncclDataType_t, size_t> type_of(DType dtype, bool reduce, const char* op) const {
    ncclDataType_t t;
    size_t n;
    if (!nccl_type(dtype, reduce, &t, &n))
      throw NotSupportedError(str_cat("dist: ", op, " of ", dtype, " on ", device(), ": ", kName, " ", api().version,
                                      " has no ", dtype, " reduction"));
    return {t, n};
  }

  void check(const char* op) {
    const std::lock_guard lock(mutex_);
    if (failed_) throw DistError(str_cat("dist: ", op, " on rank ", rank_, ": ", reason_));
  }

  // Hands a call to NCCL (which may wait inside for a peer the first time: watched meanwhile).
  template <typename F>
  void call(const char* op, F&& enqueue) {
    check(op);
    backend_.activate();
    if (t_depth > 0) {
      enqueue();  // its error, if any, comes from the group's end
      return;
    }
    calling_since_.store(Clock::now().time_since_epoch().count());
    const ncclResult_t r = enqueue();
    calling_since_.store(0);
    after_launch(op, r);
  }

  // After a call (or a group) is handed to NCCL: raise its error (or the watchdog's reason, where
  // it aborted the call), or record an event for the watchdog.
  void after_launch(const char* op, ncclResult_t r) {
    {
      const std::lock_guard lock(mutex_);
      if (failed_) throw DistError(str_cat("dist: ", op, " on rank ", rank_, ": ", reason_));
    }
    if (r != ncclSuccess) {
      const std::string why = error_text(r, comm_);
      fail(why);
      throw DistError(str_cat("dist: ", op, " on rank ", rank_, ": ", why));
    }
    // A call recorded into a graph (wick::Graph, a split model's recorded decode step) has not
    // run: it runs with each replay, which the watchdog does not see.
    if (capturing(backend_.stream())) return;
    backend_.activate();  // an event belongs to the device of the stream it is recorded on
    Event e = nullptr;
    {
      const std::lock_guard lock(mutex_);
      if (!spare_.empty()) {
        e = spare_.back();
        spare_.pop_back();
      }
    }
    if (e == nullptr) WICK_GPU_CHECK(event_create_untimed(&e));
    WICK_GPU_CHECK(event_record(e, backend_.stream()));
    const std::lock_guard lock(mutex_);
    in_flight_.push_back({op, e, Clock::now()});
  }

  void fail(const std::string& why) {
    const std::lock_guard lock(mutex_);
    fail_locked(why);
  }
  void fail_locked(const std::string& why) {
    if (failed_) return;
    failed_ = true;
    reason_ = why;
    api().ncclCommAbort(comm_);  // ends the kernels that wait for a peer
  }

  static thread_local int t_depth;
  static thread_local std::vector<NcclEngine*> t_group;

  ncclComm_t comm_;
  int rank_, size_;
  GpuBackend& backend_;
  Options options_;
  std::mutex mutex_;
  std::atomic<int64_t> calling_since_{0};  // when the call now inside NCCL began (steady clock), or 0
  std::deque<InFlight> in_flight_;
  std::vector<Event> spare_;  // events of finished calls, recorded again by later ones
  bool failed_ = false;
  std::string reason_;
};

thread_local int NcclEngine::t_depth = 0;
thread_local std::vector<NcclEngine*> NcclEngine::t_group;

void Watchdog::run() {
  for (;;) {
    {
      const std::lock_guard lock(mutex_);
      for (NcclEngine* e : engines_) e->watch();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

GpuBackend& gpu_of(Device d) { return static_cast<GpuBackend&>(backend_for(d, "dist")); }

// Runs `make` (NCCL's communicator setup, which waits for every peer) on a thread of its own and
// waits for it up to the timeout. Past it, DistError; the thread is left to NCCL (its result, if
// it ever comes, is dropped).
std::vector<ncclComm_t> make_comms(size_t n, const std::function<ncclResult_t(std::vector<ncclComm_t>&)>& make,
                                   const Options& options, const std::string& what) {
  struct Result {
    std::vector<ncclComm_t> comms;
    ncclResult_t r = ncclSuccess;
  };
  auto result = std::make_shared<Result>();
  result->comms.assign(n, nullptr);
  std::packaged_task<void()> task([result, make] { result->r = make(result->comms); });
  std::future<void> done = task.get_future();
  std::thread(std::move(task)).detach();
  if (done.wait_for(options.timeout) != std::future_status::ready)
    throw DistError(str_cat("dist: ", what, ": not connected after ", options.timeout.count(), " ms (a peer missing or stopped)"));
  if (result->r != ncclSuccess) {
    const std::string why = error_text(result->r);
    for (ncclComm_t c : result->comms)
      if (c != nullptr) api().ncclCommAbort(c);
    throw DistError(str_cat("dist: ", what, ": ", why));
  }
  return result->comms;
}

class NcclCollectives final : public dist::detail::GpuCollectives {
 public:
  std::string describe() const override {
    const int v = api().version;  // NCCL's code: major * 10000 + minor * 100 + patch
    return str_cat(kName, " ", v / 10000, ".", v / 100 % 100, ".", v % 100, " (", api().path, ")");
  }
  Engines local(const std::vector<Device>& devices, const Options& options) const override {
    const Api& a = api();
    ncclUniqueId id;
    if (const ncclResult_t r = a.ncclGetUniqueId(&id); r != ncclSuccess)
      throw DistError(str_cat("dist: local: ncclGetUniqueId: ", error_text(r)));
    const int n = static_cast<int>(devices.size());
    std::vector<GpuBackend*> backends;
    for (Device d : devices) backends.push_back(&gpu_of(d));
    const std::vector<ncclComm_t> comms = make_comms(
        devices.size(),
        [&a, id, n, backends](std::vector<ncclComm_t>& out) {
          a.ncclGroupStart();
          for (int i = 0; i < n; ++i) {
            backends[static_cast<size_t>(i)]->activate();
            a.ncclCommInitRank(&out[static_cast<size_t>(i)], n, id, i);
          }
          return a.ncclGroupEnd();
        },
        options, str_cat("local: making ", n, " ranks"));
    Engines engines;
    for (int i = 0; i < n; ++i)
      engines.push_back(std::make_shared<NcclEngine>(comms[static_cast<size_t>(i)], i, n, *backends[static_cast<size_t>(i)], options));
    return engines;
  }

  std::shared_ptr<Engine> join(const std::string& rendezvous, int size, int rank, Device device,
                               const Options& options) const override {
    const Api& a = api();
    const Clock::time_point deadline = Clock::now() + options.timeout;
    ncclUniqueId id;
    if (rank == 0) {
      if (const ncclResult_t r = a.ncclGetUniqueId(&id); r != ncclSuccess)
        throw DistError(str_cat("dist: join: ncclGetUniqueId: ", error_text(r)));
      dist::detail::publish(rendezvous, sizeof(id), [&](void* p) { std::memcpy(p, &id, sizeof(id)); });
    } else {
      const dist::detail::Mapping m = dist::detail::await(rendezvous, sizeof(id), deadline, rank);
      std::memcpy(&id, m.data(), sizeof(id));
    }
    GpuBackend* backend = &gpu_of(device);
    Options rest = options;
    rest.timeout = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()), std::chrono::milliseconds(1));
    const std::vector<ncclComm_t> comm = make_comms(
        1,
        [&a, id, size, rank, backend](std::vector<ncclComm_t>& out) {
          backend->activate();
          return a.ncclCommInitRank(&out[0], size, id, rank);
        },
        rest, str_cat("join: making rank ", rank, " of ", size, " on ", device));
    if (rank == 0) ::unlink(rendezvous.c_str());  // every rank has read it: they are connected
    return std::make_shared<NcclEngine>(comm[0], rank, size, *backend, options);
  }
};

}  // namespace

const dist::detail::GpuCollectives* gpu_collectives() {
  static const NcclCollectives c;
  return &c;
}

#endif

}  // namespace wick::gpu
