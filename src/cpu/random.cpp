// rand_uniform and rand_normal from the shared Philox generator (kernels/philox.h).
#include <mutex>

#include "core/dispatch.h"
#include "cpu/cpu_backend.h"
#include "cpu/parallel.h"
#include "kernels/philox.h"

namespace wick::cpu {

namespace {

template <bool kNormal>
StoragePtr generate(Backend& b, const Shape& shape, DType dtype, double p0, double p1, uint64_t seed, uint64_t stream) {
  const int64_t n = shape.numel();
  StoragePtr out = b.alloc(dtype, n);
  dispatch(dtype, [&]<typename T>() {
    if constexpr (kernels::is_float_v<T>) {
      using M = kernels::opmath_t<T>;
      constexpr int L = kernels::kPhiloxLanes<M>;
      T* o = out->as<T>();
      const int64_t blocks = (n + L - 1) / L;
      parallel_for(blocks, kParallelGrain / L, [&](int64_t begin, int64_t end) {
        for (int64_t blk = begin; blk < end; ++blk) {
          M v[L];
          kernels::PhiloxBlock bits = kernels::philox_block(seed, stream, static_cast<uint64_t>(blk));
          if constexpr (kNormal)
            kernels::philox_normal<M>(bits, M(p0), M(p1), v);
          else
            kernels::philox_uniform<M>(bits, M(p0), M(p1), v);
          for (int l = 0; l < L && blk * L + l < n; ++l) o[blk * L + l] = kernels::from_opmath<T>(v[l]);
        }
      });
    } else {
      throw_not_supported(b, kNormal ? OpCode::RandNormal : OpCode::RandUniform, dtype);
    }
  });
  return out;
}

}  // namespace

void CpuBackend::set_seed(uint64_t seed) { random_.reset(seed); }

StoragePtr CpuBackend::rand_uniform(const Shape& shape, DType dtype, double lo, double up) {
  const RandomStreams::Draw d = random_.next();
  return generate<false>(*this, shape, dtype, lo, up, d.seed, d.stream);
}

StoragePtr CpuBackend::rand_normal(const Shape& shape, DType dtype, double mean, double std) {
  const RandomStreams::Draw d = random_.next();
  return generate<true>(*this, shape, dtype, mean, std, d.seed, d.stream);
}

}  // namespace wick::cpu
