// The reference backend: the oracle of the parity harness. One plain scalar loop per op over
// multi-indices, arithmetic in f64 (long double for conversions), written to be obviously right,
// never to be fast. Never used by users.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "backend/random_streams.h"

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

  WICK_BACKEND_OP_OVERRIDES

  void set_seed(uint64_t seed) override { random_.reset(seed); }

 private:
  Device device_;
  RandomStreams random_;
};

// The process's reference backend.
ReferenceBackend& reference_backend();

}  // namespace wick::reference
