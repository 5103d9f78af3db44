// The reference backend: the oracle of the parity harness. One plain scalar loop per op over
// multi-indices, arithmetic in f64 (long double for conversions), written to be obviously right,
// never to be fast. Never used by users.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace wick::reference {

class ReferenceBackend final : public Backend {
 public:
  // `device` is the device it reports; tests serve another device with it (set_backend_override).
  explicit ReferenceBackend(Device device = Device::cpu()) : device_(device) {}
  std::string name() const override { return "reference"; }
  Device device() const override { return device_; }
  bool supports(OpKey op, std::span<const DType> dtypes) const override {
    return default_supports(*this, op, dtypes);
  }

  StoragePtr alloc(size_t nbytes) override;
  using Backend::alloc;
  StoragePtr from_host(const void* src, size_t nbytes) override;
  void to_host(const Storage& src, size_t byte_offset, size_t nbytes, void* dst) override;
  void synchronize() override {}
  void release(void* data, size_t nbytes) noexcept override;
  std::unique_ptr<Timer> make_timer() override { return make_host_timer(*this); }

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

  StoragePtr rand_uniform(const Shape& shape, DType dtype, double lo, double up) override;
  StoragePtr rand_normal(const Shape& shape, DType dtype, double mean, double std) override;
  void set_seed(uint64_t seed) override {
    seed_ = seed;
    stream_ = 0;
  }

 private:
  Device device_;
  uint64_t seed_ = 0x5eed5eed5eed5eedull;
  uint64_t stream_ = 0;
};

// The process's reference backend.
ReferenceBackend& reference_backend();

}  // namespace wick::reference
