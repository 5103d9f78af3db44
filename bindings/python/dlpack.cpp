// DLPack (dlpack/dlpack.h, version 0.6 and later: DLManagedTensor in a "dltensor" capsule), the
// exchange NumPy and PyTorch speak: torch.from_dlpack(wick_tensor), numpy.from_dlpack(...),
// wick.from_dlpack(torch_tensor). Memory is shared, never copied.
#include <dlpack/dlpack.h>

#include <cstdint>
#include <memory>

#include "bindings.h"
#include "wick/device.h"

namespace wick::python {

namespace {

DLDataType dl_dtype(DType dt) {
  auto make = [](uint8_t code, uint8_t bits) { return DLDataType{code, bits, 1}; };
  switch (dt) {
    case DType::U8: return make(kDLUInt, 8);
    case DType::U32: return make(kDLUInt, 32);
    case DType::I16: return make(kDLInt, 16);
    case DType::I32: return make(kDLInt, 32);
    case DType::I64: return make(kDLInt, 64);
    case DType::BF16: return make(kDLBfloat, 16);
    case DType::F16: return make(kDLFloat, 16);
    case DType::F32: return make(kDLFloat, 32);
    case DType::F64: return make(kDLFloat, 64);
    case DType::F8E4M3: break;
  }
  WICK_THROW(DTypeError, "__dlpack__", "DLPack has no code for ", dt, " in the version wick speaks (0.6)");
}

DType wick_dtype(DLDataType t) {
  WICK_CHECK(t.lanes == 1, DTypeError, "from_dlpack", "vector dtypes (", int(t.lanes), " lanes) have no wick dtype");
  const int bits = t.bits;
  if (t.code == kDLUInt && bits == 8) return DType::U8;
  if (t.code == kDLUInt && bits == 32) return DType::U32;
  if (t.code == kDLInt && bits == 16) return DType::I16;
  if (t.code == kDLInt && bits == 32) return DType::I32;
  if (t.code == kDLInt && bits == 64) return DType::I64;
  if (t.code == kDLBfloat && bits == 16) return DType::BF16;
  if (t.code == kDLFloat && bits == 16) return DType::F16;
  if (t.code == kDLFloat && bits == 32) return DType::F32;
  if (t.code == kDLFloat && bits == 64) return DType::F64;
  WICK_THROW(DTypeError, "from_dlpack", "no wick dtype for DLPack type code ", int(t.code), " of ", bits,
             " bits (wick: u8, u32, i16, i32, i64, bf16, f16, f32, f64)");
}

DLDevice dl_device(Device d) {
  switch (d.type()) {
    case DeviceType::Cpu: return {kDLCPU, 0};
    case DeviceType::Cuda: return {kDLCUDA, d.index()};
    case DeviceType::Rocm: return {kDLROCM, d.index()};
  }
  return {kDLCPU, 0};
}

Device wick_device(DLDevice d) {
  if (d.device_type == kDLCPU) return Device::cpu();
  if (d.device_type == kDLCUDA) return Device::cuda(d.device_id);
  if (d.device_type == kDLROCM) return Device::rocm(d.device_id);
  WICK_THROW(DeviceError, "from_dlpack", "DLPack device type ", int(d.device_type),
             " is not one wick has (CPU 1, CUDA 2, ROCm 10): pinned or managed memory must be copied first");
}

// A wick tensor lent out: the DLManagedTensor points into this, and its deleter frees it.
struct Lent {
  Tensor tensor;
  int64_t shape[kMaxRank];
  int64_t strides[kMaxRank];
  DLManagedTensor managed;
};

void free_lent(DLManagedTensor* m) { delete static_cast<Lent*>(m->manager_ctx); }

constexpr const char* kName = "dltensor";
constexpr const char* kUsedName = "used_dltensor";

}  // namespace

py::tuple dlpack_device(const Tensor& t) {
  const DLDevice d = dl_device(t.device());
  return py::make_tuple(static_cast<int>(d.device_type), d.device_id);
}

py::capsule to_dlpack(const Tensor& t) {
  const DLDataType dtype = dl_dtype(t.dtype());
  if (t.device().is_gpu()) synchronize(t.device());
  auto lent = std::make_unique<Lent>();
  lent->tensor = t;
  for (int i = 0; i < t.rank(); ++i) {
    lent->shape[i] = t.shape()[i];
    lent->strides[i] = t.strides()[i];
  }
  DLTensor& d = lent->managed.dl_tensor;
  // The storage's start, and the view's offset in bytes, as DLPack asks.
  d.data = t.storage() ? static_cast<char*>(t.data_ptr()) - t.offset() * static_cast<int64_t>(dtype_size(t.dtype()))
                       : nullptr;
  d.byte_offset = static_cast<uint64_t>(t.offset()) * dtype_size(t.dtype());
  d.device = dl_device(t.device());
  d.ndim = t.rank();
  d.dtype = dtype;
  d.shape = lent->shape;
  d.strides = lent->strides;
  lent->managed.manager_ctx = lent.get();
  lent->managed.deleter = free_lent;
  DLManagedTensor* m = &lent.release()->managed;
  // A capsule nobody consumed (still named "dltensor") frees its tensor; a consumer renames it
  // and calls the deleter itself.
  return py::capsule(m, kName, [](PyObject* cap) {
    if (PyCapsule_IsValid(cap, kName)) {
      auto* mt = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, kName));
      if (mt && mt->deleter) mt->deleter(mt);
    }
  });
}

