// CPU ranks: collectives through shared memory, between threads of one process (an anonymous
// mapping) or between processes of one host (a file that rank 0 creates at the rendezvous path and
// the others map).
//
// The mapping holds a header, one slot per rank with two step counters, one slot per ordered pair
// of ranks, one area of kArea bytes per rank and one of kPairArea per pair. A collective runs in
// steps of at most one area of data each, numbered across the rank's collectives; in step s a rank
//   1. waits until every rank has read step s - 1 (its area is free again),
//   2. writes its part of the chunk and a description of the call into its area, sets posted = s,
//   3. waits until every rank has posted s, checks that all describe the same call, computes its
//      output chunk from every rank's area (reductions in rank order, so all ranks get the same
//      bits), and sets consumed = s.
// A send writes a chunk into the pair's area once the receiver has read the last one; the receiver
// copies it out. Every call is a state machine that advances without blocking (progress()): a call
// outside a group loops on it; a group's calls, queued per thread, advance together at its end, so
// that one thread can drive every rank of a process. Waiting spins, then sleeps; it checks the
// group's failure flag, the peers' processes and the timeout, and a failure is written into the
// header so that every rank raises it.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <new>
#include <thread>
#include <type_traits>

#include "core/dispatch.h"
#include "dist/engine.h"
#include "dist/rendezvous.h"

namespace wick::dist::detail {

namespace {

using wick::detail::str_cat;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kMagic = 0x7473696468636977;  // "wickdist"
constexpr size_t kArea = size_t(1) << 20;
constexpr size_t kPairArea = size_t(256) << 10;
constexpr int kMaxRanks = 64;

enum class Kind : int32_t { AllReduce, AllGather, ReduceScatter, Broadcast, Send };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::AllReduce: return "all_reduce";
    case Kind::AllGather: return "all_gather";
    case Kind::ReduceScatter: return "reduce_scatter";
    case Kind::Broadcast: return "broadcast";
    case Kind::Send: return "send";
  }
  return "?";
}

// What a rank says it is doing in a step; every rank of a collective must say the same.
struct Desc {
  Kind kind;
  DType dtype;
  int32_t param;  // the ReduceOp, or the root
  uint64_t count;
  bool operator==(const Desc&) const = default;
};

std::string describe(const Desc& d) {
  std::string s = str_cat(kind_name(d.kind), " of ", d.count, " ", d.dtype);
  if (d.kind == Kind::AllReduce || d.kind == Kind::ReduceScatter) s += str_cat(" (", name(static_cast<ReduceOp>(d.param)), ")");
  if (d.kind == Kind::Broadcast) s += str_cat(" from rank ", d.param);
  return s;
}

struct alignas(64) RankSlot {
  std::atomic<uint64_t> posted{0};
  std::atomic<uint64_t> consumed{0};
  std::atomic<int64_t> pid{0};
  Desc desc{};
};

struct alignas(64) PairSlot {
  std::atomic<uint64_t> sent{0};
  std::atomic<uint64_t> received{0};
  Desc desc{};
};

struct alignas(64) Header {
  std::atomic<uint64_t> magic{0};
  int32_t size = 0;
  std::atomic<int32_t> claimed{0};  // set by the first rank to fail, before it writes the reason
  std::atomic<int32_t> failed{0};   // 1 + that rank, once the reason is written; or 0
  char reason[512] = {};
};

size_t mapping_bytes(int size) {
  const auto n = static_cast<size_t>(size);
  return sizeof(Header) + n * sizeof(RankSlot) + n * n * sizeof(PairSlot) + n * kArea + n * n * kPairArea;
}

// The shared mapping of one group.
class World {
 public:
  World(void* base, size_t bytes, int size, bool in_process) : base_(base), bytes_(bytes), size_(size), in_process_(in_process) {
    char* p = static_cast<char*>(base);
    header_ = reinterpret_cast<Header*>(p);
    p += sizeof(Header);
    ranks_ = reinterpret_cast<RankSlot*>(p);
    p += static_cast<size_t>(size) * sizeof(RankSlot);
    pairs_ = reinterpret_cast<PairSlot*>(p);
    p += static_cast<size_t>(size * size) * sizeof(PairSlot);
    areas_ = p;
    pair_areas_ = p + static_cast<size_t>(size) * kArea;
  }
  ~World() {
    if (base_ != nullptr) munmap(base_, bytes_);
  }
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  // Constructs the header and slots in fresh (zeroed) memory; the magic is written last.
  void init() {
    new (header_) Header;
    header_->size = size_;
    for (int i = 0; i < size_; ++i) new (&ranks_[i]) RankSlot;
    for (int i = 0; i < size_ * size_; ++i) new (&pairs_[i]) PairSlot;
    header_->magic.store(kMagic, std::memory_order_release);
  }
  // init() on memory that someone else unmaps.
  void init_unowned() {
    init();
    base_ = nullptr;
  }

