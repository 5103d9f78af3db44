// GPU devices, memory, host transfers and the device-side error record.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <vector>

#include "gpu/blas.h"
#include "gpu/gpu_backend.h"

namespace wick::gpu {

void throw_error(Status e, const char* call, const char* file, int line) {
  const char* base = std::strrchr(file, '/');
  std::string msg =
      detail::str_cat(kVendor, " call ", call, " failed at ", base ? base + 1 : file, ":", line, ": ", error_string(e));
  if (is_out_of_memory(e)) throw OutOfMemoryError(msg);
  throw ::wick::Error(msg);
}

namespace {

constexpr size_t kStagingBytes = size_t(64) << 20;
constexpr unsigned char kGuardByte = 0xa5;
constexpr unsigned char kPoisonByte = 0xff;

}  // namespace

// ---- working memory of recordings ---------------------------------------------------------------
// A recording's allocations come from an arena, not from the stream's pool: an allocation or free
// of the pool made while recording is a node of the graph, between one op's kernel and the next,
// and a kernel placed early (launch_early) only overlaps a kernel it directly follows. Graphs run
// one at a time on the backend's stream and no tensor made while recording outlives it (record()
// refuses that), so every recording takes the same arena from its start, and gives memory back to
// it as tensors are released: the host keeps the free spans, no node is queued. An allocation the
// arena cannot hold comes from the pool, as before; the next recording then gets an arena of the
// largest total this one held at once, and a quarter more. Each graph keeps the arena it was
// recorded with (a later, larger one does not replace it under the graph's pointers).
struct GpuBackend::RecordArena {
  int device = 0;
  Stream stream = nullptr;
  unsigned char* base = nullptr;
  size_t capacity = 0;
  std::map<size_t, size_t> free;  // offset -> bytes of each free span
  std::map<void*, size_t> taken;  // allocation -> its bytes
  ~RecordArena() {
    if (base == nullptr) return;
    (void)set_device(device);
    (void)free_async(base, stream);
  }
};

namespace {
constexpr size_t kArenaAlign = 256;
}  // namespace

void* GpuBackend::arena_take(size_t nbytes) {
  RecordArena& a = *arena_;
  const size_t bytes = (nbytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
  for (auto it = a.free.begin(); it != a.free.end(); ++it) {
    if (it->second < bytes) continue;
    const size_t at = it->first, left = it->second - bytes;
    a.free.erase(it);
    if (left > 0) a.free.emplace(at + bytes, left);
    void* p = a.base + at;
    a.taken.emplace(p, bytes);
    return p;
  }
  return nullptr;
}

bool GpuBackend::arena_give(void* data) {
  if (!arena_) return false;
  RecordArena& a = *arena_;
  auto it = a.taken.find(data);
  if (it == a.taken.end()) return false;
  size_t at = static_cast<size_t>(static_cast<unsigned char*>(data) - a.base), bytes = it->second;
  a.taken.erase(it);
  auto next = a.free.lower_bound(at);
  if (next != a.free.end() && next->first == at + bytes) {  // joins the span after it
    bytes += next->second;
    next = a.free.erase(next);
  }
  if (next != a.free.begin()) {  // and the span before it
    auto prev = std::prev(next);
    if (prev->first + prev->second == at) {
      prev->second += bytes;
      return true;
    }
  }
  a.free.emplace(at, bytes);
  return true;
}

GpuBackend::GpuBackend(int index) : index_(index) {
  activate();
  WICK_GPU_CHECK(device_props(index, &props_));
  const char* early = std::getenv("WICK_EARLY_START");
  early_start_ = props_.early_start && !(early != nullptr && std::string_view(early) == "0");
  WICK_GPU_CHECK(stream_create(&stream_));
  WICK_GPU_CHECK(pool_keep_memory(index));
  WICK_GPU_CHECK(malloc_async(reinterpret_cast<void**>(&device_error_), sizeof(KernelError), stream_));
  WICK_GPU_CHECK(memset_async(device_error_, 0, sizeof(KernelError), stream_));
  WICK_GPU_CHECK(host_alloc_pinned(reinterpret_cast<void**>(&host_error_), sizeof(KernelError)));
  WICK_GPU_CHECK(event_create_untimed(&staging_free_));
  WICK_GPU_CHECK(stream_synchronize(stream_));
}

std::string GpuBackend::name() const { return device().to_string(); }

void GpuBackend::activate() const { WICK_GPU_CHECK(set_device(index_)); }

int GpuBackend::blocks_per_sm(const void* kernel, int threads, size_t shared) const {
  const std::lock_guard lock(occupancy_mutex_);
  const auto key = std::make_tuple(kernel, threads, shared);
  if (auto it = occupancy_.find(key); it != occupancy_.end()) return it->second;
  int n = 0;
  WICK_GPU_CHECK(kernel_blocks_per_sm(&n, kernel, threads, shared));
  return occupancy_[key] = std::max(n, 1);
}

// ---- memory -----------------------------------------------------------------------------------

StoragePtr GpuBackend::alloc(size_t nbytes) {
  WICK_CHECK(nbytes <= kMaxAllocBytes, OutOfMemoryError, "alloc", "cannot allocate ", nbytes, " bytes on ", name());
  activate();
  size_t guard;
  bool poison;
  {
    std::lock_guard<std::mutex> lock(check_mutex_);
    guard = (check_.guard_bytes + 255) / 256 * 256;
    poison = check_.poison;
  }
  if (nbytes == 0 && guard == 0) return std::make_shared<Storage>(this, nullptr, 0);
  if (recording_ && guard == 0 && nbytes > 0) {
    std::lock_guard<std::mutex> lock(record_mutex_);
    recording_live_ += nbytes;
    recording_peak_ = std::max(recording_peak_, recording_live_);
    if (void* p = arena_take(nbytes)) {
      recorded_.insert(p);
      if (poison) WICK_GPU_CHECK(memset_async(p, kPoisonByte, nbytes, stream_));
      count_alloc(nbytes);
      return std::make_shared<Storage>(this, p, nbytes);
    }
    arena_short_ = true;
  }
  const size_t total = nbytes + 2 * guard;
  void* base = nullptr;
  Status e = malloc_async(&base, total, stream_);
  if (is_out_of_memory(e)) {  // give the pool's cached blocks back, then try once more
    (void)last_error();
    WICK_GPU_CHECK(stream_synchronize(stream_));
    WICK_GPU_CHECK(pool_release_cached(index_));
    e = malloc_async(&base, total, stream_);
  }
  if (e != kSuccess) {
    (void)last_error();  // the process stays usable
    if (is_out_of_memory(e))
      throw OutOfMemoryError(
          detail::str_cat("alloc: cannot allocate ", nbytes, " bytes on ", name(), " (", error_string(e), ")"));
    throw_error(e, "malloc_async", __FILE__, __LINE__);
  }
  auto* data = static_cast<unsigned char*>(base) + guard;
  if (guard) {
    WICK_GPU_CHECK(memset_async(base, kGuardByte, guard, stream_));
    WICK_GPU_CHECK(memset_async(data + nbytes, kGuardByte, guard, stream_));
    std::lock_guard<std::mutex> lock(check_mutex_);
    guarded_[data] = guard;
  }
  if (poison && nbytes) WICK_GPU_CHECK(memset_async(data, kPoisonByte, nbytes, stream_));
  if (recording_) {
    std::lock_guard<std::mutex> lock(record_mutex_);
    recorded_.insert(data);
  }
  count_alloc(nbytes);
  return std::make_shared<Storage>(this, data, nbytes);
}

void GpuBackend::release(void* data, size_t nbytes) noexcept {
  if (!data) return;
  count_release(nbytes);
  if (recording_ || any_abandoned_) {
    std::lock_guard<std::mutex> lock(record_mutex_);
    if (abandoned_.erase(data) != 0) {
      any_abandoned_ = !abandoned_.empty();
      return;
    }
    if (recording_ && recorded_.erase(data) == 0) {  // made before the recording: freed after it
      deferred_.push_back(data);
      return;
    }
    if (recording_) {
      recording_live_ -= std::min(recording_live_, nbytes);
      if (arena_give(data)) return;
    }
  }
  (void)set_device(index_);
  size_t guard = 0;
  {
    std::lock_guard<std::mutex> lock(check_mutex_);
    auto it = guarded_.find(data);
    if (it != guarded_.end()) {
      guard = it->second;
      guarded_.erase(it);
    }
  }
  auto* base = static_cast<unsigned char*>(data) - guard;
  if (guard) {  // the testing aid: read the guards back (slow, synchronous)
    std::vector<unsigned char> head(guard), tail(guard);
    bool ok = copy_d2h_async(head.data(), base, guard, stream_) == kSuccess &&
              copy_d2h_async(tail.data(), static_cast<unsigned char*>(data) + nbytes, guard, stream_) == kSuccess &&
              stream_synchronize(stream_) == kSuccess;
    for (size_t i = 0; ok && i < guard; ++i) ok = head[i] == kGuardByte && tail[i] == kGuardByte;
    if (!ok) {
      std::lock_guard<std::mutex> lock(check_mutex_);
      ++guard_violations_;
    }
  }
  (void)free_async(base, stream_);
}

void GpuBackend::empty_cache() {
  activate();
  WICK_GPU_CHECK(stream_synchronize(stream_));
  WICK_GPU_CHECK(pool_release_cached(index_));
}

DeviceMemory GpuBackend::device_memory() {
  empty_cache();
  size_t free = 0, total = 0;
  WICK_GPU_CHECK(mem_get_info(&free, &total));
  return {static_cast<int64_t>(free), static_cast<int64_t>(total)};
}

bool GpuBackend::set_alloc_check(AllocCheck check) {
  WICK_CHECK(check.guard_bytes <= kMaxAllocBytes, Error, "set_alloc_check", "guard of ", check.guard_bytes,
             " bytes is too large (", name(), ")");
  std::lock_guard<std::mutex> lock(check_mutex_);
  check_ = check;
  return true;
}

// ---- host transfers ---------------------------------------------------------------------------

StoragePtr GpuBackend::from_host(const void* src, size_t nbytes) {
  refuse_while_recording("from_host (a tensor made from host values)");
  StoragePtr s = alloc(nbytes);
  std::lock_guard<std::mutex> lock(staging_mutex_);
  if (!staging_) WICK_GPU_CHECK(host_alloc_pinned(&staging_, kStagingBytes));
  for (size_t done = 0; done < nbytes; done += kStagingBytes) {
    const size_t n = std::min(kStagingBytes, nbytes - done);
    WICK_GPU_CHECK(event_synchronize(staging_free_));  // the previous copy out of staging is over
    std::memcpy(staging_, static_cast<const char*>(src) + done, n);
    WICK_GPU_CHECK(copy_h2d_async(static_cast<char*>(s->data()) + done, staging_, n, stream_));
    WICK_GPU_CHECK(event_record(staging_free_, stream_));
  }
  return s;
}

void GpuBackend::to_host(const Storage& src, size_t byte_offset, size_t nbytes, void* dst) {
  refuse_while_recording("to_host (a copy to the host)");
  activate();
  std::lock_guard<std::mutex> lock(staging_mutex_);
  if (!staging_) WICK_GPU_CHECK(host_alloc_pinned(&staging_, kStagingBytes));
  for (size_t done = 0; done < nbytes; done += kStagingBytes) {
    const size_t n = std::min(kStagingBytes, nbytes - done);
    WICK_GPU_CHECK(copy_d2h_async(staging_, static_cast<const char*>(src.data()) + byte_offset + done, n, stream_));
    sync_and_raise();
    std::memcpy(static_cast<char*>(dst) + done, staging_, n);
  }
  if (nbytes == 0) sync_and_raise();
}

void GpuBackend::synchronize() {
  refuse_while_recording("synchronize");
  activate();
  sync_and_raise();
}

void GpuBackend::sync_and_raise() {
  WICK_GPU_CHECK(copy_d2h_async(host_error_, device_error_, sizeof(KernelError), stream_));
  WICK_GPU_CHECK(stream_synchronize(stream_));
  if (host_error_->code == 0) return;
  const KernelError e = *host_error_;
  WICK_GPU_CHECK(memset_async(device_error_, 0, sizeof(KernelError), stream_));
  WICK_GPU_CHECK(stream_synchronize(stream_));
  if (e.code == kPositionError && e.dim == kPositionPagedRope)
    throw IndexError(detail::str_cat("paged_rope_write: slot ", e.index, " is outside the pool's ", e.size, " slots (",
                                     name(), ")"));
  if (e.code == kPositionError)
    throw IndexError(detail::str_cat(e.dim != kPositionWrite ? "KvCache::rope_write_at" : "KvCache::write_at",
                                     ": position ", e.index, " is outside the cache's capacity of ", e.size, " (",
                                     name(), ")"));
  if (e.code == kPagedError) {
    constexpr const char* kWhat[] = {"sequence", "position", "block"};
    constexpr const char* kOf[] = {"rows of tables", "positions a table row holds", "blocks of the pool"};
    const int what = std::clamp(e.dim, 0, 2);
    throw IndexError(detail::str_cat("paged_attention: ", kWhat[what], " ", e.index, " is outside the ", e.size, " ",
                                     kOf[what], " (", name(), ")"));
  }
  if (e.code == kGroupError)
    throw IndexError(detail::str_cat(e.dim >= 2 ? "matmul_grouped" : "qmatmul_grouped", ": a group's ",
                                     e.dim % 2 == 0 ? "expert " : "row ", e.index, " is outside the ", e.size,
                                     e.dim % 2 == 0 ? " experts" : " rows of x", " (", name(), ")"));
  if (e.code == kCombineError)
    throw IndexError(
        detail::str_cat("moe_combine: slot ", e.index, " is outside the ", e.size, " rows of y (", name(), ")"));
  throw IndexError(detail::str_cat(op_name(static_cast<OpCode>(e.code - 1)), ": index ", e.index,
                                   " is out of range for dim ", e.dim, " of size ", e.size, " (ids ",
                                   static_cast<DType>(e.index_dtype), ", ", name(), ")"));
}

void GpuBackend::set_seed(uint64_t seed) { random_.reset(seed); }

bool GpuBackend::set_option(std::string_view key, std::string_view value) {
  if (key == "conv") {
    if (value != "gemm" && value != "library") return false;
    conv_own_path_ = value == "gemm";
    return true;
  }
  if (key == "early_start") {
    if (value != "on" && value != "off") return false;
    early_start_ = value == "on" && props_.early_start;
    return true;
  }
  if (key == "attention") {
    if (value == "library")
      attention_path_ = AttentionPath::Library;
    else if (value == "own")
      attention_path_ = AttentionPath::Own;
    else if (value == "rows")
      attention_path_ = AttentionPath::Rows;
    else
      return false;
    return true;
  }
  if (key == "qmatmul") {
    if (value == "library")
      qmatmul_path_ = QmatmulPath::Auto;
    else if (value == "tiles")
      qmatmul_path_ = QmatmulPath::Tiles;
    else if (value == "dot")
      qmatmul_path_ = QmatmulPath::Dot;
    else
      return false;
    return true;
  }
  return false;
}

GpuBackend::AttentionPath GpuBackend::attention_path() const {
  static const AttentionPath env = [] {
    const char* v = std::getenv("WICK_ATTENTION");
    const std::string_view s = v ? v : "";
    return s == "own" ? AttentionPath::Own : s == "rows" ? AttentionPath::Rows : AttentionPath::Library;
  }();
  return env != AttentionPath::Library ? env : attention_path_;
}

GpuBackend::QmatmulPath GpuBackend::qmatmul_path() const {
  static const QmatmulPath env = [] {
    const char* v = std::getenv("WICK_QMATMUL");
    const std::string_view s = v ? v : "";
    return s == "tiles" ? QmatmulPath::Tiles : s == "dot" ? QmatmulPath::Dot : QmatmulPath::Auto;
  }();
  return env != QmatmulPath::Auto ? env : qmatmul_path_;
}

// ---- timing -----------------------------------------------------------------------------------

namespace {

class EventTimer final : public Timer {
 public:
  explicit EventTimer(GpuBackend& backend) : backend_(backend) {
    backend_.activate();
    WICK_GPU_CHECK(event_create(&start_));
    Status e = event_create(&stop_);
    if (e != kSuccess) {
      (void)event_destroy(start_);
      throw_error(e, "event_create(&stop_)", __FILE__, __LINE__);
    }
  }
  ~EventTimer() override {
    (void)event_destroy(start_);
    (void)event_destroy(stop_);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  void start() override {
    backend_.activate();
    WICK_GPU_CHECK(event_record(start_, backend_.stream()));
  }
  void stop() override {
    backend_.activate();
    WICK_GPU_CHECK(event_record(stop_, backend_.stream()));
  }
  double elapsed_ms() override {
    WICK_GPU_CHECK(event_synchronize(stop_));
    float ms = 0;
    WICK_GPU_CHECK(event_elapsed_ms(&ms, start_, stop_));
    return ms;
  }

 private:
  GpuBackend& backend_;
  Event start_ = nullptr, stop_ = nullptr;
};

}  // namespace

std::unique_ptr<Timer> GpuBackend::make_timer() { return std::make_unique<EventTimer>(*this); }

// ---- recorded work ----------------------------------------------------------------------------

namespace {

// An executable graph, destroyed with its last owner (one destroyed while a launch of it runs is
// freed when that launch ends).
struct GraphExecutable {
  GraphExec exec = nullptr;
  std::shared_ptr<void> arena;  // the memory its allocations came from (GpuBackend::RecordArena)
  GraphExecutable() = default;
  GraphExecutable(const GraphExecutable&) = delete;
  GraphExecutable& operator=(const GraphExecutable&) = delete;
  ~GraphExecutable() {
    if (exec != nullptr) (void)graph_exec_destroy(exec);
  }
};

}  // namespace

void GpuBackend::refuse_while_recording(const char* op) {
  WICK_CHECK(!recording_, Error, op, name(),
             " is recording a graph, which cannot copy between host and device or wait for the device; "
             "give a recorded function inputs in tensors made before recording");
}

std::function<void()> GpuBackend::record(std::function<void()> ops) {
  constexpr const char* op = "Graph::record";
  activate();
  {
    std::lock_guard<std::mutex> lock(check_mutex_);
    WICK_CHECK(check_.guard_bytes == 0, Error, op, "not while the allocation guards are on (", name(),
               "): a guarded release waits for the device");
  }
  prepare_blas(*this);  // a handle made inside the recording would break it
  {
    std::lock_guard<std::mutex> lock(record_mutex_);
    WICK_CHECK(!recording_, Error, op, name(), " is already recording");
    if (!arena_ || arena_->capacity < arena_wanted_) {  // a larger arena for this and later recordings
      auto arena = std::make_shared<RecordArena>();
      arena->device = index_;
      arena->stream = stream_;
      void* p = nullptr;
      if (malloc_async(&p, arena_wanted_, stream_) == kSuccess) {
        arena->base = static_cast<unsigned char*>(p);
        arena->capacity = arena_wanted_;
      } else {
        (void)last_error();  // no arena: this recording's memory comes from the pool
      }
      arena_ = std::move(arena);
    }
    arena_->free.clear();
    arena_->taken.clear();
    if (arena_->capacity > 0) arena_->free.emplace(0, arena_->capacity);
    recording_live_ = recording_peak_ = 0;
    arena_short_ = false;
    library_recorded_ = false;
    recording_ = true;
  }
  Status begun = capture_begin(stream_);
  std::exception_ptr failure;
  if (begun == kSuccess) {
    try {
      ops();
    } catch (...) {
      failure = std::current_exception();
    }
  }
  GraphDef graph = nullptr;
  const Status ended = begun == kSuccess ? capture_end(stream_, &graph) : begun;
  std::vector<void*> deferred;
  size_t escaped = 0;
  {
    std::lock_guard<std::mutex> lock(record_mutex_);
    recording_ = false;
    if (arena_short_)
      arena_wanted_ = std::max(arena_wanted_, (recording_peak_ + recording_peak_ / 4 + (size_t(2) << 20) - 1) /
                                                  (size_t(2) << 20) * (size_t(2) << 20));
    deferred.swap(deferred_);
    escaped = recorded_.size();
    abandoned_.insert(recorded_.begin(), recorded_.end());
    any_abandoned_ = !abandoned_.empty();
    recorded_.clear();
  }
  for (void* p : deferred) (void)free_async(p, stream_);
  if (ended != kSuccess) (void)last_error();
  // Discards the graph, then throws.
  auto fail = [&](auto&&... why) {
    if (graph != nullptr) (void)graph_destroy(graph);
    throw Error(detail::str_cat(op, ": ", why...));
  };
  if (failure) {
    if (graph != nullptr) (void)graph_destroy(graph);
    std::rethrow_exception(failure);
  }
  if (begun != kSuccess) fail("cannot start recording on ", name(), ": ", error_string(begun));
  if (ended != kSuccess) fail("the recording on ", name(), " was broken by a call a graph cannot hold: ", error_string(ended));
  if (escaped > 0)
    fail("tensors made while recording on ", name(), " outlive it (", escaped,
         " buffers); write results into tensors made before recording (copy_from)");
  auto made = std::make_shared<GraphExecutable>();
  made->arena = arena_;
  const Status instantiated = graph_instantiate(&made->exec, graph);
  (void)graph_destroy(graph);
  graph = nullptr;
  if (instantiated != kSuccess) {
    (void)last_error();
    fail("cannot instantiate the graph recorded on ", name(), ": ", error_string(instantiated));
  }
  return [this, made] {
    activate();
    WICK_GPU_CHECK(graph_launch(made->exec, stream_));
  };
}

// ---- devices ----------------------------------------------------------------------------------

namespace {

// The runtime's answer to "how many devices", asked once: the count, or why there are none.
struct DeviceCount {
  int n = 0;
  std::string why;
};

const DeviceCount& device_count_once() {
  static const DeviceCount c = [] {
    DeviceCount r;
    if (const Status e = device_count(&r.n); e != kSuccess) {
      (void)last_error();
      r.n = 0;
      r.why = error_string(e);
    } else if (r.n == 0) {
      r.why = "the runtime found no device";
    }
    return r;
  }();
  return c;
}

}  // namespace

int gpu_device_count() { return device_count_once().n; }

std::string gpu_no_device_reason() { return device_count_once().why; }

Backend& gpu_backend(int index) {
  // Made once and never destroyed: tensors may outlive any static destructor.
  static std::mutex mutex;
  static std::vector<GpuBackend*> backends(static_cast<size_t>(gpu_device_count()));
  const int count = gpu_device_count();
  WICK_CHECK(index >= 0 && index < count, ::wick::DeviceError, "device", "device ", Device(kDeviceType, index),
             " does not exist (", count, " ", kVendor, " devices found)");
  std::lock_guard<std::mutex> lock(mutex);
  auto& b = backends[static_cast<size_t>(index)];
  if (!b) b = new GpuBackend(index);
  return *b;
}

std::string gpu_describe(int index) {
  const GpuBackend& b = static_cast<GpuBackend&>(gpu_backend(index));
  const DeviceProps& p = b.props();
  return detail::str_cat(Device(kDeviceType, index), ": ", p.name, ", ", p.total_memory >> 20, " MiB, ", p.arch,
                         ", warp ", p.warp_size, ", ", p.multiprocessors, " multiprocessors, L2 ", p.l2_bytes >> 20,
                         " MiB", b.early_start() ? ", recorded kernels start early" : "");
}

void* gpu_stream(int index) { return static_cast<GpuBackend&>(gpu_backend(index)).stream(); }

std::string gpu_name(int index) { return static_cast<GpuBackend&>(gpu_backend(index)).props().name; }

std::function<void()> gpu_record(int index, std::function<void()> ops) {
  return static_cast<GpuBackend&>(gpu_backend(index)).record(std::move(ops));
}

std::string gpu_driver_version() {
  std::string out;
  const Status e = driver_version(&out);
  if (e != kSuccess) {
    (void)last_error();
    return detail::str_cat(kVendor, " driver unknown (", error_string(e), ")");
  }
  return out;
}

}  // namespace wick::gpu
