// `wick bench-dist`: all_reduce (sum) over the ranks of one process, one device each, or over the
// processes of `wick launch` (--launched, one GPU each, as torchrun runs torch), at sizes from 8
// bytes to --max bytes (every power of two from 1 MiB), as nccl-tests' all_reduce_perf reports it:
// the time per call, the algorithm bandwidth (bytes / time) and the bus bandwidth (algbw x
// 2(n-1)/n, what each link carries in a ring), next to which bench/dist_torch.py prints
// torch.distributed's.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "args.h"
#include "bench_dist.h"
#include "wick/dist.h"
#include "wick/ops.h"

namespace wick::cli {

namespace {

// The sizes timed: 8 B to 256 KiB by factors of 8 (latency), then every power of two from 1 MiB
// (bandwidth), up to max_bytes.
std::vector<int64_t> sizes_up_to(int64_t max_bytes) {
  std::vector<int64_t> sizes;
  for (int64_t b = 8; b <= max_bytes; b *= (b < (int64_t{1} << 18) ? 8 : b < (int64_t{1} << 20) ? 4 : 2)) sizes.push_back(b);
  return sizes;
}

// One rank's seconds per call at `count` elements: a warm-up (NCCL sets up its channels), a
// barrier (a one-element all_reduce and a wait, as torch's script has before it starts its clock),
// then `iters` calls and a wait, timed on the host.
double time_rank(const dist::Communicator& c, int64_t count, DType dtype, int64_t iters, bool in_place) {
  Tensor x = Tensor::ones({count}, dtype, c.device());
  auto once = [&] {
    if (in_place)
      c.all_reduce_(x);
    else
      (void)c.all_reduce(x);
  };
  for (int w = 0; w < 3; ++w) once();
  Tensor token = Tensor::ones({1}, DType::F32, c.device());
  c.all_reduce_(token);
  c.synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iters; ++i) once();
  c.synchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / static_cast<double>(iters);
}

}  // namespace

int cmd_bench_dist(int argc, char** argv) {
  std::vector<Device> devices;
  DType dtype = DType::BF16;
  int64_t max_bytes = int64_t{1} << 30, iters = 20;
  bool in_place = false, launched = false;
  std::string csv;
  for (Options o("bench-dist", argc, argv); o.next();) {
    if (o.is("--devices"))
      devices = o.device_list_value();
    else if (o.is("--launched"))
      launched = true;
    else if (o.is("--dtype"))
      dtype = o.dtype_value();
    else if (o.is("--max"))
      max_bytes = o.int_value();
    else if (o.is("--iters"))
      iters = o.int_value();
    else if (o.is("--csv"))
      csv = o.value();
    else if (o.is("--in-place"))
      in_place = true;
    else
      o.unknown();
  }
  if (devices.empty() == !launched)
    throw std::runtime_error("bench-dist: either --devices D,D,... (ranks of this process) or --launched (under wick launch)");
  if (max_bytes < 8 || iters < 1) throw std::runtime_error("bench-dist: --max (at least 8) and --iters must be positive");

  // The ranks: those of this process on --devices (a thread each), or this process's one rank of
  // `wick launch`, on the GPU of its local rank (cuda:WICK_LOCAL_RANK; the CPU where no GPU is).
  std::vector<dist::Communicator> comms;
  std::string where;
  if (launched) {
    const char* local = std::getenv("WICK_LOCAL_RANK");
    if (!local) throw std::runtime_error("bench-dist: --launched needs WICK_LOCAL_RANK (run it under `wick launch`)");
    Device device = Device::cpu();
    bool gpus = false;
    for (const Device d : available_devices()) {
      gpus = gpus || d.is_gpu();
      if (d.is_gpu() && std::to_string(d.index()) == local) device = d;
    }
    if (gpus && device.is_cpu()) throw std::runtime_error(std::string("bench-dist: no GPU ") + local + " (WICK_LOCAL_RANK) here");
    comms.push_back(dist::Communicator::from_env(device));
    where = std::to_string(comms[0].size()) + " processes";
  } else {
    comms = dist::Communicator::local(devices);
    where = devices[0].to_string();
    for (size_t i = 1; i < devices.size(); ++i) where.append("+").append(devices[i].to_string());
  }
  const int n = comms[0].size();
  const bool prints = comms[0].rank() == 0;
  const auto es = static_cast<int64_t>(dtype_size(dtype));

  if (prints) {
    std::printf("all_reduce%s sum of %s over %d ranks (%s), %lld calls per size\n", in_place ? " in place" : "",
                std::string(dtype_name(dtype)).c_str(), n, where.c_str(), static_cast<long long>(iters));
    std::printf("through %s\n", dist::transport(comms[0].device()).c_str());
    std::printf("%14s %12s %12s %12s\n", "bytes", "time us", "algbw GB/s", "busbw GB/s");
  }
  std::ofstream out;
  if (prints && !csv.empty()) {
    out.open(csv, std::ios::app);
    if (!out) throw std::runtime_error("bench-dist: cannot write " + csv);
  }
  for (const int64_t bytes : sizes_up_to(max_bytes)) {
    const int64_t count = std::max<int64_t>(bytes / es, 1);
    // The slowest rank's time: every rank's, gathered by a max all_reduce when each is a process.
    double t = 0;
    if (launched) {
      Tensor mine = Tensor::full({1}, time_rank(comms[0], count, dtype, iters, in_place), DType::F64, comms[0].device());
      comms[0].all_reduce_(mine, dist::ReduceOp::Max);
      t = mine.to_device(Device::cpu()).item<double>();
    } else {
      std::vector<double> seconds(comms.size());
      dist::on_threads(n, [&](int r) {
        seconds[static_cast<size_t>(r)] = time_rank(comms[static_cast<size_t>(r)], count, dtype, iters, in_place);
      });
      t = *std::max_element(seconds.begin(), seconds.end());
    }
    if (!prints) continue;
    const double alg = static_cast<double>(count * es) / t / 1e9, bus = alg * 2.0 * (n - 1) / n;
    std::printf("%14lld %12.2f %12.2f %12.2f\n", static_cast<long long>(count * es), t * 1e6, alg, bus);
    if (out) out << where << "," << dtype_name(dtype) << "," << count * es << "," << t * 1e6 << "," << alg << "," << bus << "\n";
  }
  return 0;
}

}  // namespace wick::cli
