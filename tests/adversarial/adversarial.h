// Shared by the adversarial tests: what a call may do with hostile input (return, or throw a
// wick::Error whose message starts with the op's name), a table case of bad input, and the process
// limits that keep a hostile call that slips through from eating the machine.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "wick/wick.h"

namespace wick::adversarial {

inline constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
inline constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t p2(int n) { return int64_t{1} << n; }

// How a call ended, as bits so that a case can accept several.
enum Kind : unsigned {
  kOk = 1,
  kShape = 2,
  kDType = 4,
  kDevice = 8,
  kIndex = 16,
  kOom = 32,
  kNotSupported = 64,
  kPlainError = 128,  // a wick::Error that is none of the subclasses
};
inline constexpr unsigned kAnyError = kShape | kDType | kDevice | kIndex | kOom | kNotSupported | kPlainError;
inline constexpr unsigned kShapeOrOom = kShape | kOom;
inline constexpr unsigned kOkOrError = kOk | kAnyError;

std::string kinds_to_string(unsigned kinds);
unsigned kind_of(const Error& e);

// Thrown by a case's own check of a result: a wrong answer, not a wick::Error.
struct CheckFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
void check(bool cond, const std::string& what);

// Whether `what` starts with "<op>:" (op given) or with some op-like name and ':' (op null).
bool message_names_op(const std::string& what, const char* op = nullptr);

struct Outcome {
  unsigned kind = kOk;  // one bit: kOk, or the class of the wick::Error thrown
  std::string message;  // the error's message
  std::string broken;   // non-empty when the call broke the contract: why
};

// Runs fn. The contract: it returns, or throws a wick::Error subclass whose message starts with an
// op name and ':'. Anything else (another exception type, a CheckFailure) is recorded in `broken`.
Outcome run_call(const std::function<void()>& fn);

// run_call, adding a GoogleTest failure naming `what` when the contract is broken.
Outcome expect_ok_or_wick_error(const std::function<void()>& fn, const std::string& what = "call");

// One bad input to a public function: what it runs and the outcomes it may have.
struct Case {
  std::string name;  // [a-z0-9_], unique: the test's name
  const char* op;    // the op a wick::Error must name first; null: any op name
  unsigned expect;   // Kind bits
  std::function<void(Device)> run;
};

// Tables of cases, by area (test_adversarial*.cpp).
std::vector<Case> shape_layout_cases();
std::vector<Case> creation_view_cases();
std::vector<Case> op_cases();
std::vector<Case> write_join_nn_cases();

// Runs the case and says what went wrong, or "" when it ended as expected.
std::string judge(const Case& c, Device device);

// A device served by the reference backend (no machine has a GPU numbered 999), for results to
// compare with and for mixing devices in CPU-only builds.
Device reference_device();

// For a process about to run hostile calls: on the CPU without a sanitizer, caps its address space
// so that a wrapped size that slips through fails to allocate instead of filling memory; SIGALRM
// after `seconds` prints `label` and exits, so a hang is a failure and not a stuck CI job.
void limit_process(int seconds, const std::string& label);

// What the process is doing now ("call #12: narrow(...)"): printed by the hang, crash and
// std::terminate reports that install_crash_report sets up.
void set_activity(const std::string& what);
void install_crash_report();

// A broadcast view of one zero element: any shape without memory behind it.
Tensor broadcast_zero(const Shape& shape, DType dtype, Device device);

}  // namespace wick::adversarial
