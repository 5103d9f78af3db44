// Which Backend serves a Device. The CPU backend always exists; GPU backends exist in a build
// with WICK_CUDA or WICK_ROCM, one per device, made on first use.
#pragma once

#include "backend/backend.h"
#include "wick/device.h"

namespace wick {

// Throws DeviceError naming `op` if the device's backend is not built in or the device does not
// exist.
Backend& backend_for(Device device, const char* op = "device");

// Testing aid: serve `device` with `backend` (nullptr restores the normal lookup). Lets CPU-only
// builds test cross-device code paths with a second host-memory backend.
void set_backend_override(Device device, Backend* backend);

}  // namespace wick