  Header& header() { return *header_; }
  RankSlot& rank(int r) { return ranks_[r]; }
  PairSlot& pair(int from, int to) { return pairs_[from * size_ + to]; }
  char* area(int r) { return areas_ + static_cast<size_t>(r) * kArea; }
  char* pair_area(int from, int to) { return pair_areas_ + static_cast<size_t>(from * size_ + to) * kPairArea; }
  int size() const { return size_; }
  bool in_process() const { return in_process_; }

  // Records the group's first failure; returns the message every rank raises.
  std::string fail(int by, const std::string& reason) {
    int32_t expected = 0;
    if (header_->claimed.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
      std::snprintf(header_->reason, sizeof(header_->reason), "%s", reason.c_str());
      header_->failed.store(by + 1, std::memory_order_release);
      return reason;
    }
    while (!failed()) std::this_thread::yield();  // the first one is writing its reason
    return failure();
  }
  bool failed() const { return header_->failed.load(std::memory_order_acquire) != 0; }
  std::string failure() const {
    return str_cat("rank ", header_->failed.load(std::memory_order_acquire) - 1, " reports: ", std::string(header_->reason));
  }

 private:
  void* base_;
  size_t bytes_;
  int size_;
  bool in_process_;
  Header* header_;
  RankSlot* ranks_;
  PairSlot* pairs_;
  char* areas_;
  char* pair_areas_;
};

// ---- element-wise reduction over the ranks' chunks, in rank order --------------------------------

template <typename T>
void reduce_chunks(ReduceOp op, T* out, const T* const* in, int n, size_t count) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;  // sums wrap, as on the GPUs
    for (size_t i = 0; i < count; ++i) {
      T acc = in[0][i];
      for (int r = 1; r < n; ++r) {
        const T v = in[r][i];
        acc = op == ReduceOp::Sum ? static_cast<T>(static_cast<U>(acc) + static_cast<U>(v))
              : op == ReduceOp::Max ? std::max(acc, v)
                                    : std::min(acc, v);
      }
      out[i] = acc;
    }
  } else {
    // f32 and the narrower floats accumulate in f32 and round once; f64 in f64.
    using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
    for (size_t i = 0; i < count; ++i) {
      A acc = static_cast<A>(in[0][i]);
      for (int r = 1; r < n; ++r) {
        const A v = static_cast<A>(in[r][i]);
        acc = op == ReduceOp::Max ? std::fmax(acc, v) : op == ReduceOp::Min ? std::fmin(acc, v) : acc + v;
      }
      if (op == ReduceOp::Avg) acc /= static_cast<A>(n);
      out[i] = static_cast<T>(acc);
    }
  }
}

void reduce_chunks(DType dtype, ReduceOp op, void* out, const void* const* in, int n, size_t count) {
  dispatch(dtype, [&]<typename T>() {
    reduce_chunks(op, static_cast<T*>(out), reinterpret_cast<const T* const*>(in), n, count);
  });
}

// ---- calls ------------------------------------------------------------------------------------

class ShmEngine;

// One call of one rank: which steps of its channel it owns and how far it has come.
struct Pending {
  ShmEngine* engine;
  Desc desc;
  const char* send;
  char* recv;
  int peer;          // send and recv: the other rank; else -1
  bool receiving;    // a recv (desc.kind is Send: the channel's kind)
  uint64_t first;    // its first step (1-based) in its channel
  uint64_t steps;
  size_t chunk;      // elements per step (of each rank's part, for reduce_scatter)
  uint64_t done = 0;
  bool posted = false;
  int waiting_for = -1;  // the rank it last waited for
};

thread_local std::vector<Pending> t_pending;

