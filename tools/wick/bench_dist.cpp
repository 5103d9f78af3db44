// `wick bench-dist`: all_reduce (sum) over the ranks of one process, one device each, at sizes
// from 8 bytes to --max bytes (every power of two from 1 MiB), as nccl-tests' all_reduce_perf reports it: the time per call, the
// algorithm bandwidth (bytes / time) and the bus bandwidth (algbw x 2(n-1)/n, what each link
// carries in a ring), next to which bench/dist_torch.py prints torch.distributed's.
#include <algorithm>
#include <chrono>
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

int cmd_bench_dist(int argc, char** argv) {
  std::vector<Device> devices;
  DType dtype = DType::BF16;
  int64_t max_bytes = int64_t{1} << 30, iters = 20;
  bool in_place = false;
  std::string csv;
  for (Options o("bench-dist", argc, argv); o.next();) {
    if (o.is("--devices"))
      devices = o.device_list_value();
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
  if (devices.empty()) throw std::runtime_error("bench-dist: --devices D,D,... is needed");
  if (max_bytes < 8 || iters < 1) throw std::runtime_error("bench-dist: --max (at least 8) and --iters must be positive");
  const std::vector<dist::Communicator> comms = dist::Communicator::local(devices);
  const auto n = static_cast<int>(devices.size());
  const auto es = static_cast<int64_t>(dtype_size(dtype));
  std::vector<int64_t> sizes;
  // 8 B to 256 KiB by factors of 8 (latency), then every power of two from 1 MiB (bandwidth).
  for (int64_t b = 8; b <= max_bytes; b *= (b < (int64_t{1} << 18) ? 8 : b < (int64_t{1} << 20) ? 4 : 2)) sizes.push_back(b);

  std::string where = devices[0].to_string();
  for (size_t i = 1; i < devices.size(); ++i) where.append("+").append(devices[i].to_string());
  std::printf("all_reduce%s sum of %s over %d ranks (%s), %lld calls per size\n", in_place ? " in place" : "",
              std::string(dtype_name(dtype)).c_str(), n, where.c_str(), static_cast<long long>(iters));
  std::printf("%14s %12s %12s %12s\n", "bytes", "time us", "algbw GB/s", "busbw GB/s");
  std::ofstream out;
  if (!csv.empty()) {
    out.open(csv, std::ios::app);
    if (!out) throw std::runtime_error("bench-dist: cannot write " + csv);
  }
  for (const int64_t bytes : sizes) {
    const int64_t count = std::max<int64_t>(bytes / es, 1);
    std::vector<double> seconds(static_cast<size_t>(n));
    dist::on_threads(n, [&](int r) {
      const dist::Communicator& c = comms[static_cast<size_t>(r)];
      Tensor x = Tensor::ones({count}, dtype, c.device());
      auto once = [&] {
        if (in_place)
          c.all_reduce_(x);
        else
          (void)c.all_reduce(x);
      };
      for (int w = 0; w < 3; ++w) once();  // warm-up: NCCL sets up its channels
      c.synchronize();
      const auto start = std::chrono::steady_clock::now();
      for (int64_t i = 0; i < iters; ++i) once();
      c.synchronize();
      seconds[static_cast<size_t>(r)] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    });
    const double t = *std::max_element(seconds.begin(), seconds.end()) / static_cast<double>(iters);
    const double alg = static_cast<double>(count * es) / t / 1e9, bus = alg * 2.0 * (n - 1) / n;
    std::printf("%14lld %12.2f %12.2f %12.2f\n", static_cast<long long>(count * es), t * 1e6, alg, bus);
    if (out) out << where << "," << dtype_name(dtype) << "," << count * es << "," << t * 1e6 << "," << alg << "," << bus << "\n";
  }
  return 0;
}

}  // namespace wick::cli
