// The CPU backend's options and the environment variables they read.
#include <cstdlib>
#include <string_view>

#include "cpu/cpu_backend.h"
#include "cpu/quant/qdot.h"
#include "wick/error.h"

namespace wick::cpu {

CpuBackend::CpuBackend() {
  const char* isa = std::getenv("WICK_CPU_ISA");
  qdot::Isa limit{};
  WICK_CHECK(isa == nullptr || qdot::isa_named(isa, &limit), Error, "cpu backend", "WICK_CPU_ISA='", isa,
             "' names no instruction set: avx512_vnni, avx2, neon or none");
}

bool CpuBackend::set_option(std::string_view key, std::string_view value) {
  qdot::Isa limit{};
  if (key != "isa" || !qdot::isa_named(value, &limit)) return false;
  qdot::set_isa_limit(limit);
  return true;
}

}  // namespace wick::cpu
