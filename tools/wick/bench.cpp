// `wick bench`: option parsing, the timing loop, the ceilings, the table and the CSV.
#include "bench.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>

#include "args.h"
#include "backend/registry.h"
#include "wick/wick.h"
#if WICK_HAS_GPU
#include "gpu/gpu_api.h"
#endif

namespace wick::bench {

namespace {

struct Result {
  const Case* c = nullptr;
  std::string error = {};  // "unsupported", or what the case threw
  int reps = 0;
  double median_ms = 0, min_ms = 0, max_ms = 0;
  double rate = 0;      // GB/s or TFLOP/s
  double ceiling = 0;   // the matching ceiling's rate, 0 if none was measured
  double fraction = 0;  // rate / ceiling
  const char* unit() const { return c->compute_bound() ? "TFLOP/s" : "GB/s"; }
};

// The device's name and its driver (GPU) or how the CPU backend runs on it.
struct DeviceInfo {
  std::string name, driver;
};

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
  }
  return "unknown CPU";
}

DeviceInfo device_info(Device d) {
  if (d.is_cpu()) {
    std::string threads = describe_device(d);  // "cpu: 16 threads (OpenMP)"
    if (threads.rfind("cpu: ", 0) == 0) threads = threads.substr(5);
    return {cpu_model(), threads};
  }
#if WICK_HAS_GPU
  return {gpu::gpu_name(d.index()), gpu::gpu_driver_version()};
#else
  return {describe_device(d), "unknown"};
#endif
}

// Sets allow_tf32 for the scope of one case.
class Tf32Scope {
 public:
  explicit Tf32Scope(bool on) : saved_(allow_tf32()) { set_allow_tf32(on); }
  ~Tf32Scope() { set_allow_tf32(saved_); }
  Tf32Scope(const Tf32Scope&) = delete;
  Tf32Scope& operator=(const Tf32Scope&) = delete;

 private:
  bool saved_;
};

constexpr double kShortMs = 0.1;
constexpr int kBatch = 20;