Tensor from_dlpack(const py::object& obj) {
  py::object cap = obj;
  if (!PyCapsule_CheckExact(obj.ptr())) {
    WICK_CHECK(py::hasattr(obj, "__dlpack__"), NotSupportedError, "from_dlpack",
               "the object has no __dlpack__ (a tensor of NumPy, PyTorch, JAX, CuPy, ... has one)");
    const auto dev = obj.attr("__dlpack_device__")().cast<std::pair<int, int>>();
    if (dev.first == kDLCPU) {
      cap = obj.attr("__dlpack__")();
    } else {
      // The producer makes wick's stream wait for its pending work on the memory (DLPack's
      // stream protocol); on ROCm, 0 means the default stream, so the stream is passed as is.
      const Device d = wick_device(DLDevice{static_cast<DLDeviceType>(dev.first), dev.second});
      const auto stream = reinterpret_cast<uintptr_t>(native_stream(d));
      cap = obj.attr("__dlpack__")(py::arg("stream") = stream);
    }
  }
  WICK_CHECK(PyCapsule_IsValid(cap.ptr(), kName), NotSupportedError, "from_dlpack",
             "not an unconsumed \"dltensor\" capsule (a DLPack capsule is consumed once)");
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap.ptr(), kName));
  const DLTensor& d = m->dl_tensor;
  // From here the memory is wick's to give back: the capsule is marked used, and the deleter runs
  // when the last tensor over it goes (or now, if the tensor cannot be made).
  PyCapsule_SetName(cap.ptr(), kUsedName);
  std::shared_ptr<const void> owner(m, [](const void* p) {
    auto* mt = static_cast<DLManagedTensor*>(const_cast<void*>(p));
    if (mt->deleter) mt->deleter(mt);
  });
  const DType dtype = wick_dtype(d.dtype);
  const Device device = wick_device(d.device);
  WICK_CHECK(d.ndim >= 0 && d.ndim <= kMaxRank, ShapeError, "from_dlpack", "rank ", d.ndim, " (wick takes 0 to ",
             kMaxRank, ")");
  const Shape shape(std::span<const int64_t>(d.shape, static_cast<size_t>(d.ndim)));
  const Strides strides =
      d.strides ? Strides(std::span<const int64_t>(d.strides, static_cast<size_t>(d.ndim))) : Layout(shape).strides();
  void* data = static_cast<char*>(d.data) + d.byte_offset;
  return Tensor::from_blob(data, shape, strides, dtype, device, std::move(owner));
}

}  // namespace wick::python
