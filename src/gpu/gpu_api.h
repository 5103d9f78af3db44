// What the rest of wick sees of the GPU backend: plain C++, no vendor headers, so that host code
// compiled by the C++ compiler can reach it in a build with WICK_CUDA or WICK_ROCM.
#pragma once

#include <functional>
#include <string>

#include "backend/backend.h"
#include "wick/device.h"

namespace wick::dist::detail {
class GpuCollectives;
}

namespace wick::gpu {

#if defined(WICK_BACKEND_HIP)
inline constexpr DeviceType kBuiltDeviceType = DeviceType::Rocm;
#else
inline constexpr DeviceType kBuiltDeviceType = DeviceType::Cuda;
#endif

// How many devices the runtime sees (0 when it cannot initialise, as on a machine without one).
int gpu_device_count();
// Why the runtime sees none (its error string), or empty.
std::string gpu_no_device_reason();
// The communicators of this GPU backend's devices (src/dist/engine.h): NCCL or RCCL, loaded at the
// first one (gpu/dist_nccl.cu); null in a build without their header.
const dist::detail::GpuCollectives* gpu_collectives();
// The backend of device `index`, made on first use; DeviceError if it does not exist.
Backend& gpu_backend(int index);
// "cuda:0: NVIDIA H100 80GB HBM3, 81559 MiB, sm_90, warp 32, 132 multiprocessors, L2 50 MiB,
// recorded kernels start early" (the last where GpuBackend::early_start()).
std::string gpu_describe(int index);
// The stream the backend of device `index` queues its work on (a cudaStream_t or hipStream_t).
void* gpu_stream(int index);
// The device's name ("NVIDIA H100 80GB HBM3").
std::string gpu_name(int index);
// A CUDA or HIP graph of the ops `ops` queues on device `index`'s stream (wick::Graph): the
// returned function launches it, and its last copy destroys it.
std::function<void()> gpu_record(int index, std::function<void()> ops);
// The versions of the driver and of the runtime wick links ("CUDA driver 13.0, runtime 13.0").
std::string gpu_driver_version();

}  // namespace wick::gpu