class ShmEngine final : public Engine {
 public:
  ShmEngine(std::shared_ptr<World> world, int rank, const Options& options)
      : world_(std::move(world)), rank_(rank), options_(options), sends_(static_cast<size_t>(world_->size())),
        recvs_(static_cast<size_t>(world_->size())) {}

  int rank() const override { return rank_; }
  int size() const override { return world_->size(); }
  Device device() const override { return Device::cpu(); }

  void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override {
    collective({Kind::AllReduce, dtype, static_cast<int32_t>(op), count}, send, recv, kArea / dtype_size(dtype));
  }
  void all_gather(const void* send, void* recv, size_t count, DType dtype) override {
    collective({Kind::AllGather, dtype, 0, count}, send, recv, kArea / dtype_size(dtype));
  }
  void reduce_scatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override {
    collective({Kind::ReduceScatter, dtype, static_cast<int32_t>(op), count}, send, recv,
               kArea / (dtype_size(dtype) * static_cast<size_t>(size())));
  }
  void broadcast(const void* send, void* recv, size_t count, DType dtype, int root) override {
    collective({Kind::Broadcast, dtype, root, count}, send, recv, kArea / dtype_size(dtype));
  }
  void send(const void* buf, size_t count, DType dtype, int peer) override {
    p2p({Kind::Send, dtype, 0, count}, static_cast<const char*>(buf), nullptr, peer, sends_);
  }
  void recv(void* buf, size_t count, DType dtype, int peer) override {
    p2p({Kind::Send, dtype, 0, count}, nullptr, static_cast<char*>(buf), peer, recvs_);
  }

  void group_start() override { ++group_depth_; }
  void group_end() override {
    if (--group_depth_ > 0) return;
    run_all(t_pending);
  }
  void synchronize() override { check_failed("synchronize"); }
  void abort() override {
    std::erase_if(t_pending, [this](const Pending& p) { return p.engine == this; });
    group_depth_ = 0;
    world_->fail(rank_, str_cat("rank ", rank_, " aborted the group"));
  }

  // Advances `p` as far as it goes without waiting; true once it has finished.
  bool progress(Pending& p) {
    while (p.done < p.steps) {
      if (!(p.peer >= 0 ? p2p_step(p) : collective_step(p))) return false;
    }
    return true;
  }

  // Waits for `pending` (this thread's calls, of any engines) to finish, or raises.
  static void run_all(std::vector<Pending>& pending) {
    std::vector<Pending> calls = std::move(pending);
    pending.clear();
    Waiter wait;
    for (;;) {
      bool all = true;
      for (Pending& p : calls) {
        p.engine->check_failed(kind_name(p.desc.kind));
        if (p.done < p.steps && !p.engine->progress(p)) all = false;
      }
      if (all) return;
      for (Pending& p : calls)
        if (p.done < p.steps) p.engine->check_peers(p, wait);
      wait.pause();
    }
  }

 private:
  // Spins a while, then sleeps; counts the time since it began.
  struct Waiter {
    Clock::time_point start = Clock::now();
    Clock::time_point last_check = start;
    int spins = 0;
    void pause() {
      if (++spins < 2000)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  };

  void collective(const Desc& d, const void* send, void* recv, size_t chunk) {
    check_failed(kind_name(d.kind));
    chunk = std::max<size_t>(chunk, 1);
    Pending p{this, d, static_cast<const char*>(send), static_cast<char*>(recv), -1, false, 0, 0, chunk};
    p.steps = (d.count + chunk - 1) / chunk;
    p.first = next_step_ + 1;
    next_step_ += p.steps;
    submit(std::move(p));
  }

  void p2p(const Desc& d, const char* send, char* recv, int peer, std::vector<uint64_t>& counter) {
    check_failed(send != nullptr ? "send" : "recv");
    const size_t chunk = std::max<size_t>(kPairArea / dtype_size(d.dtype), 1);
    Pending p{this, d, send, recv, peer, recv != nullptr, 0, 0, chunk};
    p.steps = (d.count + chunk - 1) / chunk;
    uint64_t& next = counter[static_cast<size_t>(peer)];
    p.first = next + 1;
    next += p.steps;
    submit(std::move(p));
  }

  void submit(Pending p) {
    if (group_depth_ > 0) {
      t_pending.push_back(std::move(p));
      return;
    }
    std::vector<Pending> one{std::move(p)};
    run_all(one);
  }

