// Shared by the fuzz targets: reads numbers from the fuzzer's bytes (biased toward the sizes that
// break arithmetic: 0, -1, 2^31, 2^32, 2^62, 2^63 - 1, ...), runs steps that may throw a
// wick::Error, writes the files of the readers that take a path, and stops the process on a
// broken invariant so that libFuzzer keeps the input.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "wick/wick.h"

namespace wick::fuzz {

class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  bool empty() const { return p_ == end_; }
  uint8_t byte() { return p_ < end_ ? *p_++ : 0; }
  // One selector byte: a small number, an edge value, or the next 8 bytes as they are.
  int64_t number() {
    static constexpr int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
    static constexpr int64_t kEdges[] = {-1,
                                         -2,
                                         kMax,
                                         kMin,
                                         kMax - 1,
                                         kMin + 1,
                                         int64_t{1} << 31,
                                         (int64_t{1} << 31) - 1,
                                         int64_t{1} << 32,
                                         (int64_t{1} << 32) - 1,
                                         (int64_t{1} << 32) + 1,
                                         int64_t{1} << 61,
                                         int64_t{1} << 62,
                                         (int64_t{1} << 62) + 1,
                                         (int64_t{1} << 62) - 1,
                                         int64_t{1} << 44,
                                         3037000499,
                                         kMax / 3,
                                         -(int64_t{1} << 31),
                                         -(int64_t{1} << 32),
                                         kMax / 2 + 1,
                                         int64_t{1} << 21};
    const uint8_t sel = byte();
    if (sel < 112) return sel % 9;
    if (sel < 240) return kEdges[(sel - 112) % std::size(kEdges)];
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = v << 8 | byte();
    return static_cast<int64_t>(v);
  }
  std::vector<int64_t> numbers(size_t n) {
    std::vector<int64_t> v(n);
    for (int64_t& x : v) x = number();
    return v;
  }
  // The bytes up to the next zero byte (which is consumed) or the end, as text.
  std::string until_zero() {
    std::string s;
    while (p_ < end_ && *p_ != 0) s += static_cast<char>(*p_++);
    if (p_ < end_) ++p_;
    return s;
  }
  // The rest, as text.
  std::string rest() {
    std::string s(reinterpret_cast<const char*>(p_), static_cast<size_t>(end_ - p_));
    p_ = end_;
    return s;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

// The file `name` holding `text`, in a folder of this process's own under the temporary
// directory (the same folder on every call, removed when the process exits): its path.
inline std::filesystem::path scratch_file(const std::string& name, const std::string& text) {
  struct Folder {
    std::filesystem::path path = std::filesystem::temp_directory_path() / ("wick_fuzz_" + std::to_string(getpid()));
    Folder() { std::filesystem::create_directories(path); }
    ~Folder() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Folder folder;
  std::ofstream(folder.path / name, std::ios::binary | std::ios::trunc) << text;
  return folder.path / name;
}

[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "fuzz finding: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// The bytes XORed together: reading every one of them, which ASan checks lies inside a mapping.
inline uint8_t touch(std::span<const uint8_t> bytes) {
  uint8_t x = 0;
  for (uint8_t b : bytes) x ^= b;
  return x;
}

inline void require(bool cond, const std::string& what) {
  if (!cond) finding(what);
}

// Runs f; a wick::Error is an accepted answer when its message names an op ("op: ..."); any other
// exception leaves f, so the fuzzer reports it.
template <typename F>
void step(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    const std::string what = e.what();
    const size_t colon = what.find(':');
    bool named = colon != std::string::npos && colon > 0 && what[0] >= 'a' && what[0] <= 'z';
    for (size_t i = 0; named && i < colon; ++i)
      named = (what[i] >= 'a' && what[i] <= 'z') || (what[i] >= '0' && what[i] <= '9') || what[i] == '_';
    require(named, "a wick::Error whose message does not start with an op name: " + what);
  }
}

}  // namespace wick::fuzz
