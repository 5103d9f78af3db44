// A seeded random loop over the public API: each call is an op with small random inputs (any
// dtype, seen through contiguous, transposed, narrowed, stride-2 or broadcast views) or a hostile
// one (random_hostile.cpp). Every call must return or throw a wick::Error naming its op; results
// must match the reference backend (shape, dtype, values: exact for integers and copies, close for
// float math), accepted views must stay inside their storage, and no call may allocate more than
// kMaxBytes. The seed is printed; WICK_ADV_SEED, WICK_ADV_CALLS, WICK_ADV_ONLY (one call by its
// number), WICK_ADV_HOSTILE=0 (ordinary calls only) and WICK_ADV_VERBOSE=1 rerun what failed.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <sstream>

#include "backend/registry.h"
#include "backend/storage.h"
#include "random_calls.h"
#include "test_util.h"

namespace wick::adversarial {
namespace {

constexpr int64_t kCompared = 4096;  // results compared with the reference have at most this many elements

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoll(v, nullptr, 0) : fallback;
}

uint64_t mix(uint64_t seed, uint64_t i) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// "" when t is a sane result: a defined tensor whose layout stays inside its storage, and whose
// storage is no larger than the loop ever needs.
std::string insane(const Tensor& t) {
  if (!t.defined()) return "an undefined tensor";
  const Layout& l = t.layout();
  // Saturated at 2^64: only "past int64" matters, and products of two such values fit in 128 bits.
  const __int128 cap = __int128{1} << 64;
  __int128 numel = 1, last = l.offset();
  for (int i = 0; i < l.rank(); ++i) {
    if (l.dim(i) < 0 || l.stride(i) < 0) return "a negative size or stride: " + l.to_string();
    numel = std::min(numel * l.dim(i), cap);
    last = std::min(last + static_cast<__int128>(l.dim(i) - 1) * l.stride(i), cap);
  }
  if (numel > kI64Max) return "more than 2^63 elements: " + l.to_string();
  const __int128 nbytes = static_cast<__int128>(t.storage()->nbytes());
  if (numel > 0 && (last + 1) * dtype_size(t.dtype()) > nbytes)
    return "a view past the end of its " + std::to_string(t.storage()->nbytes()) + "-byte storage: " + l.to_string();
  if (nbytes > kMaxBytes) return "a storage of " + std::to_string(t.storage()->nbytes()) + " bytes";
  return "";
}

std::string outcome(const Outcome& o) {
  return o.kind == kOk ? std::string("a result") : kinds_to_string(o.kind) + " (" + o.message + ")";
}

double tolerance(DType dt) {
  switch (dt) {
    case DType::F64: return 1e-9;
    case DType::F32: return 1e-4;
    case DType::F16: return 4e-3;
    case DType::BF16: return 3e-2;
    default: return 0.15;  // f8e4m3: one step of its 3-bit mantissa
  }
}

// "" when got matches want.
std::string mismatch(const Tensor& got, const Tensor& want, Compare compare) {
  if (got.shape() != want.shape() || got.dtype() != want.dtype())
    return "got " + got.to_string() + ", the reference " + want.to_string();
  if (is_int(got.dtype())) {
    const auto g = got.to_dtype(DType::I64).to_vector<int64_t>(), w = want.to_dtype(DType::I64).to_vector<int64_t>();
    for (size_t i = 0; i < g.size(); ++i)
      if (g[i] != w[i])
        return "element " + std::to_string(i) + " is " + std::to_string(g[i]) + ", not " + std::to_string(w[i]);
    return "";
  }
  const auto g = got.to_dtype(DType::F64).to_vector<double>(), w = want.to_dtype(DType::F64).to_vector<double>();
  double scale = 1;
  for (double v : w)
    if (std::isfinite(v)) scale = std::max(scale, std::fabs(v));
  const double tol = tolerance(got.dtype());
  for (size_t i = 0; i < g.size(); ++i) {
    const bool same = std::isnan(g[i]) ? std::isnan(w[i])
                      : compare == Compare::Exact || !std::isfinite(w[i])
                          ? g[i] == w[i] && std::signbit(g[i]) == std::signbit(w[i])
                          : std::fabs(g[i] - w[i]) <= tol * (std::fabs(w[i]) + scale);
    if (!same) {
      std::ostringstream os;
      os.precision(17);
      os << "element " << i << " is " << g[i] << ", not " << w[i];
      return os.str();
    }
  }
  return "";
}

// The loop on one device. Failures are printed to stderr as they come (each kind a few times) so
// that they show when the loop runs in a child process, as it does by default.
class Loop {
 public:
  explicit Loop(Device device) : dev_(device) {}
  int run();  // the number of failed calls

 private:
  void run_one(const Call& c, const std::string& desc);
  void fail(const std::string& desc, const std::string& why);

