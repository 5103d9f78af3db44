#include "adversarial.h"

#include <cxxabi.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <gtest/gtest.h>
#include <memory>
#include <mutex>
#include <sys/resource.h>
#include <typeinfo>

#include "backend/registry.h"
#include "reference/reference.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define WICK_ADV_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define WICK_ADV_SANITIZED 1
#endif
#endif

// A failed allocation is wick's OutOfMemoryError, not a sanitizer report: hostile sizes must be
// refusable. An ASAN_OPTIONS setting of the same key still wins.
extern "C" __attribute__((used, visibility("default"))) const char* __asan_default_options() {
  return "allocator_may_return_null=1";
}

namespace wick::adversarial {

namespace {

std::string demangle(const char* name) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> s(abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
  return status == 0 && s ? s.get() : name;
}

char g_alarm_message[512];
char g_activity[2048];

void write_stderr(const char* s) {
  ssize_t ignored = write(STDERR_FILENO, s, strlen(s));
  (void)ignored;
}

void print_activity() {
  if (!g_activity[0]) return;
  write_stderr("while running: ");
  write_stderr(g_activity);
  write_stderr("\n");
}

void on_alarm(int) {
  write_stderr(g_alarm_message);
  print_activity();
  _exit(3);
}

#ifndef WICK_ADV_SANITIZED
void on_fatal_signal(int sig) {
  write_stderr(strsignal(sig));
  write_stderr(": ");
  print_activity();
  signal(sig, SIG_DFL);
  raise(sig);
}
#endif

[[noreturn]] void on_terminate() {
  std::string what = "no exception";
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      what = x.what();
    } catch (...) {
      what = "a non-std exception";
    }
  }
  std::fprintf(stderr, "std::terminate (an exception escaped where it cannot be caught): %s\n", what.c_str());
  print_activity();
  std::fflush(stderr);
  std::abort();
}

}  // namespace

// Called by a sanitizer runtime (when linked) just before it ends the process with a report.
extern "C" __attribute__((weak)) void __sanitizer_set_death_callback(void (*callback)(void));

void set_activity(const std::string& what) { std::snprintf(g_activity, sizeof g_activity, "%s", what.c_str()); }

void install_crash_report() {
  std::set_terminate(on_terminate);
#ifndef WICK_ADV_SANITIZED
  // A sanitizer's own handler prints a better report (with a stack); the death callback adds ours.
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) signal(sig, on_fatal_signal);
#endif
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(print_activity);
}

std::string kinds_to_string(unsigned kinds) {
  static const std::pair<unsigned, const char*> names[] = {{kOk, "no error"},
                                                           {kShape, "ShapeError"},
                                                           {kDType, "DTypeError"},
                                                           {kDevice, "DeviceError"},
                                                           {kIndex, "IndexError"},
                                                           {kOom, "OutOfMemoryError"},
                                                           {kNotSupported, "NotSupportedError"},
                                                           {kPlainError, "wick::Error"}};
  if ((kinds & kAnyError) == kAnyError) return (kinds & kOk) ? "no error or any wick::Error" : "any wick::Error";
  std::string out;
  for (const auto& [bit, name] : names) {
    if (!(kinds & bit)) continue;
    out += (out.empty() ? "" : " or ");
    out += name;
  }
  return out;
}

unsigned kind_of(const Error& e) {
  if (dynamic_cast<const ShapeError*>(&e)) return kShape;
  if (dynamic_cast<const DTypeError*>(&e)) return kDType;
  if (dynamic_cast<const DeviceError*>(&e)) return kDevice;
  if (dynamic_cast<const IndexError*>(&e)) return kIndex;
  if (dynamic_cast<const OutOfMemoryError*>(&e)) return kOom;
  if (dynamic_cast<const NotSupportedError*>(&e)) return kNotSupported;
  return kPlainError;
}

void check(bool cond, const std::string& what) {
  if (!cond) throw CheckFailure(what);
}

bool message_names_op(const std::string& what, const char* op) {
  if (op) return what.rfind(std::string(op) + ":", 0) == 0;
  // An op name: a lowercase identifier ("conv_transpose2d", "to_vector"), then ':'.
  size_t i = 0;
  if (what.empty() || !(what[0] >= 'a' && what[0] <= 'z')) return false;
  while (i < what.size() &&
         ((what[i] >= 'a' && what[i] <= 'z') || (what[i] >= '0' && what[i] <= '9') || what[i] == '_'))
    ++i;
  return i < what.size() && what[i] == ':';
}

Outcome run_call(const std::function<void()>& fn) {
  Outcome o;
  try {
    fn();
  } catch (const CheckFailure& e) {
    o.broken = std::string("wrong result: ") + e.what();
  } catch (const Error& e) {
    o.kind = kind_of(e);
    o.message = e.what();
    if (!message_names_op(o.message)) o.broken = "the message does not start with an op name and ':': " + o.message;
  } catch (const std::exception& e) {
    o.broken = "threw " + demangle(typeid(e).name()) + ", not a wick::Error: " + e.what();
  } catch (...) {
    o.broken = "threw something that is not a std::exception";
  }
  return o;
}

Outcome expect_ok_or_wick_error(const std::function<void()>& fn, const std::string& what) {
  Outcome o = run_call(fn);
  if (!o.broken.empty()) ADD_FAILURE() << what << ": " << o.broken;
  return o;
}

std::string judge(const Case& c, Device device) {
  const Outcome o = run_call([&] { c.run(device); });
  if (!o.broken.empty()) return o.broken;
  if (!(o.kind & c.expect)) {
    return "expected " + kinds_to_string(c.expect) + ", got " +
           (o.kind == kOk ? std::string("no error") : kinds_to_string(o.kind) + ": " + o.message);
  }
  // A failed allocation may name the allocator; every other error names the op the user called.
  if (o.kind != kOk && o.kind != kOom && c.op && !message_names_op(o.message, c.op))
    return std::string("the message does not start with \"") + c.op + ":\": " + o.message;
  return "";
}

Device reference_device() {
  static const Device device(DeviceType::Cuda, 999);
  static reference::ReferenceBackend backend(device);
  static std::once_flag once;
  std::call_once(once, [] { set_backend_override(device, &backend); });
  return device;
}

void limit_process(int seconds, const std::string& label) {
  std::snprintf(g_alarm_message, sizeof g_alarm_message,
                "%s: did not finish in %d s (a hang, or work on a size "
                "that should have been refused)\n",
                label.c_str(), seconds);
  signal(SIGALRM, on_alarm);
  alarm(static_cast<unsigned>(seconds));
#ifndef WICK_ADV_SANITIZED
  // GPU runtimes reserve huge address ranges, so the cap is for CPU-only builds.
  if (!backend_built(DeviceType::Cuda) && !backend_built(DeviceType::Rocm)) {
    const rlim_t cap = rlim_t{8} << 30;
    rlimit rl{cap, cap};
    setrlimit(RLIMIT_AS, &rl);
  }
#endif
}

Tensor broadcast_zero(const Shape& shape, DType dtype, Device device) {
  return Tensor::zeros({}, dtype, device).broadcast_as(shape);
}

}  // namespace wick::adversarial
