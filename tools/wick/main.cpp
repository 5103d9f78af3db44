// The `wick` command: info, parity, bench, ops.
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "backend/op.h"
#include "backend/registry.h"
#include "bench.h"
#include "parity/harness.h"
#include "reference/reference.h"
#include "wick/wick.h"

namespace {

using namespace wick;

const char* kUsage = R"(usage: wick <command> [options]

commands:
  info                    version, backends built in, devices found
  parity [options]        run every op x dtype x layout case on a backend and compare with the
                          reference; exits 1 on any failure
      --backend B         cpu, cuda, rocm or all (default: all backends present)
      --op REGEX          only ops whose name matches (e.g. 'unary\.' or '^cast$')
      --dtype LIST        only these dtypes, comma separated (e.g. f32,bf16)
      --seed N            input seed (printed by every run)
      --case NAME         only the case of this name (as printed for a failure)
      --json FILE         write one record per case
  bench [options]         time ops at benchmark sizes (inputs larger than a GPU's L2 cache), after
                          measuring the device's ceilings: a large copy and a GEMM per float dtype;
                          prints median, min and max ms, GB/s or TFLOP/s and the fraction of the
                          ceiling (copy bandwidth, or the GEMM peak of the dtype) per case
      --backend B         cpu, cuda or rocm (default: the first GPU, else cpu)
      --op REGEX          only ops whose name matches, as for parity (e.g. '^binary\.add$')
      --dtype LIST        only these dtypes, comma separated
      --reps N            timed runs per case (default 20; fewer for slow cases, at least 3)
      --csv FILE          write one row per case: device, driver, revision, op, dtype, shape,
                          layout, times, bytes, flops, rate, ceiling and fraction
      --quick             tiny sizes (for tests)
  ops                     the table of ops and the dtypes each is defined for (markdown), then
                          which backends here have fused kernels for the nn ops
)";

int fail(const std::string& message) {
  std::cerr << "wick: " << message << "\n" << kUsage;
  return 2;
}

int cmd_info() {
  std::cout << "wick " << version() << "\n";
  std::cout << "revision " << bench::git_revision() << "\n";
  std::cout << "backends built in: cpu" << (backend_built(DeviceType::Cuda) ? ", cuda" : "")
            << (backend_built(DeviceType::Rocm) ? ", rocm" : "") << "\n";
  std::cout << "devices:\n";
  for (Device d : available_devices()) std::cout << "  " << describe_device(d) << "\n";
  return 0;
}

int cmd_ops() {
  std::cout << support_table_markdown();
  // Which backends here run the nn ops through fused kernels (the others compose them).
  std::vector<Device> devices;
  for (Device d : available_devices())
    if (d.is_cpu() || d.index() == 0) devices.push_back(d);
  std::cout << "\nFused kernels of the nn ops (dtypes; elsewhere the ops are composed):\n\n| op |";
  for (Device d : devices) std::cout << " " << d << " |";
  std::cout << "\n|---|";
  for (size_t i = 0; i < devices.size(); ++i) std::cout << "---|";
  std::cout << "\n";
  for (const OpKey& op : OpKey::all()) {
    if (op.code != OpCode::Nn) continue;
    std::cout << "| " << op.name() << " |";
    for (Device d : devices) {
      const Backend& b = backend_for(d, "ops");
      std::string list;
      for (DType dt : kAllDTypes)
        if (b.supports(op, {&dt, 1})) {
          if (!list.empty()) list += ' ';
          list += dtype_name(dt);
        }
      std::cout << " " << list << " |";
    }
    std::cout << "\n";
  }
  return 0;
}

uint64_t parse_seed(const std::string& text) {
  uint64_t seed = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seed);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    throw std::runtime_error("--seed takes an unsigned 64-bit integer, got '" + text + "'");
  return seed;
}

int cmd_parity(int argc, char** argv) {
  parity::Options options;
  std::string backend_arg = "all", json;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error("missing value after " + a);
      return argv[++i];
    };
    if (a == "--backend")
      backend_arg = value();
    else if (a == "--op")
      options.op_regex = value();
    else if (a == "--seed")
      options.seed = parse_seed(value());
    else if (a == "--case")
      options.case_name = value();
    else if (a == "--json")
      json = value();
    else if (a == "--dtype")
      options.dtypes = bench::parse_dtype_list(value());
    else
      throw std::runtime_error("unknown option '" + a + "'");
  }
  std::vector<Device> devices;
  if (backend_arg == "all") {
    for (Device d : available_devices())
      if (d.is_cpu() || d.index() == 0) devices.push_back(d);
  } else {
    Device d;
    if (!Device::parse(backend_arg, &d)) throw std::runtime_error("unknown backend '" + backend_arg + "'");
    devices.push_back(d);
  }
  const std::vector<parity::Case> cases = parity::all_cases();
  std::vector<parity::Record> records;
  for (Device d : devices) {
    Backend& b = backend_for(d, "parity");
    parity::run_cases(b, reference::reference_backend(), cases, options, records);
  }
  parity::print_report(records, std::cout, options.seed);
  if (!json.empty()) {
    std::ofstream f(json);
    f << parity::to_json(records);
    if (!f) throw std::runtime_error("cannot write " + json);
  }
  for (const parity::Record& r : records)
    if (r.status == parity::Status::Fail) return 1;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return fail("no command");
  std::string cmd = argv[1];
  try {
    if (cmd == "info") return cmd_info();
    if (cmd == "ops") return cmd_ops();
    if (cmd == "parity") return cmd_parity(argc - 2, argv + 2);
    if (cmd == "bench") return bench::cmd_bench(argc - 2, argv + 2);
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
      std::cout << kUsage;
      return 0;
    }
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  return fail("unknown command '" + cmd + "'");
}
