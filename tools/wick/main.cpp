// The `wick` command: info, parity (through the wick-parity program), bench, ops, tokenize, perplexity,
// generate, chat-template, bench-model, bench-serve, serve, launch, bench-dist.
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "args.h"
#include "backend/op.h"
#include "backend/registry.h"
#include "bench.h"
#include "bench_dist.h"
#include "bench_model.h"
#include "bench_serve.h"
#include "generate.h"
#include "launch.h"
#include "perplexity.h"
#include "serve.h"
#include "template.h"
#include "tokenize.h"
#include "wick/wick.h"

namespace {

using namespace wick;

int fail(const std::string& message) {
  std::cerr << "wick: " << message << "\n" << cli::kSeeHelp;
  return 2;
}

int cmd_info() {
  std::cout << "wick " << version() << "\n";
  std::cout << "revision " << bench::git_revision() << "\n";
  std::cout << "backends built in: cpu" << (backend_built(DeviceType::Cuda) ? ", cuda" : "")
            << (backend_built(DeviceType::Rocm) ? ", rocm" : "") << "\n";
  std::cout << "devices:\n";
  for (Device d : available_devices()) std::cout << "  " << describe_device(d) << "\n";
  for (DeviceType t : {DeviceType::Cuda, DeviceType::Rocm})
    if (backend_built(t) && device_count(t) == 0)
      std::cout << "  " << (t == DeviceType::Cuda ? "cuda" : "rocm") << ": built in, no device (" << no_device_reason(t) << ")\n";
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

// `wick parity ARGS`: runs the wick-parity program that the build puts next to this one (the
// harness and the reference backend are not part of the shipped `wick`); its output and exit
// status are parity's.
int cmd_parity(char** argv) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path harness = self.parent_path() / "wick-parity";
  if (ec || !std::filesystem::exists(harness))
    throw std::runtime_error("parity runs the wick-parity program, which is not next to this one (" +
                             (ec ? std::string("cannot read /proc/self/exe") : harness.string()) +
                             "); build it from the source tree (target wick_parity_cli)");
  argv[0] = const_cast<char*>(harness.c_str());
  ::execv(harness.c_str(), argv);
  throw std::runtime_error("cannot run " + harness.string() + ": " + std::strerror(errno));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return fail("no command");
  std::string cmd = argv[1];
  try {
    if (cmd == "info") return cmd_info();
    if (cmd == "ops") return cmd_ops();
    if (cmd == "parity") return cmd_parity(argv + 1);
    if (cmd == "bench") return bench::cmd_bench(argc - 2, argv + 2);
    if (cmd == "tokenize") return cli::cmd_tokenize(argc - 2, argv + 2);
    if (cmd == "perplexity") return cli::cmd_perplexity(argc - 2, argv + 2);
    if (cmd == "generate") return cli::cmd_generate(argc - 2, argv + 2);
    if (cmd == "bench-model") return cli::cmd_bench_model(argc - 2, argv + 2);
    if (cmd == "bench-serve") return cli::cmd_bench_serve(argc - 2, argv + 2);
    if (cmd == "serve") return cli::cmd_serve(argc - 2, argv + 2);
    if (cmd == "chat-template") return cli::cmd_chat_template(argc - 2, argv + 2);
    if (cmd == "launch") return cli::cmd_launch(argc - 2, argv + 2);
    if (cmd == "bench-dist") return cli::cmd_bench_dist(argc - 2, argv + 2);
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
      std::cout << cli::kUsage;
      return 0;
    }
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  return fail("unknown command '" + cmd + "'");
}
