// Helpers shared by the unit tests.
#pragma once

#include <gtest/gtest.h>
#include <string>
#include <vector>

#include "wick/wick.h"

namespace wick::test {

// Every device present (the CPU, and each GPU of the backend built in): tests loop over these.
inline std::vector<Device> devices() { return available_devices(); }

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

}  // namespace wick::test
