// First GPU figures: device-event timings (median of repeated runs after a warm-up) of a copy,
// elementwise ops, a reduction, matmul and conv2d through wick, with GB/s or TFLOP/s. Prints one
// line per case: "name<TAB>ms<TAB>rate<TAB>unit", for bench/torch_ops.py to sit beside.
//   bench_gpu_ops [device index]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "backend/registry.h"
#include "gpu/gpu_backend.h"
#include "wick/wick.h"

namespace {

using namespace wick;

double median_ms(gpu::GpuBackend& b, int reps, const std::function<void()>& f) {
  f();
  b.synchronize();
  std::vector<double> t;
  gpu::Event start, stop;
  WICK_GPU_CHECK(gpu::event_create(&start));
  WICK_GPU_CHECK(gpu::event_create(&stop));
  for (int i = 0; i < reps; ++i) {
    WICK_GPU_CHECK(gpu::event_record(start, b.stream()));
    f();
    WICK_GPU_CHECK(gpu::event_record(stop, b.stream()));
    WICK_GPU_CHECK(gpu::event_synchronize(stop));
    float ms = 0;
    WICK_GPU_CHECK(gpu::event_elapsed_ms(&ms, start, stop));
    t.push_back(ms);
  }
  WICK_GPU_CHECK(gpu::event_destroy(start));
  WICK_GPU_CHECK(gpu::event_destroy(stop));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void report(const char* name, double ms, double amount, const char* unit) {
  std::printf("%s\t%.4f\t%.1f\t%s\n", name, ms, amount / (ms * 1e-3) * 1e-9 / (unit[0] == 'T' ? 1e3 : 1), unit);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const int index = argc > 1 ? std::atoi(argv[1]) : 0;
  const Device dev(gpu::kBuiltDeviceType, index);
  auto& b = static_cast<gpu::GpuBackend&>(backend_for(dev));
  std::printf("# %s\n", describe_device(dev).c_str());
  manual_seed(1, dev);
  const int64_t n = int64_t(256) << 20;  // 256M elements, 1 GiB of f32
  {
    Tensor x = Tensor::rand_uniform({n}, -1, 1, DType::F32, dev), y = Tensor::rand_uniform({n}, -1, 1, DType::F32, dev);
    StoragePtr dst = b.alloc(DType::F32, n);
    report("memcpy f32 256M (read+write)",
           median_ms(b, 20,
                     [&] { WICK_GPU_CHECK(gpu::copy_d2d_async(dst->data(), x.storage()->data(), n * 4, b.stream())); }),
           2.0 * n * 4, "GB/s");
    report("copy f32 256M (read+write)", median_ms(b, 20, [&] { x.copy(); }), 2.0 * n * 4, "GB/s");
    report("add f32 256M", median_ms(b, 20, [&] { x + y; }), 3.0 * n * 4, "GB/s");
    report("cast f32->bf16 256M", median_ms(b, 20, [&] { x.to_dtype(DType::BF16); }), n * 6.0, "GB/s");
    Tensor m = x.reshape({8192, -1}).narrow(1, 0, 16384);
    Tensor mc = m.contiguous();
    report("sum f32 8192x16384 over last dim", median_ms(b, 20, [&] { mc.sum(1); }), 8192.0 * 16384 * 4, "GB/s");
    report("sum f32 8192x16384 over dim 0", median_ms(b, 20, [&] { mc.sum(0); }), 8192.0 * 16384 * 4, "GB/s");
    report("argmax f32 8192x16384 over last dim", median_ms(b, 20, [&] { mc.argmax(1); }), 8192.0 * 16384 * 4, "GB/s");
    report("transpose f32 8192x16384 to contiguous", median_ms(b, 20, [&] { mc.t().contiguous(); }),
           2.0 * 8192 * 16384 * 4, "GB/s");
  }
  b.empty_cache();
  {
    const int64_t s = 8192;
    for (DType dt : {DType::BF16, DType::F16, DType::F32}) {
      Tensor a = Tensor::rand_normal({s, s}, 0, 1, dt, dev), c = Tensor::rand_normal({s, s}, 0, 1, dt, dev);
      char name[64];
      std::snprintf(name, sizeof name, "matmul %s 8192^3", std::string(dtype_name(dt)).c_str());
      report(name, median_ms(b, 10, [&] { a.matmul(c); }), 2.0 * s * s * s, "TFLOP/s");
    }
    set_allow_tf32(true);
    Tensor a = Tensor::rand_normal({s, s}, 0, 1, DType::F32, dev),
           c = Tensor::rand_normal({s, s}, 0, 1, DType::F32, dev);
    report("matmul f32 (tf32) 8192^3", median_ms(b, 10, [&] { a.matmul(c); }), 2.0 * s * s * s, "TFLOP/s");
    set_allow_tf32(false);
    Tensor q = Tensor::rand_normal({64, 2048, 128}, 0, 1, DType::BF16, dev);
    Tensor k = Tensor::rand_normal({64, 128, 2048}, 0, 1, DType::BF16, dev);
    report("matmul bf16 64x(2048x128 . 128x2048)", median_ms(b, 10, [&] { q.matmul(k); }), 2.0 * 64 * 2048 * 2048 * 128,
           "TFLOP/s");
  }
  b.empty_cache();
  {
    const double flops = 2.0 * 64 * 256 * 56 * 56 * 256 * 9;
    for (DType dt : {DType::BF16, DType::F32}) {
      Tensor x = Tensor::rand_normal({64, 256, 56, 56}, 0, 1, dt, dev),
             w = Tensor::rand_normal({256, 256, 3, 3}, 0, 1, dt, dev);
      char name[64];
      std::snprintf(name, sizeof name, "conv2d %s 64x256x56x56 3x3", std::string(dtype_name(dt)).c_str());
      report(name, median_ms(b, 10, [&] { x.conv2d(w, {.padding = 1}); }), flops, "TFLOP/s");
      if (dt == DType::F32) {
        set_allow_tf32(true);
        report("conv2d f32 (tf32) 64x256x56x56 3x3", median_ms(b, 10, [&] { x.conv2d(w, {.padding = 1}); }), flops,
               "TFLOP/s");
        set_allow_tf32(false);
      }
      b.set_option("conv", "gemm");
      std::snprintf(name, sizeof name, "conv2d %s 64x256x56x56 3x3 (own gemm)", std::string(dtype_name(dt)).c_str());
      report(name, median_ms(b, 5, [&] { x.conv2d(w, {.padding = 1}); }), flops, "TFLOP/s");
      b.set_option("conv", "library");
    }
  }
  b.empty_cache();
  {
    // Pooling, 2x2 windows every 2: bytes are the input read once and the output written once.
    const double bytes_per = 64.0 * 256 * 56 * 56 * (1 + 0.25);
    for (DType dt : {DType::F32, DType::BF16}) {
      Tensor x = Tensor::rand_normal({64, 256, 56, 56}, 0, 1, dt, dev);
      const std::string t(dtype_name(dt));
      report(("max_pool2d " + t + " 64x256x56x56 2x2/2").c_str(), median_ms(b, 20, [&] { x.max_pool2d({2, 2}); }),
             bytes_per * dtype_size(dt), "GB/s");
      report(("avg_pool2d " + t + " 64x256x56x56 2x2/2").c_str(), median_ms(b, 20, [&] { x.avg_pool2d({2, 2}); }),
             bytes_per * dtype_size(dt), "GB/s");
    }
  }
}
