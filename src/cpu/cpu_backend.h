// The CPU backend: OpenMP-parallel loops over host memory, the functors of src/kernels.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "backend/backend.h"
#include "backend/random_streams.h"
#include "cpu/block_cache.h"
#include "cpu/nn/nn_kernels.h"
#include "cpu/quant/quant_kernels.h"

namespace wick::cpu {

class CpuBackend final : public Backend {
 public:
  // Refuses (wick::Error) a WICK_CPU_ISA that names no limit (qdot::isa_named).
  CpuBackend();
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

  WICK_BACKEND_OP_OVERRIDES

  const NnKernels* nn() const override { return &nn_; }
  const QuantKernels* quant() const override { return &quant_; }

  void set_seed(uint64_t seed) override;
  // "isa": the highest instruction set wick's own CPU kernels use, "avx512_vnni", "avx2" or "none"
  // (the portable loops; qdot::set_isa_limit), for the whole process. OpenBLAS keeps its own
  // (OPENBLAS_CORETYPE), and the loops compiled for several instruction sets (cpu/clones.h) the
  // processor's best.
  bool set_option(std::string_view key, std::string_view value) override;

 private:
  BlockCache cache_;
  const CpuNnKernels nn_{*this};
  const CpuQuantKernels quant_{*this};
  RandomStreams random_;
  std::atomic<bool> check_poison_{false};
  std::atomic<size_t> check_guard_{0};
  std::atomic<int64_t> guard_violations_{0};
};

// The process's CPU backend.
CpuBackend& cpu_backend();

}  // namespace wick::cpu
