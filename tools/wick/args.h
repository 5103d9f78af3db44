// Option values shared by the `wick` and `wick-parity` programs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "wick/device.h"
#include "wick/dtype.h"
#include "wick/quant.h"

namespace wick::cli {

// The usage text of `wick` (parity's options included: wick-parity is reached as `wick parity`).
extern const char* const kUsage;
// The line after an error message: where the usage is.
extern const char* const kSeeHelp;

// The usage lines of one command (the whole usage for a name it lacks): what `wick CMD --help`
// prints.
std::string command_usage(std::string_view command);

// "f32,bf16" -> {F32, BF16}; std::runtime_error naming an unknown dtype.
std::vector<DType> parse_dtype_list(const std::string& list);
// An unsigned 64-bit decimal; std::runtime_error otherwise.
uint64_t parse_seed(const std::string& text);

// Walks the options of one command: `for (Options o("generate", argc, argv); o.next();)`, then
// o.is("--model") and o.value() (or a typed value) per option, o.unknown() for the rest. Errors
// are std::runtime_errors naming the command and the option. --help (or -h) prints the command's
// usage and ends the program with status 0.
class Options {
 public:
  Options(const char* command, int argc, char** argv) : command_(command), argc_(argc), argv_(argv) {}
  bool next();
  bool is(const char* option) const { return name_ == option; }
  std::string value();
  int64_t int_value();
  double float_value();
  Device device_value();
  // "cuda:0,cuda:1": the devices of a model split over ranks (one per device; cpu may repeat).
  std::vector<Device> device_list_value();
  DType dtype_value();
  // A block format by name ("q4_k", "q8_0"); an error naming the value otherwise.
  quant::QType qtype_value();
  [[noreturn]] void unknown() const;
  [[noreturn]] void fail(const std::string& what) const;

 private:
  const char* command_;
  int argc_;
  char** argv_;
  int at_ = -1;
  std::string name_;
};

}  // namespace wick::cli