  // The part of step `p.first + p.done` that this rank can do now; false where it must wait.
  bool collective_step(Pending& p) {
    const uint64_t s = p.first + p.done;
    const int n = size();
    const size_t es = dtype_size(p.desc.dtype);
    const size_t begin = static_cast<size_t>(p.done) * p.chunk;
    const size_t len = std::min<size_t>(p.chunk, p.desc.count - begin);
    RankSlot& me = world_->rank(rank_);
    if (!p.posted) {
      for (int r = 0; r < n; ++r)
        if (world_->rank(r).consumed.load(std::memory_order_acquire) < s - 1) return waiting(p, r);
      me.desc = p.desc;
      char* area = world_->area(rank_);
      switch (p.desc.kind) {
        case Kind::AllReduce:
        case Kind::AllGather: std::memcpy(area, p.send + begin * es, len * es); break;
        case Kind::ReduceScatter:
          for (int part = 0; part < n; ++part)
            std::memcpy(area + static_cast<size_t>(part) * len * es, p.send + (static_cast<size_t>(part) * p.desc.count + begin) * es,
                        len * es);
          break;
        case Kind::Broadcast:
          if (rank_ == p.desc.param) std::memcpy(area, p.send + begin * es, len * es);
          break;
        case Kind::Send: break;
      }
      me.posted.store(s, std::memory_order_release);
      p.posted = true;
    }
    for (int r = 0; r < n; ++r)
      if (world_->rank(r).posted.load(std::memory_order_acquire) < s) return waiting(p, r);
    for (int r = 0; r < n; ++r)
      if (!(world_->rank(r).desc == p.desc))
        throw DistError(world_->fail(rank_, str_cat("rank ", rank_, " called ", describe(p.desc), " where rank ", r, " called ",
                                                    describe(world_->rank(r).desc))));
    const void* chunks[kMaxRanks];
    switch (p.desc.kind) {
      case Kind::AllReduce:
        for (int r = 0; r < n; ++r) chunks[r] = world_->area(r);
        reduce_chunks(p.desc.dtype, static_cast<ReduceOp>(p.desc.param), p.recv + begin * es, chunks, n, len);
        break;
      case Kind::AllGather:
        for (int r = 0; r < n; ++r) std::memcpy(p.recv + (static_cast<size_t>(r) * p.desc.count + begin) * es, world_->area(r), len * es);
        break;
      case Kind::ReduceScatter:
        for (int r = 0; r < n; ++r) chunks[r] = world_->area(r) + static_cast<size_t>(rank_) * len * es;
        reduce_chunks(p.desc.dtype, static_cast<ReduceOp>(p.desc.param), p.recv + begin * es, chunks, n, len);
        break;
      case Kind::Broadcast: std::memcpy(p.recv + begin * es, world_->area(p.desc.param), len * es); break;
      case Kind::Send: break;
    }
    me.consumed.store(s, std::memory_order_release);
    p.posted = false;
    ++p.done;
    return true;
  }

  bool p2p_step(Pending& p) {
    const uint64_t s = p.first + p.done;
    const size_t es = dtype_size(p.desc.dtype);
    const size_t begin = static_cast<size_t>(p.done) * p.chunk;
    const size_t len = std::min<size_t>(p.chunk, p.desc.count - begin);
    if (!p.receiving) {
      PairSlot& slot = world_->pair(rank_, p.peer);
      if (slot.received.load(std::memory_order_acquire) < s - 1) return waiting(p, p.peer);
      slot.desc = p.desc;
      std::memcpy(world_->pair_area(rank_, p.peer), p.send + begin * es, len * es);
      slot.sent.store(s, std::memory_order_release);
    } else {
      PairSlot& slot = world_->pair(p.peer, rank_);
      if (slot.sent.load(std::memory_order_acquire) < s) return waiting(p, p.peer);
      if (!(slot.desc == p.desc))
        throw DistError(world_->fail(rank_, str_cat("rank ", rank_, " receives ", p.desc.count, " ", p.desc.dtype, " from rank ",
                                                    p.peer, ", which sends ", slot.desc.count, " ", slot.desc.dtype)));
      std::memcpy(p.recv + begin * es, world_->pair_area(p.peer, rank_), len * es);
      slot.received.store(s, std::memory_order_release);
    }
    ++p.done;
    return true;
  }

