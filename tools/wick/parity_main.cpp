// The `wick-parity` program: the parity harness (tests/parity) against the reference backend
// (src/reference), which the `wick` program runs for `wick parity`. A program of its own, so that
// the shipped `wick` holds no reference backend.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include "args.h"
#include "backend/registry.h"
#include "parity/harness.h"
#include "reference/reference.h"
#include "wick/wick.h"

namespace {

using namespace wick;

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
      options.seed = cli::parse_seed(value());
    else if (a == "--case")
      options.case_name = value();
    else if (a == "--json")
      json = value();
    else if (a == "--help" || a == "-h") {
      std::fputs(cli::command_usage("parity").c_str(), stdout);
      return 0;
    } else if (a == "--dtype")
      options.dtypes = cli::parse_dtype_list(value());
    else if (a == "--help" || a == "-h") {
      std::fputs(cli::command_usage("parity").c_str(), stdout);
      return 0;
    } else
      throw std::runtime_error("unknown option '" + a + "'");
  }
  if (!options.op_regex.empty()) {
    try {
      std::regex check(options.op_regex);
    } catch (const std::regex_error&) {
      throw std::runtime_error("--op: bad regular expression '" + options.op_regex + "'");
    }
  }
  std::vector<Device> devices;
  if (backend_arg == "all") {
    for (Device d : available_devices())
      if (d.is_cpu() || d.index() == 0) devices.push_back(d);
    // A GPU backend built in without a device: say so, rather than run on the CPU alone unannounced.
    for (DeviceType t : {DeviceType::Cuda, DeviceType::Rocm})
      if (backend_built(t) && device_count(t) == 0)
        std::cerr << "parity: " << (t == DeviceType::Cuda ? "cuda" : "rocm") << " is built in but has no device ("
                  << no_device_reason(t) << "); the CPU only\n";
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
  if (records.empty())
    throw std::runtime_error("no case matches --op, --dtype and --case (wick ops lists the ops; a failure prints its case's name)");
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

// wick-parity [options]: the options of `wick parity` (see `wick help`).
int main(int argc, char** argv) {
  try {
    return cmd_parity(argc - 1, argv + 1);
  } catch (const std::exception& e) {
    std::cerr << "wick: " << e.what() << "\n" << cli::kSeeHelp;
    return 2;
  }
}
