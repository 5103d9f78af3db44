// rand_uniform and rand_normal: one thread per Philox block (kernels/philox.h), so every element
// is the CPU's number for the same seed and call.
#include "core/dispatch.h"
#include "gpu/gpu_backend.h"
#include "kernels/philox.h"

namespace wick::gpu {

namespace {

template <bool kNormal, typename T>
__global__ __launch_bounds__(kBlock) void random_kernel(T* out, int64_t n, uint64_t seed, uint64_t stream,
                                                        kernels::opmath_t<T> p0, kernels::opmath_t<T> p1) {
  using M = kernels::opmath_t<T>;
  constexpr int L = kernels::kPhiloxLanes<M>;
  const int64_t blocks = (n + L - 1) / L;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks; b += step) {
    M v[L];
    const kernels::PhiloxBlock bits = kernels::philox_block(seed, stream, static_cast<uint64_t>(b));
    if constexpr (kNormal)
      kernels::philox_normal<M>(bits, p0, p1, v);
    else
      kernels::philox_uniform<M>(bits, p0, p1, v);
#pragma unroll
    for (int l = 0; l < L; ++l)
      if (b * L + l < n) out[b * L + l] = kernels::from_opmath<T>(v[l]);
  }
}

template <bool kNormal>
StoragePtr generate(GpuBackend& b, const Shape& shape, DType dtype, double p0, double p1) {
  b.activate();
  const int64_t n = shape.numel();
  StoragePtr out = b.alloc(dtype, n);
  const RandomStreams::Draw d = b.next_random_stream();
  if (n == 0) return out;
  dispatch(dtype, [&]<typename T>() {
    if constexpr (kernels::is_float_v<T>) {
      using M = kernels::opmath_t<T>;
      random_kernel<kNormal, T>
          <<<grid_for((n + 1) / 2), kBlock, 0, b.stream()>>>(out->as<T>(), n, d.seed, d.stream, M(p0), M(p1));
      WICK_GPU_CHECK_LAUNCH();
    } else {
      throw_not_supported(b, kNormal ? OpCode::RandNormal : OpCode::RandUniform, dtype);
    }
  });
  return out;
}

}  // namespace

StoragePtr GpuBackend::rand_uniform(const Shape& shape, DType dtype, double lo, double up) {
  return generate<false>(*this, shape, dtype, lo, up);
}

StoragePtr GpuBackend::rand_normal(const Shape& shape, DType dtype, double mean, double std) {
  return generate<true>(*this, shape, dtype, mean, std);
}

}  // namespace wick::gpu
