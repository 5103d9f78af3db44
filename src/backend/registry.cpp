#include "backend/registry.h"

#include <atomic>
#include <map>
#include <mutex>
#include <ostream>
#include <sstream>
#include <utility>

#include "cpu/cpu_backend.h"
#include "cpu/gemm.h"
#include "cpu/parallel.h"
#include "cpu/quant/amx.h"
#include "cpu/quant/qdot.h"
#if WICK_HAS_GPU
#include "gpu/gpu_api.h"
#endif
#include "wick/error.h"

namespace wick {

namespace {

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

std::map<std::pair<int, int>, Backend*>& overrides() {
  static std::map<std::pair<int, int>, Backend*> m;
  return m;
}

std::pair<int, int> key(Device d) { return {static_cast<int>(d.type()), d.index()}; }

const char* backend_label(DeviceType t) {
  switch (t) {
    case DeviceType::Cpu: return "CPU";
    case DeviceType::Cuda: return "CUDA";
    case DeviceType::Rocm: return "ROCm";
  }
  return "?";
}

const char* cmake_option(DeviceType t) { return t == DeviceType::Cuda ? "WICK_CUDA" : "WICK_ROCM"; }

}  // namespace

Backend& backend_for(Device device, const char* op) {
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    auto it = overrides().find(key(device));
    if (it != overrides().end()) return *it->second;
  }
  if (device.is_cpu()) {
    WICK_CHECK(device.index() == 0, DeviceError, op, "there is one CPU device (cpu), not ", device);
    return cpu::cpu_backend();
  }
  WICK_CHECK(backend_built(device.type()), DeviceError, op, "wick was built without ", backend_label(device.type()),
             "; rebuild with -D", cmake_option(device.type()), "=ON (device ", device, ")");
  int count = device_count(device.type());
#if WICK_HAS_GPU
  if (device.index() >= 0 && device.index() < count) return gpu::gpu_backend(device.index());
#endif
  WICK_THROW(DeviceError, op, "device ", device, " does not exist (", count, " ", backend_label(device.type()),
             " devices found)");
}

void set_backend_override(Device device, Backend* backend) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  if (backend)
    overrides()[key(device)] = backend;
  else
    overrides().erase(key(device));
}

bool backend_built(DeviceType type) {
#if WICK_HAS_GPU
  if (type == gpu::kBuiltDeviceType) return true;
#endif
  return type == DeviceType::Cpu;
}

int device_count(DeviceType type) {
  if (type == DeviceType::Cpu) return 1;
#if WICK_HAS_GPU
  if (type == gpu::kBuiltDeviceType) return gpu::gpu_device_count();
#endif
  return 0;
}

std::string no_device_reason(DeviceType type) {
#if WICK_HAS_GPU
  if (type == gpu::kBuiltDeviceType) return gpu::gpu_no_device_reason();
#endif
  (void)type;
  return {};
}

std::vector<Device> available_devices() {
  std::vector<Device> out = {Device::cpu()};
#if WICK_HAS_GPU
  for (int i = 0; i < gpu::gpu_device_count(); ++i) out.push_back(Device(gpu::kBuiltDeviceType, i));
#endif
  return out;
}

std::string describe_device(Device device) {
  backend_for(device, "describe_device");
  if (device.is_cpu())
    return detail::str_cat("cpu: ", cpu::max_threads(), " threads (OpenMP), ", cpu::blas_description(),
                           ", own kernels up to ", cpu::qdot::isa_name(cpu::qdot::active_isa()),
                           cpu::amx::active() ? ", AMX tiles for Q4_0 and Q8_0 products of many rows" : "");
#if WICK_HAS_GPU
  return gpu::gpu_describe(device.index());
#else
  return device.to_string();
#endif
}

void release_host_threads() { cpu::release_team(); }

namespace {
std::atomic<bool> g_allow_tf32{false};
thread_local bool t_batch_invariant = false;
}  // namespace

void set_allow_tf32(bool allow) { g_allow_tf32 = allow; }
bool allow_tf32() { return g_allow_tf32; }

bool set_batch_invariant(bool on) { return std::exchange(t_batch_invariant, on); }
bool batch_invariant() { return t_batch_invariant; }

void synchronize(Device device) { backend_for(device, "synchronize").synchronize(); }

MemoryUse memory_use(Device device) { return backend_for(device, "memory_use").memory_use(); }
void reset_peak_memory(Device device) { backend_for(device, "reset_peak_memory").reset_peak_memory(); }
DeviceMemory device_memory(Device device) { return backend_for(device, "device_memory").device_memory(); }

void* native_stream(Device device) {
  backend_for(device, "native_stream");
  if (device.is_cpu()) return nullptr;
#if WICK_HAS_GPU
  return gpu::gpu_stream(device.index());
#else
  return nullptr;
#endif
}

void manual_seed(uint64_t seed, Device device) { backend_for(device, "manual_seed").set_seed(seed); }

}  // namespace wick
