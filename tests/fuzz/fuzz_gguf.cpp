// Fuzzes the GGUF reader (include/wick/io.h) with the fuzzer's bytes as a file: parsing either
// succeeds or raises a wick::Error that names "gguf"; what it accepts must hold together (every
// tensor's bytes inside the file, none overlapping, its byte count its shape's), and every accepted
// tensor and metadata value must read back without a sanitizer report. Entries of the file read
// through another file, another file's entries read through it, and its entries changed after they
// were read (moved, grown, retyped) must be refused or read inside the file.
#include <algorithm>

#include "fuzz_input.h"
#include "wick/io.h"
#include "wick/quant.h"

namespace wick::fuzz {
namespace {

// Touches a value and everything inside it.
size_t walk(const io::GgufValue& v) {
  size_t n = 1;
  if (const auto* s = std::get_if<std::string>(&v.value)) n += s->size();
  if (const auto* a = std::get_if<io::GgufArray>(&v.value)) {
    for (const io::GgufValue& item : a->items) {
      require(item.type == a->type, "an array item of another type than the array's");
      n += walk(item);
    }
  }
  return n;
}

// Reads entry t through f every way there is: an Error, or bytes inside f.
void read_through(const io::GgufFile& f, const io::GgufTensor& t) {
  step([&] { (void)touch(f.data(t)); });
  if (t.shape.numel() > (int64_t{1} << 16)) return;
  step([&] { (void)f.tensor(t); });
  step([&] { (void)f.qtensor(t); });
}

void foreign_entries(const io::GgufFile& f) {
  static const io::GgufFile other = [] {
    io::GgufWriter w;
    w.add("w", Tensor::from_vector(std::vector<float>(64, 0.5f), {2, 32}));
    w.add("q", quant::quantize(Tensor::from_vector(std::vector<float>(64, 0.25f), {2, 32}), quant::QType::Q8_0));
    return io::GgufFile::parse(w.bytes(), "other.gguf");
  }();
  for (const io::GgufTensor& t : other.tensors()) read_through(f, t);
  for (const io::GgufTensor& t : f.tensors()) {
    read_through(other, t);
    io::GgufTensor moved = t, grown = t, retyped = t;
    moved.offset = t.offset > (int64_t{1} << 50) ? 0 : t.offset + (int64_t{1} << 40);
    grown.nbytes = t.nbytes + 4096;
    grown.shape = Shape({t.shape.numel() + 1024});
    if (t.dtype) retyped.dtype = *t.dtype == DType::F64 ? DType::F32 : DType::F64;
    for (const io::GgufTensor* changed : {&moved, &grown, &retyped}) read_through(f, *changed);
  }
}

void file(const uint8_t* data, size_t size) {
  std::optional<io::GgufFile> f;
  step([&] { f = io::GgufFile::parse(std::vector<uint8_t>(data, data + size), "fuzz.gguf"); });
  if (!f) return;
  require(f->version() == 2 || f->version() == 3, "version " + std::to_string(f->version()) + " accepted");
  require(f->alignment() > 0 && (f->alignment() & (f->alignment() - 1)) == 0, "alignment not a power of two");
  size_t touched = 0;
  for (const auto& [key, v] : f->metadata()) touched += key.size() + walk(v);
  std::vector<std::pair<const uint8_t*, const uint8_t*>> ranges;
  for (const io::GgufTensor& t : f->tensors()) {
    require(t.dtype.has_value() != t.qtype.has_value(), t.name + ": dtype and qtype both or neither");
    const int64_t numel = t.shape.numel();
    if (t.dtype) require(t.nbytes == numel * static_cast<int64_t>(dtype_size(*t.dtype)), t.name + ": byte count");
    const std::span<const uint8_t> bytes = f->data(t);
    uint8_t x = 0;
    for (uint8_t b : bytes) x ^= b;  // every byte is inside the buffer (ASan checks)
    touched += x;
    if (!bytes.empty()) ranges.emplace_back(bytes.data(), bytes.data() + bytes.size());
    if (numel <= (int64_t{1} << 16)) {
      step([&] {
        if (t.dtype) (void)f->tensor(t);
        if (t.qtype) (void)f->qtensor(t);
      });
    }
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) require(ranges[i - 1].second <= ranges[i].first, "tensors overlap");
  foreign_entries(*f);
  (void)touched;
}

}  // namespace
}  // namespace wick::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  wick::fuzz::file(data, size);
  return 0;
}
