// What the three files of the C API share: the handle tables, the guard that turns every exception
// into a status and this thread's message, and the checks of C arguments.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "wick/dist.h"
#include "wick/io.h"
#include "wick/quant.h"
#include "wick/tensor.h"
#include "wick/wick_c.h"

namespace wick::capi {

// A misuse of the C API itself (a null pointer, an unknown enum value): WICK_ERROR_ARGUMENT.
class ArgumentError : public Error {
 public:
  using Error::Error;
};

void set_error(const char* message);
const char* last_error();
wick_status fail(wick_status status, const char* message);

// The handles of one kind (wick_tensor, wick_qtensor, wick_model), process-wide. A handle is a
// word (kind:4 | generation:28 | slot:32), never an address, and a slot retires rather than repeat
// a generation: a freed handle is refused for good, even once its memory or slot serves a later
// handle, which a registry of addresses cannot tell (malloc gives a freed block straight back).
// A lookup locks one of 16 shards and copies a shared value out: tens of nanoseconds, against an
// op's microseconds; the copy keeps the value whole if another thread frees the handle meanwhile.
template <typename V>
class HandleTable {
 public:
  explicit HandleTable(uint64_t kind) : kind_(kind) {}

  // A new live handle holding v.
  uint64_t add(V v) {
    auto box = std::make_unique<V>(std::move(v));
    const uint32_t shard = home_shard();
    Shard& s = shards_[shard];
    std::lock_guard lock(s.mutex);
    uint32_t local;
    if (!s.free.empty()) {
      local = s.free.back();
      s.free.pop_back();
    } else {
      if (s.slots.size() >= kSlotsPerShard) throw OutOfMemoryError("the C API: too many live handles");
      s.free.reserve(s.slots.size() + 1);  // so that remove, which cannot fail, never allocates
      s.slots.push_back({});
      local = static_cast<uint32_t>(s.slots.size() - 1);
    }
    Slot& slot = s.slots[local];
    // Kept as ~address, which is no address, so that leak checkers still report a handle never freed.
    slot.box = ~reinterpret_cast<uintptr_t>(box.release());
    return (kind_ << 60) | (uint64_t{slot.generation} << 32) | (uint64_t{local} * kShards + shard);
  }

  // A copy of the value of handle h; nothing when h is not a live handle of this table.
  std::optional<V> get(uint64_t h) {
    Shard* s = nullptr;
    uint32_t local = 0;
    if (!locate(h, s, local)) return std::nullopt;
    std::lock_guard lock(s->mutex);
    const Slot* slot = live(*s, h, local);
    if (!slot) return std::nullopt;
    return *reinterpret_cast<const V*>(~slot->box);
  }

  // Retires h and drops its value; false, and nothing done, when h is not live.
  bool remove(uint64_t h) noexcept {
    Shard* s = nullptr;
    uint32_t local = 0;
    if (!locate(h, s, local)) return false;
    V* box = nullptr;
    {
      std::lock_guard lock(s->mutex);
      Slot* slot = live(*s, h, local);
      if (!slot) return false;
      box = reinterpret_cast<V*>(~slot->box);
      slot->box = 0;
      if (++slot->generation <= kMaxGeneration) s->free.push_back(local);
    }
    delete box;  // unlocked: a tensor's release callback (from_blob) may call back into the C API
    return true;
  }

 private:
  static constexpr uint32_t kShards = 16;
  static constexpr uint64_t kSlotsPerShard = (uint64_t{1} << 32) / kShards;
  static constexpr uint32_t kMaxGeneration = (uint32_t{1} << 28) - 1;
  struct Slot {
    uintptr_t box = 0;  // 0 while the slot is free
    uint32_t generation = 0;
  };
  struct alignas(64) Shard {
    std::mutex mutex;
    std::vector<Slot> slots;
    std::vector<uint32_t> free;
  };

  // Each thread makes its handles in one shard, threads in turn, so that they seldom share a lock.
  static uint32_t home_shard() {
    static std::atomic<uint32_t> next{0};
    thread_local const uint32_t shard = next.fetch_add(1, std::memory_order_relaxed) % kShards;
    return shard;
  }
  bool locate(uint64_t h, Shard*& s, uint32_t& local) {
    if (h >> 60 != kind_) return false;
    const uint32_t index = static_cast<uint32_t>(h);
    s = &shards_[index % kShards];
    local = index / kShards;
    return true;
  }
  // The slot of h if h is live; the shard's lock is held.
  static Slot* live(Shard& s, uint64_t h, uint32_t local) {
    if (local >= s.slots.size()) return nullptr;
    Slot& slot = s.slots[local];
    if (slot.box == 0 || slot.generation != static_cast<uint32_t>((h >> 32) & kMaxGeneration)) return nullptr;
    return &slot;
  }

