// The CPU backend: OpenMP-parallel loops over host memory, the functors of src/kernels.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "backend/backend.h"
#include "cpu/block_cache.h"
#include "cpu/nn/nn_kernels.h"

namespace wick::cpu {

class CpuBackend final : public Backend {
 public:
  static constexpr uint64_t kDefaultSeed = 0x5eed5eed5eed5eedull;

  std::string name() const override { return "cpu"; }
  Device device() const override { return Device::cpu(); }
  bool supports(OpKey op, std::span<const DType> dtypes) const override;

  StoragePtr alloc(size_t nbytes) override;
  using Backend::alloc;
  StoragePtr from_host(const void* src, size_t nbytes) override;
  void to_host(const Storage& src, size_t byte_offset, size_t nbytes, void* dst) override;
  void synchronize() override {}
  void release(void* data, size_t nbytes) noexcept override;
  void empty_cache() override;
  bool set_alloc_check(AllocCheck check) override;
  int64_t guard_violations() const override { return guard_violations_.load(); }
  std::unique_ptr<Timer> make_timer() override;

  void copy_strided(const View& src, const MutView& dst) override;
  void copy2d(const Storage& src, Storage& dst, DType dtype, const Copy2dParams& p) override;
  void const_set(const MutView& dst, Scalar value) override;

  StoragePtr cast(const View& x, DType to) override;
  StoragePtr affine(const View& x, double mul, double add) override;
  StoragePtr powf(const View& x, double exponent) override;
  StoragePtr elu(const View& x, double alpha) override;
  StoragePtr unary(UnaryOp op, const View& x) override;
  StoragePtr binary(BinaryOp op, const View& a, const View& b) override;
  StoragePtr cmp(CmpOp op, const View& a, const View& b) override;
  StoragePtr where(const View& cond, const View& on_true, const View& on_false) override;

  StoragePtr reduce(ReduceOp op, const View& x, std::span<const int> dims) override;
  StoragePtr cumsum(const View& x, int dim) override;
  StoragePtr argsort(const View& x, bool ascending) override;

  StoragePtr gather(const View& x, const View& ids, int dim) override;
  void scatter_set(const MutView& dst, const View& ids, const View& src, int dim) override;
  void scatter_add_set(const MutView& dst, const View& ids, const View& src, int dim) override;
  StoragePtr index_select(const View& x, const View& ids, int dim) override;
  StoragePtr index_add(const View& x, const View& ids, const View& src, int dim) override;

  StoragePtr matmul(const View& a, const View& b) override;
  StoragePtr conv1d(const View& x, const View& k, const ConvParams& p) override;
  StoragePtr conv_transpose1d(const View& x, const View& k, const ConvParams& p) override;
  StoragePtr conv2d(const View& x, const View& k, const ConvParams& p) override;
  StoragePtr conv_transpose2d(const View& x, const View& k, const ConvParams& p) override;
  StoragePtr avg_pool2d(const View& x, const PoolParams& p) override;
  StoragePtr max_pool2d(const View& x, const PoolParams& p) override;
  StoragePtr upsample_nearest1d(const View& x, int64_t out_l) override;
  StoragePtr upsample_nearest2d(const View& x, int64_t out_h, int64_t out_w) override;
  StoragePtr upsample_bilinear2d(const View& x, const BilinearParams& p) override;

  const NnKernels* nn() const override { return &nn_; }

  StoragePtr rand_uniform(const Shape& shape, DType dtype, double lo, double up) override;
  StoragePtr rand_normal(const Shape& shape, DType dtype, double mean, double std) override;
  void set_seed(uint64_t seed) override;

 private:
  uint64_t next_stream(uint64_t* seed);

  BlockCache cache_;
  const CpuNnKernels nn_{*this};
  std::mutex rng_mutex_;
  uint64_t seed_ = kDefaultSeed;
  uint64_t stream_ = 0;
  std::atomic<bool> check_poison_{false};
  std::atomic<size_t> check_guard_{0};
  std::atomic<int64_t> guard_violations_{0};
};

// The process's CPU backend.
CpuBackend& cpu_backend();

}  // namespace wick::cpu