  bool waiting(Pending& p, int rank) {
    p.waiting_for = rank;
    return false;
  }

  void check_failed(const char* op) const {
    if (world_->failed()) throw DistError(str_cat("dist: ", op, " on rank ", rank_, ": ", world_->failure()));
  }

  // Every few milliseconds: whether the rank `p` waits for still runs, and whether time is up.
  void check_peers(const Pending& p, Waiter& wait) {
    const Clock::time_point now = Clock::now();
    if (now - wait.last_check < std::chrono::milliseconds(5)) return;
    wait.last_check = now;
    const std::string op = p.peer >= 0 ? (p.receiving ? "recv" : "send") : kind_name(p.desc.kind);
    const int r = p.waiting_for;
    if (r >= 0 && !world_->in_process()) {
      const int64_t pid = world_->rank(r).pid.load(std::memory_order_acquire);
      if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
        throw DistError(str_cat("dist: ", op, " on rank ", rank_, ": ",
                                world_->fail(rank_, str_cat("rank ", r, " (process ", pid, ") has exited"))));
    }
    if (now - wait.start > options_.timeout) {
      std::string why = str_cat("rank ", rank_, " waited ", options_.timeout.count(), " ms in ", op, " for rank ", r);
      if (world_->in_process())
        why += " (where one thread drives several ranks, their calls go inside one dist::group)";
      throw DistError(str_cat("dist: ", op, " on rank ", rank_, ": ", world_->fail(rank_, why)));
    }
  }

  std::shared_ptr<World> world_;
  int rank_;
  Options options_;
  uint64_t next_step_ = 0;
  std::vector<uint64_t> sends_, recvs_;  // steps reserved so far on each pair channel
  int group_depth_ = 0;
};

}  // namespace

Engines cpu_local(int n, const Options& options) {
  if (n > kMaxRanks) throw Error(str_cat("dist: local: ", n, " CPU ranks (at most ", kMaxRanks, ")"));
  const size_t bytes = mapping_bytes(n);
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED)
    throw DistError(str_cat("dist: local: mapping ", bytes, " bytes for ", n, " ranks: ", std::strerror(errno)));
  auto world = std::make_shared<World>(base, bytes, n, true);
  world->init();
  Engines engines;
  for (int r = 0; r < n; ++r) {
    world->rank(r).pid.store(getpid());
    engines.push_back(std::make_shared<ShmEngine>(world, r, options));
  }
  return engines;
}

std::shared_ptr<Engine> cpu_join(const std::string& path, int size, int rank, const Options& options) {
  if (size > kMaxRanks) throw Error(str_cat("dist: join: ", size, " CPU ranks (at most ", kMaxRanks, ")"));
  const size_t bytes = mapping_bytes(size);
  const Clock::time_point deadline = Clock::now() + options.timeout;
  if (rank == 0) publish(path, bytes, [&](void* base) { World(base, bytes, size, false).init_unowned(); });
  Mapping mapping = await(path, bytes, deadline, rank);
  auto world = std::make_shared<World>(mapping.release(), bytes, size, false);
  if (world->header().magic.load(std::memory_order_acquire) != kMagic || world->header().size != size)
    throw DistError(str_cat("dist: join: ", path, " is not a rendezvous of ", size, " CPU ranks"));
  int64_t none = 0;
  if (!world->rank(rank).pid.compare_exchange_strong(none, getpid()))
    throw DistError(str_cat("dist: join: rank ", rank, " of ", path, " has joined already (process ", none, ")"));
  // Everyone in before the first call (and rank 0 removes the path, which no one needs any more).
  for (int r = 0; r < size; ++r) {
    while (world->rank(r).pid.load(std::memory_order_acquire) == 0) {
      if (world->failed()) throw DistError(str_cat("dist: join: rank ", rank, ": ", world->failure()));
      if (Clock::now() > deadline)
        throw DistError(str_cat("dist: join: ", world->fail(rank, str_cat("rank ", rank, " waited ", options.timeout.count(),
                                                                          " ms for rank ", r, " to join ", path))));
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  if (rank == 0) ::unlink(path.c_str());
  return std::make_shared<ShmEngine>(world, rank, options);
}

}  // namespace wick::dist::detail