// Two warm-up runs, then up to o.reps timed runs: fewer for a case slower than budget_ms / o.reps,
// at least 3 (or o.reps if smaller).
Result measure(Backend& b, const Case& c, const Options& o, double budget_ms) {
  Result r{&c};
  if (!b.supports(c.key, c.dtypes)) {
    r.error = "unsupported";
    return r;
  }
  try {
    Tf32Scope tf32(c.tf32);
    std::vector<double> times;
    {
      Inputs inputs(b, parity::case_seed(o.seed, c.name()));
      const Run run = c.prepare(inputs);
      b.synchronize();
      const std::unique_ptr<Timer> timer = b.make_timer();
      int batch = 1;
      auto once = [&] {
        timer->start();
        StoragePtr out = run();
        for (int i = 1; i < batch; ++i) out = run();
        timer->stop();
        return timer->elapsed_ms() / batch;  // before `out` is released
      };
      once();  // the first call may set up (cuBLAS handles, cuDNN's engine search): not a measure
      double t = once();
      // An op shorter than kShortMs is timed kBatch at a time between one pair of marks: its time is
      // then the device's, as a stream kept busy (a decode loop, a captured graph) sees it, and not
      // the host's cost of issuing one op to an idle device.
      if (t < kShortMs) batch = kBatch, t = once();
      const int least = std::min(3, o.reps);
      const int reps = std::clamp(static_cast<int>(budget_ms / std::max(t, 1e-3)), least, o.reps);
      for (int i = 0; i < reps; ++i) times.push_back(once());
    }
    b.synchronize();  // raises errors kernels recorded
    std::sort(times.begin(), times.end());
    const size_t n = times.size();
    r.reps = static_cast<int>(n);
    r.median_ms = n % 2 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
    r.min_ms = times.front();
    r.max_ms = times.back();
    const double seconds = r.median_ms * 1e-3;
    r.rate = c.compute_bound() ? c.flops / seconds * 1e-12 : c.bytes / seconds * 1e-9;
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

std::string number(double v, int significant = 4) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", significant, v);
  return buf;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string pad(const std::string& s, size_t width, bool right = false) {
  if (s.size() >= width) return s;
  return right ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
}

void print_header(std::ostream& os) {
  os << pad("op", 15) << pad("dtype", 11) << pad("shape", 34) << pad("layout", 19) << pad("median_ms", 11, true)
     << pad("min_ms", 11, true) << pad("max_ms", 11, true) << pad("reps", 5, true) << pad("rate", 10, true) << "  "
     << pad("unit", 8) << pad("of_ceiling", 10, true) << "\n";
}

void print_row(std::ostream& os, const Result& r) {
  const Case& c = *r.c;
  os << pad(c.op, 14) << " " << pad(c.dtype, 10) << " " << pad(c.shape, 33) << " " << pad(c.layout, 18) << " ";
  if (!r.error.empty()) {
    os << (r.error == "unsupported" ? "unsupported" : "error: " + r.error) << "\n";
    return;
  }
  os << pad(fixed(r.median_ms, 3), 11, true) << pad(fixed(r.min_ms, 3), 11, true) << pad(fixed(r.max_ms, 3), 11, true)
     << pad(std::to_string(r.reps), 5, true) << pad(number(r.rate), 10, true) << "  " << pad(r.unit(), 8)
     << pad(r.ceiling <= 0 ? "-" : r.fraction > 1 ? "cache" : fixed(r.fraction, 3), 10, true) << "\n";
  os.flush();
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char ch : s) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

const char* kCsvHeader =
    "device,driver,revision,backend,op,dtype,shape,layout,median_ms,min_ms,max_ms,reps,bytes,flops,rate,unit,"
    "ceiling,fraction";

std::string csv_row(const DeviceInfo& info, const std::string& backend, const Result& r) {
  const Case& c = *r.c;
  std::ostringstream os;
  for (const std::string& s :
       {info.name, info.driver, std::string(git_revision()), backend, c.op, c.dtype, c.shape, c.layout})
    os << csv_field(s) << ",";
  os << number(r.median_ms, 6) << "," << number(r.min_ms, 6) << "," << number(r.max_ms, 6) << "," << r.reps << ","
     << fixed(c.bytes, 0) << "," << fixed(c.flops, 0) << "," << number(r.rate, 6) << "," << r.unit() << ","
     << number(r.ceiling, 6) << "," << (r.ceiling > 0 ? number(r.fraction, 4) : "") << "\n";
  return os.str();
}

bool selected(const Case& c, const Options& o, const std::regex& op_re) {
  if (!std::regex_search(c.op, op_re)) return false;
  return o.dtypes.empty() || std::find(o.dtypes.begin(), o.dtypes.end(), c.main_dtype) != o.dtypes.end();
}

Device default_device() {
  for (Device d : available_devices())
    if (!d.is_cpu()) return d;
  return Device::cpu();
}

int run_bench(Device device, const Options& o) {
  Backend& b = backend_for(device, "bench");
  const Scale full = device.is_cpu() ? Scale::Cpu : Scale::Gpu;
  const Scale scale = o.quick ? Scale::Quick : full;
  const double budget_ms = scale == Scale::Quick ? 200 : scale == Scale::Cpu ? 3000 : 2000;
  const std::vector<Case> cases = bench_cases(scale);
  // The ceilings always at full size, out of the caches, even with --quick: a ceiling measured
  // in cache would be no ceiling of the memory.
  const std::vector<Case> full_cases = scale == full ? std::vector<Case>{} : bench_cases(full);
  const std::vector<Case>& ceiling_cases = scale == full ? cases : full_cases;

  // The selected cases, and the ceiling cases they are compared with.
  std::regex op_re;
  try {
    op_re = std::regex(o.op_regex.empty() ? ".*" : o.op_regex);
  } catch (const std::regex_error& e) {
    throw std::runtime_error("--op: bad regular expression '" + o.op_regex + "' (" + e.what() + ")");
  }
  std::vector<const Case*> ceilings, rest;
  std::map<std::string, bool> needed;
  for (const Case& c : cases)
    if (selected(c, o, op_re)) needed[c.ceiling()] = true;
  for (const Case& c : ceiling_cases)
    if (!c.defines.empty() && (needed.count(c.defines) || selected(c, o, op_re))) ceilings.push_back(&c);
  for (const Case& c : cases)
    if (c.defines.empty() && selected(c, o, op_re)) rest.push_back(&c);
  if (ceilings.empty() && rest.empty()) throw std::runtime_error("no case matches --op and --dtype");

  std::ofstream csv;  // opened first: a bad path fails before a long run, not after
  if (!o.csv.empty()) {
    csv.open(o.csv);
    if (!csv) throw std::runtime_error("cannot write " + o.csv);
  }
  const DeviceInfo info = device_info(device);
  const std::string backend = device.to_string();
  std::cout << "wick bench on " << backend << ": " << info.name << " (" << info.driver << "), wick " << version()
            << " revision " << git_revision() << "\n";
  std::cout << "median of up to " << o.reps << " timed runs after a warm-up (ops under " << kShortMs << " ms: " << kBatch
            << " back to back per run); rate over the median; of_ceiling: "
            << "the fraction of the copy bandwidth (memory-bound) or of the dtype's GEMM peak, both measured "
            << "out of cache (\"cache\": faster than that, its data in a cache)\n\n";

  std::vector<Result> results;
  std::map<std::string, double> ceiling;
  std::cerr << "measuring the ceilings...\n";
  for (const Case* c : ceilings) {
    results.push_back(measure(b, *c, o, budget_ms));
    const Result& r = results.back();
    if (r.error.empty()) ceiling[c->defines] = std::max(ceiling[c->defines], r.rate);
  }
  auto compare = [&](Result& r) {
    auto it = ceiling.find(r.c->ceiling());
    if (!r.error.empty() || it == ceiling.end() || it->second <= 0) return;
    r.ceiling = it->second;
    r.fraction = r.rate / r.ceiling;
  };
  print_header(std::cout);
  for (Result& r : results) {
    compare(r);
    print_row(std::cout, r);
  }
  std::cout << "\n";
  for (const Case* c : rest) {
    results.push_back(measure(b, *c, o, budget_ms));
    compare(results.back());
    print_row(std::cout, results.back());
  }
  std::cout << "\nceilings:";
  for (const auto& [name, rate] : ceiling)
    std::cout << "  " << name << " " << number(rate) << (name == "copy" ? " GB/s" : " TFLOP/s");
  std::cout << "\n";

  int failed = 0;
  for (const Result& r : results) failed += !r.error.empty() && r.error != "unsupported";
  if (csv.is_open()) {
    csv << kCsvHeader << "\n";
    for (const Result& r : results)
      if (r.error.empty()) csv << csv_row(info, backend, r);
    csv.close();
    if (!csv) throw std::runtime_error("cannot write " + o.csv);
  }
  if (failed) std::cout << failed << " case(s) failed\n";
  return failed ? 1 : 0;
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  Options o;
  std::string backend_arg;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error("missing value after " + a);
      return argv[++i];
    };
    if (a == "--backend") {
      backend_arg = value();
    } else if (a == "--op") {
      o.op_regex = value();
    } else if (a == "--dtype") {
      o.dtypes = cli::parse_dtype_list(value());
    } else if (a == "--csv") {
      o.csv = value();
    } else if (a == "--reps") {
      const std::string v = value();
      size_t used = 0;
      int n = 0;
      try {
        n = std::stoi(v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != v.size() || n < 1 || n > 100000)
        throw std::runtime_error("--reps takes a positive integer, got '" + v + "'");
      o.reps = n;
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--help" || a == "-h") {
      std::fputs(cli::command_usage("bench").c_str(), stdout);
      std::exit(0);
    } else {
      throw std::runtime_error("unknown option '" + a + "'");
    }
  }
  Device device = default_device();
  if (!backend_arg.empty() && !Device::parse(backend_arg, &device))
    throw std::runtime_error("unknown backend '" + backend_arg + "'");
  return run_bench(device, o);
}

}  // namespace wick::bench
