// Helpers shared by the unit tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "wick/wick.h"

namespace wick::test {

// Every device present (the CPU, and each GPU of the backend built in): tests loop over these.
inline std::vector<Device> devices() { return available_devices(); }

// The largest |a - b| of two tensors of one shape, on any devices and float dtypes (compared in f32).
inline float max_abs_diff(const Tensor& a, const Tensor& b) {
  return a.to_device(Device::cpu())
      .to_dtype(DType::F32)
      .sub(b.to_device(Device::cpu()).to_dtype(DType::F32))
      .abs()
      .max()
      .item<float>();
}

// Test-name suffix for a device parameter: "cpu", "cuda_0".
inline std::string device_name(const ::testing::TestParamInfo<Device>& info) {
  std::string s = info.param.to_string();
  for (char& c : s)
    if (c == ':') c = '_';
  return s;
}

// Expects `stmt` to throw ErrorType whose message contains each of `parts`.
#define WICK_EXPECT_ERROR(stmt, ErrorType, ...)                                                                 \
  do {                                                                                                          \
    try {                                                                                                       \
      stmt;                                                                                                     \
      ADD_FAILURE() << "expected " #ErrorType " from: " #stmt;                                                  \
    } catch (const ErrorType& e) {                                                                              \
      std::string what = e.what();                                                                              \
      for (const std::string& part : std::vector<std::string>{__VA_ARGS__})                                     \
        EXPECT_NE(what.find(part), std::string::npos) << "message \"" << what << "\" lacks \"" << part << "\""; \
    } catch (const std::exception& e) {                                                                         \
      ADD_FAILURE() << "expected " #ErrorType " from: " #stmt ", got another error: " << e.what();              \
    }                                                                                                           \
  } while (0)

// A directory under the test's temp dir, removed with what it holds when the test ends.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = testing::TempDir() + "wick-test-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("cannot make a directory under " + testing::TempDir());
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }
  void write(const std::string& name, const std::string& text) const {
    std::FILE* f = std::fopen(file(name).c_str(), "wb");
    if (f == nullptr) throw std::runtime_error("cannot write " + file(name));
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }

 private:
  std::string path_;
};

}  // namespace wick::test
