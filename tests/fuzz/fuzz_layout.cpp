// Fuzzes Layout and the views: bytes give a shape, strides, an offset and a dtype, then a chain of
// view methods. Every layout accepted must have sizes, strides and offset >= 0, an element count and
// extent that fit int64 (and that numel() and extent() report), and a view must lie within the
// layout it was taken from. A Tensor over a small real storage with such a layout must fit in it;
// when accepted it is read through (contiguous), so one past the end is also an ASan report.
#include <algorithm>
#include <cstring>
#include <optional>

#include "backend/storage.h"
#include "fuzz_input.h"
#include "reference/reference.h"

namespace wick::fuzz {
namespace {

using i128 = __int128;
constexpr i128 kCap = i128{1} << 64;  // past int64: values are saturated here
constexpr i128 kI64Max = std::numeric_limits<int64_t>::max();
constexpr size_t kStorageBytes = 64;
constexpr i128 kReadLimit = 4096;  // elements read through at most

struct Truth {
  i128 numel;
  i128 extent;  // one past the last element offset; the offset when empty
};

Truth truth(const Layout& l) {
  i128 numel = 1, last = l.offset();
  for (int i = 0; i < l.rank(); ++i) {
    numel = std::min(numel * l.dim(i), kCap);
    last = std::min(last + static_cast<i128>(l.dim(i) - 1) * l.stride(i), kCap);
  }
  return {numel, numel == 0 ? i128{l.offset()} : last + 1};
}

void check_layout(const Layout& l, const char* how) {
  const std::string where = std::string(how) + " accepted " + l.to_string() + ": ";
  require(l.offset() >= 0, where + "a negative offset");
  for (int i = 0; i < l.rank(); ++i) require(l.dim(i) >= 0 && l.stride(i) >= 0, where + "a negative size or stride");
  const Truth t = truth(l);
  require(t.numel <= kI64Max, where + "more than 2^63 - 1 elements");
  require(t.extent <= kI64Max, where + "an extent past 2^63 - 1");
  require(l.numel() == static_cast<int64_t>(t.numel), where + "numel() is wrong");
  require(l.extent() == static_cast<int64_t>(t.extent), where + "extent() is wrong");
}

void check_within(const Layout& view, const Layout& source, const char* how) {
  const Truth v = truth(view), s = truth(source);
  if (v.numel == 0) return;
  require(s.numel > 0 && view.offset() >= source.offset() && v.extent <= s.extent,
          std::string(how) + " of " + source.to_string() + " gave " + view.to_string() + ", outside it");
}

const char* kViewNames[] = {"narrow",       "slice",   "transpose", "permute",
                            "broadcast_as", "squeeze", "unsqueeze", "reshape"};

// One view of l chosen and parameterised by the bytes; nullopt when it is refused or not a view.
std::optional<Layout> view_of(const Layout& l, int op, Bytes& in) {
  std::optional<Layout> out;
  step([&] {
    switch (op) {
      case 0: out = l.narrow(in.number(), in.number(), in.number()); break;
      case 1: out = l.slice(in.number(), in.number(), in.number(), in.number()); break;
      case 2: out = l.transpose(in.number(), in.number()); break;
      case 3: out = l.permute(in.numbers(static_cast<size_t>(l.rank() + (in.byte() % 8 == 0)))); break;
      case 4: out = l.broadcast_as(Dims(in.numbers(in.byte() % 9))); break;
      case 5: out = l.squeeze(in.number()); break;
      case 6: out = l.unsqueeze(in.number()); break;
      default: out = l.reshape(Dims(in.numbers(in.byte() % 9))); break;
    }
  });
  return out;
}

// A Tensor with this layout over `storage`: when accepted it must fit, and is read through.
void over_storage(const StoragePtr& storage, const Layout& l, DType dtype) {
  std::optional<Tensor> t;
  step([&] { t = Tensor(storage, l, dtype); });
  if (!t) return;
  const Truth tr = truth(l);
  require(tr.numel == 0 || tr.extent * dtype_size(dtype) <= static_cast<i128>(storage->nbytes()),
          "Tensor accepted " + l.to_string() + " of " + std::string(dtype_name(dtype)) + " over a storage of " +
              std::to_string(storage->nbytes()) + " bytes");
  if (tr.numel <= kReadLimit) step([&] { (void)t->contiguous(); });
}

}  // namespace
}  // namespace wick::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace wick;
  using namespace wick::fuzz;
  Bytes in(data, size);
  const size_t rank = in.byte() % 10;  // 9 is one past kMaxRank
  const std::vector<int64_t> shape = in.numbers(rank), strides = in.numbers(rank);
  const int64_t offset = in.number();
  const DType dtype = kAllDTypes[in.byte() % kNumDTypes];
  const bool dense = in.byte() % 4 == 0;
  std::optional<Layout> first;
  step([&] { first = dense ? Layout(Dims(shape), offset) : Layout(Dims(shape), Dims(strides), offset); });
  if (!first) return 0;
  check_layout(*first, dense ? "Layout(shape, offset)" : "Layout(shape, strides, offset)");

  Layout cur = *first;
  for (int k = in.byte() % 6; k > 0 && !in.empty(); --k) {
    const int op = in.byte() % 8;
    std::optional<Layout> next = view_of(cur, op, in);
    if (!next) continue;
    check_layout(*next, kViewNames[op]);
    check_within(*next, cur, kViewNames[op]);
    cur = *next;
  }

  // Storage of exactly kStorageBytes from the reference backend (reads past it are ASan reports),
  // and the same from the CPU backend, whose copies are the ones users run.
  static StoragePtr exact = [] {
    StoragePtr s = reference::reference_backend().alloc(kStorageBytes);
    std::memset(s->data(), 0, kStorageBytes);
    return s;
  }();
  static StoragePtr cpu = Tensor::zeros({static_cast<int64_t>(kStorageBytes)}, DType::U8).storage();
  for (const Layout& l : {*first, cur}) {
    over_storage(exact, l, dtype);
    over_storage(cpu, l, dtype);
  }
  return 0;
}
