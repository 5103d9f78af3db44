// Times the GPU backend's attention kernel, called as the front end calls it, on the shapes that
// bench/attention_torch.py gives PyTorch's scaled_dot_product_attention: prefill (TFLOP/s) and
// decoding against a KV cache (GB/s over the bytes of k and v, and the fraction of the device's
// copy bandwidth, measured here too). Halves run through each path of the "attention" option:
// "library" (cuDNN where it serves, else wick's kernels) and "own" (wick's kernels). Device
// events; each figure is the median over batches of back-to-back calls; decoding rotates among
// enough KV sets to keep them out of L2.
//
//   bench_attention_gpu [--quick] [--only TEXT]   (--only: the rows whose first five columns,
//                                                  single-spaced, contain TEXT)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/nn_kernels.h"
#include "backend/registry.h"
#include "core/checks.h"
#include "gpu/gpu_api.h"
#include "wick/wick.h"

namespace {

using namespace wick;

struct BenchCase {
  DType dtype;
  int64_t b, h, h_kv, t_q, t_kv, d;
  bool causal;
};

// Median of `batches` timings of `per_batch` back-to-back calls of f(i), in ms per call.
template <typename F>
double time_ms(Backend& backend, int batches, int per_batch, const F& f) {
  for (int i = 0; i < std::max(3, per_batch); ++i) f(i);  // warm-up
  backend.synchronize();
  std::unique_ptr<Timer> timer = backend.make_timer();
  std::vector<double> ms;
  int call = 0;
  for (int i = 0; i < batches; ++i) {
    timer->start();
    for (int j = 0; j < per_batch; ++j) f(call++);
    timer->stop();
    ms.push_back(timer->elapsed_ms() / per_batch);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

double copy_gbps(Backend& backend, Device dev, bool quick) {
  const int64_t n = quick ? (int64_t(1) << 24) : (int64_t(1) << 28);  // f32: 64 MiB or 1 GiB
  const Tensor x = Tensor::rand_uniform({n}, 0, 1, DType::F32, dev);
  const double ms = time_ms(backend, 10, 5, [&](int) { (void)x.copy(); });
  return 2.0 * static_cast<double>(n) * 4 / (ms * 1e-3) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr, "usage: bench_attention_gpu [--quick] [--only TEXT]\n");
      return 2;
    }
  }
  Device dev = Device::cpu();
  for (const Device& d : available_devices())
    if (d.type() != DeviceType::Cpu) dev = d;
  if (dev.type() == DeviceType::Cpu) {
    std::printf("no GPU\n");
    return 0;
  }
  Backend& backend = backend_for(dev);
  std::printf("device: %s\n", gpu::gpu_describe(dev.index()).c_str());
  const double copy = copy_gbps(backend, dev, quick);
  std::printf("copy f32: %.0f GB/s (read + write)\n", copy);

  const int64_t t = quick ? 512 : 4096;
  std::vector<BenchCase> cases = {
      {DType::BF16, 4, 32, 32, t, t, 128, true},        {DType::BF16, 4, 32, 32, t, t, 128, false},
      {DType::F16, 4, 32, 32, t, t, 128, true},         {DType::BF16, 4, 32, 32, t, t, 64, true},
      {DType::BF16, 4, 32, 32, t, t, 256, true},        {DType::BF16, 4, 32, 8, t, t, 128, true},
      {DType::F32, 1, 32, 32, t / 2, t / 2, 128, true},
  };
  for (int64_t b : {1, 16})
    for (int64_t t_kv : {4096, 32768}) cases.push_back({DType::BF16, b, 32, 8, 1, quick ? t_kv / 8 : t_kv, 128, true});
  cases.push_back({DType::F16, 16, 32, 8, 1, quick ? 4096 : 32768, 128, true});
  cases.push_back({DType::F32, 16, 32, 8, 1, quick ? 1024 : 8192, 128, true});

  std::printf("%-6s %-8s %-26s %-7s %-8s %10s %10s %10s\n", "dtype", "kind", "shape", "mask", "path", "ms", "TFLOP/s",
              "GB/s");
  for (const BenchCase& c : cases)
    for (const char* path : {"library", "own"}) {
      if (c.dtype == DType::F32 && std::strcmp(path, "own") == 0) continue;  // one path for f32
      const bool decode = c.t_q == 1;
      char shape[64];
      std::snprintf(shape, sizeof shape, "b%lld h%lld/%lld t%lld/%lld d%lld", static_cast<long long>(c.b),
                    static_cast<long long>(c.h), static_cast<long long>(c.h_kv), static_cast<long long>(c.t_q),
                    static_cast<long long>(c.t_kv), static_cast<long long>(c.d));
      const std::string label = std::string(dtype_name(c.dtype)) + " " + (decode ? "decode" : "prefill") + " " +
                                shape + " " + (c.causal ? "causal" : "none") + " " + path;
      if (label.find(only) == std::string::npos) continue;
      backend.set_option("attention", path);
      const double kv_bytes = 2.0 * c.b * c.h_kv * c.t_kv * c.d * dtype_size(c.dtype);
      // Enough KV sets that a round over them is four times the L2 (decoding only).
      const int sets = decode ? static_cast<int>(std::clamp(200e6 / kv_bytes, 1.0, 16.0)) : 1;
      const Tensor q = Tensor::rand_uniform({c.b, c.h, c.t_q, c.d}, -1, 1, c.dtype, dev);
      std::vector<Tensor> ks, vs;
      for (int s = 0; s < sets; ++s) {
        ks.push_back(Tensor::rand_uniform({c.b, c.h_kv, c.t_kv, c.d}, -1, 1, c.dtype, dev));
        vs.push_back(Tensor::rand_uniform({c.b, c.h_kv, c.t_kv, c.d}, -1, 1, c.dtype, dev));
      }
      const NnKernels* nn = backend.nn();
      const AttentionArgs args{1.0 / std::sqrt(static_cast<double>(c.d)), c.causal, 0};
      const View vq = ops::view_of(q);
      const double ms = time_ms(backend, decode ? 20 : 5, decode ? 50 : 3, [&](int i) {
        const Tensor& k = ks[static_cast<size_t>(i % sets)];
        const Tensor& v = vs[static_cast<size_t>(i % sets)];
        (void)nn->attention(vq, ops::view_of(k), ops::view_of(v), nullptr, args);
      });
      const double flops = 4.0 * c.b * c.h * c.t_q * c.t_kv * c.d * (c.causal && !decode ? 0.5 : 1.0);
      std::printf("%-6s %-8s %-26s %-7s %-8s %10.4f %10.1f %10.0f", std::string(dtype_name(c.dtype)).c_str(),
                  decode ? "decode" : "prefill", shape, c.causal ? "causal" : "none", path, ms,
                  flops / (ms * 1e-3) / 1e12, kv_bytes / (ms * 1e-3) / 1e9);
      if (decode) std::printf("   %.2f of copy", kv_bytes / (ms * 1e-3) / 1e9 / copy);
      std::printf("\n");
    }
  backend.set_option("attention", "library");
  return 0;
}