  const uint64_t kind_;
  std::array<Shard, kShards> shards_;
};

static_assert(sizeof(uintptr_t) == sizeof(uint64_t), "a C API handle is a 64-bit word");

template <typename H>
uint64_t handle_word(const H* h) {
  return reinterpret_cast<uintptr_t>(h);
}
template <typename H>
H* handle_of(uint64_t word) {
  return reinterpret_cast<H*>(static_cast<uintptr_t>(word));
}

// The tables, made on first use and never destroyed (static destructors would free handles after
// the backends they need are gone).
HandleTable<Tensor>& tensor_handles();

// Throws the ArgumentError for a handle argument `arg` of op that is null or not live; `type` is
// "tensor", "qtensor" or "model".
[[noreturn]] void refuse_handle(const void* h, const char* op, const std::string& arg, const char* type);
// Frees handle h of table t: NULL does nothing, a handle not live sets the last error to message; a
// success leaves the last error alone, so that cleanup on an error path keeps the failure's message.
template <typename V, typename H>
void free_handle(HandleTable<V>& t, H* h, const char* message) noexcept {
  if (h && !t.remove(handle_word(h))) fail(WICK_ERROR_ARGUMENT, message);
}

// Runs f, which reports through its outputs; every exception becomes a status and a message.
template <typename F>
wick_status guard(F&& f) noexcept {
  try {
    std::forward<F>(f)();
    set_error("");
    return WICK_OK;
  } catch (const ArgumentError& e) {
    return fail(WICK_ERROR_ARGUMENT, e.what());
  } catch (const ShapeError& e) {
    return fail(WICK_ERROR_SHAPE, e.what());
  } catch (const DTypeError& e) {
    return fail(WICK_ERROR_DTYPE, e.what());
  } catch (const DeviceError& e) {
    return fail(WICK_ERROR_DEVICE, e.what());
  } catch (const IndexError& e) {
    return fail(WICK_ERROR_INDEX, e.what());
  } catch (const OutOfMemoryError& e) {
    return fail(WICK_ERROR_OUT_OF_MEMORY, e.what());
  } catch (const NotSupportedError& e) {
    return fail(WICK_ERROR_NOT_SUPPORTED, e.what());
  } catch (const io::FormatError& e) {
    return fail(WICK_ERROR_FORMAT, e.what());
  } catch (const dist::DistError& e) {
    return fail(WICK_ERROR_DIST, e.what());
  } catch (const std::bad_alloc&) {
    return fail(WICK_ERROR_OUT_OF_MEMORY, "out of host memory");
  } catch (const std::exception& e) {
    return fail(WICK_ERROR_OTHER, e.what());
  } catch (...) {
    return fail(WICK_ERROR_OTHER, "an unknown exception");
  }
}

// The tensor behind a handle (a shared view of it); ArgumentError naming op and the argument if the
// handle is null or not live.
Tensor in(const wick_tensor* t, const char* op, const char* arg = "x");
// The same for the tensor a call writes into.
Tensor in_mut(wick_tensor* t, const char* op, const char* arg = "t");
// Checks an output pointer before the work, so that a null one costs nothing.
template <typename T>
T* out_ptr(T* out, const char* op, const char* arg = "out") {
  if (!out) throw ArgumentError(std::string(op) + ": the output pointer " + arg + " is null");
  return out;
}
// Hands a new handle to *out.
void give(wick_tensor** out, Tensor t);
DType dtype_in(int32_t dtype, const char* op);
Device device_in(wick_device device, const char* op);
Shape shape_in(const int64_t* shape, int rank, const char* op, const char* arg = "shape");
// A tensor argument and its name in the C declaration, which the messages give.
struct Arg {
  const wick_tensor* t;
  const char* name;
};
// A call that makes one new tensor from one: checks the output pointer, then hands f's result out.
template <typename F>
wick_status map(const char* op, Arg a, wick_tensor** out, F&& f) {
  return guard([&] {
    out_ptr(out, op);
    give(out, f(in(a.t, op, a.name)));
  });
}
// Copies text into buf as the header describes (truncated, NUL-terminated, *len the full length).
void text_out(const std::string& text, char* buf, size_t cap, size_t* len);

}  // namespace wick::capi

namespace wick::capi {
// A C double as a wick Scalar: a whole number within int64 is an integer (so that it fills and
// compares with integer dtypes), any other value a float.
Scalar scalar_in(double v);
}  // namespace wick::capi
