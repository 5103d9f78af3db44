// CPU matmul and conv2d throughput through wick, next to OpenBLAS called directly on the same
// product, so the overhead of wick's layer shows; then the block formats' products of a model's own
// (arranged) weights, as a prompt of 64 and of 512 tokens meets them on Llama 3.2 1B's shapes.
// Median of several runs after a warm-up.
//   bench_cpu_products [reps]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "wick/wick.h"

namespace {

double median_seconds(int reps, const std::function<void()>& f) {
  f();  // warm-up
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto start = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void report(const char* name, double flops, double wick_s, double blas_s) {
  std::printf("%-40s wick %8.1f GFLOP/s   OpenBLAS alone %8.1f GFLOP/s   ratio %.3f\n", name, flops / wick_s * 1e-9,
              flops / blas_s * 1e-9, blas_s / wick_s);
}

void matmul(int64_t n, int reps) {
  using namespace wick;
  Tensor a = Tensor::rand_normal({n, n}), b = Tensor::rand_normal({n, n});
  std::vector<float> c(static_cast<size_t>(n * n));
  std::vector<float> va = a.to_vector<float>(), vb = b.to_vector<float>();
  double w = median_seconds(reps, [&] { a.matmul(b); });
  double o = median_seconds(reps, [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(n), static_cast<int>(n),
                static_cast<int>(n), 1.f, va.data(), static_cast<int>(n), vb.data(), static_cast<int>(n), 0.f, c.data(),
                static_cast<int>(n));
  });
  char name[64];
  std::snprintf(name, sizeof name, "matmul f32 %lldx%lldx%lld", static_cast<long long>(n), static_cast<long long>(n),
                static_cast<long long>(n));
  report(name, 2.0 * n * n * n, w, o);
}

// conv2d N=8, 64 -> 64 channels, 56x56, 3x3, padding 1: against OpenBLAS running the same
// products (one 64 x 3136 x 576 GEMM per image) on ready im2col buffers.
void conv(int reps) {
  using namespace wick;
  const int64_t n = 8, c = 64, hw = 56, k = 3;
  Tensor x = Tensor::rand_normal({n, c, hw, hw}), w = Tensor::rand_normal({c, c, k, k});
  const int64_t m = c, cols = hw * hw, kdim = c * k * k;
  std::vector<float> col(static_cast<size_t>(kdim * cols), 1.f), wv = w.to_vector<float>(),
                                                                 out(static_cast<size_t>(m * cols));
  double ws = median_seconds(reps, [&] { x.conv2d(w, {.padding = 1}); });
  double os = median_seconds(reps, [&] {
    for (int64_t i = 0; i < n; ++i)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(cols),
                  static_cast<int>(kdim), 1.f, wv.data(), static_cast<int>(kdim), col.data(), static_cast<int>(cols),
                  0.f, out.data(), static_cast<int>(cols));
  });
  report("conv2d f32 8x64x56x56, 64x64x3x3, pad 1", 2.0 * n * m * cols * kdim, ws, os);
}

// qmatmul of m rows of x (f32) by a random weight of each block format, arranged as a model holds it
// (QTensor::arrange: the CPU's kernels for runs of rows), on the q/o, gate/up and down shapes of
// Llama 3.2 1B.
void quantized(int64_t m, int reps) {
  using namespace wick;
  using quant::QType;
  struct Shape {
    int64_t rows, cols;
  };
  for (QType q : {QType::Q4_0, QType::Q8_0, QType::Q4_K, QType::Q6_K}) {
    for (Shape s : {Shape{2048, 2048}, Shape{8192, 2048}, Shape{2048, 8192}}) {
      const quant::QTensor w = quant::quantize(Tensor::rand_normal({s.rows, s.cols}), q).arrange();
      const Tensor x = Tensor::rand_normal({m, s.cols});
      const double t = median_seconds(reps, [&] { quant::qmatmul(x, w); });
      std::printf("qmatmul %-5s %lld rows of x @ %lldx%lld%s  %9.2f ms  %7.1f GFLOP/s\n",
                  std::string(quant::qtype_name(q)).c_str(), static_cast<long long>(m), static_cast<long long>(s.rows),
                  static_cast<long long>(s.cols), w.arranged() ? " arranged" : " plain   ", t * 1e3,
                  2.0 * m * s.rows * s.cols / t * 1e-9);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  std::printf("%s\n", wick::describe_device(wick::Device::cpu()).c_str());
  matmul(1024, reps);
  matmul(4096, std::max(1, reps / 2));
  conv(reps);
  for (int64_t m : {64, 512}) quantized(m, reps);
}
