// Fuzzes the safetensors reader (include/wick/io.h) with the fuzzer's bytes as a file: parsing
// either succeeds or raises a wick::Error that names "safetensors"; what it accepts must hold
// together (the tensors cover the data section exactly, each byte count its shape's), and every
// accepted tensor must read back without a sanitizer report. Entries of the file read through
// another file, another file's entries read through it, and its entries changed after they were
// read must be refused or read inside the file.
#include <algorithm>

#include "fuzz_input.h"
#include "wick/io.h"

namespace wick::fuzz {
namespace {

void read_through(const io::SafetensorsFile& f, const io::SafetensorsTensor& t) {
  step([&] { (void)touch(f.data(t)); });
  if (t.shape.numel() <= (int64_t{1} << 16)) step([&] { (void)f.tensor(t); });
}

void foreign_entries(const io::SafetensorsFile& f) {
  static const io::SafetensorsFile other = [] {
    io::SafetensorsWriter w;
    w.add("w", Tensor::from_vector(std::vector<float>(64, 0.5f), {2, 32}));
    return io::SafetensorsFile::parse(w.bytes(), "other.safetensors");
  }();
  for (const io::SafetensorsTensor& t : other.tensors()) read_through(f, t);
  for (const io::SafetensorsTensor& t : f.tensors()) {
    read_through(other, t);
    io::SafetensorsTensor moved = t, grown = t;
    moved.offset = t.offset > (int64_t{1} << 50) ? 0 : t.offset + (int64_t{1} << 40);
    grown.nbytes = t.nbytes + 4096;
    grown.shape = Shape({t.shape.numel() + 1024});
    read_through(f, moved);
    read_through(f, grown);
  }
}

void file(const uint8_t* data, size_t size) {
  std::optional<io::SafetensorsFile> f;
  step([&] { f = io::SafetensorsFile::parse(std::vector<uint8_t>(data, data + size), "fuzz.safetensors"); });
  if (!f) return;
  size_t touched = 0;
  for (const auto& [key, value] : f->metadata()) touched += key.size() + value.size();
  int64_t covered = 0;
  for (const io::SafetensorsTensor& t : f->tensors()) {
    if (t.dtype) require(t.nbytes == t.shape.numel() * dtype_size(*t.dtype), t.name + ": byte count");
    const std::span<const uint8_t> bytes = f->data(t);
    uint8_t x = 0;
    for (uint8_t b : bytes) x ^= b;  // every byte is inside the buffer (ASan checks)
    touched += x;
    covered += t.nbytes;
    if (t.shape.numel() <= (int64_t{1} << 16)) step([&] { (void)f->tensor(t); });
  }
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const io::SafetensorsTensor& t : f->tensors()) ranges.emplace_back(t.offset, t.offset + t.nbytes);
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) require(ranges[i - 1].second == ranges[i].first, "a gap or an overlap accepted");
  require(covered <= static_cast<int64_t>(size), "tensors hold more bytes than the file");
  foreign_entries(*f);
  (void)touched;
}

}  // namespace
}  // namespace wick::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  wick::fuzz::file(data, size);
  return 0;
}