  Device dev_;
  int failures_ = 0, compared_ = 0, refused_ = 0;  // failed; matched the reference; refused by both
  bool verbose_ = false;                           // WICK_ADV_VERBOSE=1: print every call and its end
  std::map<std::string, int> seen_;                // failures by kind
};

void Loop::fail(const std::string& desc, const std::string& why) {
  ++failures_;
  // The kind: the reason's words before its first number or shape.
  const std::string kind = why.substr(0, std::min<size_t>(why.find_first_of("0123456789[-"), 60));
  if (++seen_[kind] <= 3) std::cerr << "FAILED " << desc << ": " << why << std::endl;
}

void Loop::run_one(const Call& c, const std::string& desc) {
  const Device ref = reference_device();
  std::vector<Tensor> in, out;
  auto fail = [&](const std::string& why) { this->fail(desc, why); };
  const Outcome made = run_call([&] {
    for (const Input& i : c.inputs) in.push_back(make(i, dev_));
  });
  if (made.kind != kOk || !made.broken.empty()) return fail("making the inputs: " + made.message + made.broken);
  if (c.seed) manual_seed(c.seed, dev_);
  const Outcome a = run_call([&] {
    out = c.run(in, dev_);
    synchronize(dev_);
  });
  if (verbose_) std::cerr << desc << ": " << outcome(a) << a.broken << std::endl;
  if (!a.broken.empty()) return fail(a.broken);
  bool small = true;
  for (const Tensor& t : out) {
    if (const std::string why = insane(t); !why.empty()) return fail((c.hostile ? "accepted, giving " : "gave ") + why);
    small = small && t.numel() <= kCompared;
  }
  // A hostile call is compared only when it gave a small result: the reference is an oracle of
  // values, not hardened against hostile sizes itself.
  if (!small || (c.hostile && a.kind != kOk)) return;
  std::vector<Tensor> in_ref, out_ref;
  const Outcome made_ref = run_call([&] {
    for (const Input& i : c.inputs) in_ref.push_back(make(i, ref));
  });
  if (made_ref.kind != kOk || !made_ref.broken.empty())
    return fail("making the inputs on the reference: " + made_ref.message + made_ref.broken);
  if (c.seed) manual_seed(c.seed, ref);
  const Outcome b = run_call([&] { out_ref = c.run(in_ref, ref); });
  if (!b.broken.empty()) return fail("on the reference: " + b.broken);
  if (a.kind != b.kind) return fail(dev_.to_string() + " gave " + outcome(a) + ", the reference " + outcome(b));
  if (a.kind != kOk) {
    ++refused_;
    return;
  }
  if (out.size() != out_ref.size())
    return fail(std::to_string(out.size()) + " results, not " + std::to_string(out_ref.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    if (const std::string why = mismatch(out[i], out_ref[i], c.compare); !why.empty())
      return fail("result " + std::to_string(i) + ": " + why);
  }
  ++compared_;
}

int Loop::run() {
  const uint64_t seed = static_cast<uint64_t>(env_int("WICK_ADV_SEED", 20261124));
  const int64_t calls = env_int("WICK_ADV_CALLS", 5000), only = env_int("WICK_ADV_ONLY", -1);
  const bool hostile = env_int("WICK_ADV_HOSTILE", 1) != 0;
  verbose_ = env_int("WICK_ADV_VERBOSE", 0) != 0;
  limit_process(600, "random loop (seed " + std::to_string(seed) + ")");
  install_crash_report();

  std::vector<Maker> makers = ordinary_makers();
  if (hostile)
    for (Maker& m : hostile_makers()) makers.push_back(std::move(m));
  int total = 0;
  for (const Maker& m : makers) total += m.weight;

  // Poisoned, guarded CPU allocations: an op that reads memory it never wrote differs from the
  // reference, and one that writes past its output trips a guard.
  Backend& cpu = backend_for(Device::cpu());
  const int64_t guards_before = cpu.guard_violations();
  cpu.set_alloc_check({.poison = true, .guard_bytes = 64});
  for (int64_t i = 0; i < calls; ++i) {
    if (only >= 0 && i != only) continue;
    Gen g(mix(seed, static_cast<uint64_t>(i)), hostile);
    int64_t pick = g.range(0, total - 1);
    const Maker* m = &makers[0];
    for (const Maker& candidate : makers) {
      if (pick < candidate.weight) {
        m = &candidate;
        break;
      }
      pick -= candidate.weight;
    }
    const Call c = m->make(g);
    std::string desc = "call #" + std::to_string(i) + " (seed " + std::to_string(seed) + ") " + m->name + ": " + c.desc;
    for (const Input& in : c.inputs) desc += " | " + describe(in);
    set_activity(desc);
    run_one(c, desc);
  }
  set_activity("");
  cpu.set_alloc_check({});
  alarm(0);
  if (cpu.guard_violations() != guards_before) fail("the loop", "an op wrote past the end of an allocation");
  std::cerr << "random loop on " << dev_ << ": " << compared_ << " calls matched the reference, " << refused_
            << " were refused by both, " << failures_ << " failed (" << seen_.size()
            << " kinds, each shown at most 3 times)" << std::endl;
  return failures_;
}

class RandomLoop : public ::testing::TestWithParam<Device> {};

TEST_P(RandomLoop, CallsRefuseOrMatchTheReference) {
  // In a child, as the table's cases: a crash or a hang is this test's failure, not the binary's end.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  if (!::testing::internal::InDeathTestChild()) {
    std::cout << "random loop on " << GetParam() << ": seed " << env_int("WICK_ADV_SEED", 20261124) << ", "
              << env_int("WICK_ADV_CALLS", 5000) << " calls (WICK_ADV_SEED, WICK_ADV_CALLS, WICK_ADV_ONLY)"
              << std::endl;
  }
  if (const char* v = std::getenv("WICK_ADVERSARIAL_IN_PROCESS"); v && std::strcmp(v, "0") != 0) {
    EXPECT_EQ(Loop(GetParam()).run(), 0);
    return;
  }
  EXPECT_EXIT(std::_Exit(Loop(GetParam()).run() ? 1 : 0), ::testing::ExitedWithCode(0), "");
}

INSTANTIATE_TEST_SUITE_P(Devices, RandomLoop, ::testing::ValuesIn(test::devices()), test::device_name);

}  // namespace
}  // namespace wick::adversarial
