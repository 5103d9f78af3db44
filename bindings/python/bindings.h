// What the Python module's two files share: DLPack in and out (dlpack.cpp), and the conversions
// of dtypes and devices from Python's spelling.
#pragma once

#include <pybind11/pybind11.h>

#include "wick/tensor.h"

namespace wick::python {

namespace py = pybind11;

// "f32", "bf16", ... or a wick dtype's name; DTypeError for another.
DType dtype_arg(const std::string& name);
// "cpu", "cuda", "cuda:1", ...; DeviceError for another.
Device device_arg(const std::string& text);

// A capsule named "dltensor" over t's memory, no copy; the capsule keeps t's storage alive until
// its consumer's deleter runs. GPU work queued on t's device is finished first, so that a consumer
// on any stream reads the finished values.
py::capsule to_dlpack(const Tensor& t);
// (device type, ordinal) as DLPack numbers it: (1, 0) for the CPU, (2, i) CUDA, (10, i) ROCm.
py::tuple dlpack_device(const Tensor& t);
// A tensor over the memory of `obj` (an object with __dlpack__, or a "dltensor" capsule), no copy.
// The producer's memory is kept until the last wick tensor over it is gone. For a GPU producer,
// wick's stream is passed as DLPack's stream, so the producer orders its pending work before it.
Tensor from_dlpack(const py::object& obj);

}  // namespace wick::python
