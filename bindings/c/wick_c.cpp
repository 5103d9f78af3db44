// The C API (include/wick/wick_c.h): errors, devices, tensors' creation, inspection, data and
// views. The ops are in wick_c_ops.cpp, the model runner in wick_c_models.cpp.
#include <cmath>
#include <cstring>
#include <sstream>
#include <vector>

#include "wick/wick.h"
#include "wick_c_internal.h"

namespace wick::capi {

namespace {
thread_local std::string g_last_error;
}  // namespace

void set_error(const char* message) { g_last_error = message; }

const char* last_error() { return g_last_error.c_str(); }

wick_status fail(wick_status status, const char* message) {
  try {
    g_last_error = message;
  } catch (...) {
    g_last_error.clear();  // no memory even for the message: the status still says what happened
  }
  return status;
}

HandleTable<Tensor>& tensor_handles() {
  static HandleTable<Tensor>& table = *new HandleTable<Tensor>(1);
  return table;
}

void refuse_handle(const void* h, const char* op, const std::string& arg, const char* type) {
  if (!h) throw ArgumentError(detail::str_cat(op, ": the ", type, " handle ", arg, " is null"));
  throw ArgumentError(
      detail::str_cat(op, ": ", arg, " is not a live wick_", type, " handle (freed already, or never made by wick)"));
}

Tensor in(const wick_tensor* t, const char* op, const char* arg) {
  std::optional<Tensor> x;
  if (t) x = tensor_handles().get(handle_word(t));
  if (!x) refuse_handle(t, op, arg, "tensor");
  return std::move(*x);
}

Tensor in_mut(wick_tensor* t, const char* op, const char* arg) { return in(t, op, arg); }

void give(wick_tensor** out, Tensor t) { *out = handle_of<wick_tensor>(tensor_handles().add(std::move(t))); }

DType dtype_in(int32_t dtype, const char* op) {
  const int v = static_cast<int>(dtype);
  if (v < 0 || v >= kNumDTypes) throw ArgumentError(detail::str_cat(op, ": unknown wick_dtype ", v));
  return static_cast<DType>(v);
}

Device device_in(wick_device device, const char* op) {
  if (device.type < WICK_DEVICE_CPU || device.type > WICK_DEVICE_ROCM)
    throw ArgumentError(detail::str_cat(op, ": unknown wick_device_type ", device.type));
  if (device.index < 0 || device.index > kMaxDeviceIndex)
    throw ArgumentError(detail::str_cat(op, ": device ordinal ", device.index, " out of range"));
  return Device(static_cast<DeviceType>(device.type), device.index);
}

Shape shape_in(const int64_t* shape, int rank, const char* op, const char* arg) {
  if (rank < 0 || rank > kMaxRank)
    throw ArgumentError(detail::str_cat(op, ": ", arg, " of rank ", rank, " (wick takes 0 to ", kMaxRank, ")"));
  if (rank > 0 && !shape) throw ArgumentError(detail::str_cat(op, ": ", arg, " is null for rank ", rank));
  return Shape(std::span<const int64_t>(shape, static_cast<size_t>(rank)));
}

void text_out(const std::string& text, char* buf, size_t cap, size_t* len) {
  if (len) *len = text.size();
  if (cap == 0) return;
  if (!buf) throw ArgumentError("the text buffer is null with a capacity of " + std::to_string(cap));
  const size_t n = std::min(cap - 1, text.size());
  std::memcpy(buf, text.data(), n);
  buf[n] = '\0';
}

Scalar scalar_in(double v) {
  if (std::nearbyint(v) == v && std::fabs(v) < 9.2e18) return Scalar(static_cast<int64_t>(v));
  return Scalar(v);
}

namespace {

wick_device device_out(Device d) { return {static_cast<int32_t>(d.type()), d.index()}; }

// A creation call with a shape, dtype and device.
template <typename F>
wick_status make(const char* op, const int64_t* shape, int rank, int32_t dtype, wick_device device, wick_tensor** out,
                 F&& f) {
  return guard([&] {
    out_ptr(out, op);
    give(out, f(shape_in(shape, rank, op), dtype_in(dtype, op), device_in(device, op)));
  });
}

}  // namespace
}  // namespace wick::capi

using namespace wick;
using namespace wick::capi;

extern "C" {

// ---- the library -----------------------------------------------------------------------------

const char* wick_version(void) { return wick::version(); }
int wick_c_abi_version(void) { return WICK_C_ABI_VERSION; }
const char* wick_last_error(void) { return last_error(); }

const char* wick_status_name(int32_t status) {
  switch (status) {
    case WICK_OK: return "WICK_OK";
    case WICK_ERROR_ARGUMENT: return "WICK_ERROR_ARGUMENT";
    case WICK_ERROR_SHAPE: return "WICK_ERROR_SHAPE";
    case WICK_ERROR_DTYPE: return "WICK_ERROR_DTYPE";
    case WICK_ERROR_DEVICE: return "WICK_ERROR_DEVICE";
    case WICK_ERROR_INDEX: return "WICK_ERROR_INDEX";
    case WICK_ERROR_OUT_OF_MEMORY: return "WICK_ERROR_OUT_OF_MEMORY";
    case WICK_ERROR_NOT_SUPPORTED: return "WICK_ERROR_NOT_SUPPORTED";
    case WICK_ERROR_FORMAT: return "WICK_ERROR_FORMAT";
    case WICK_ERROR_DIST: return "WICK_ERROR_DIST";
    case WICK_ERROR_OTHER: return "WICK_ERROR_OTHER";
  }
  return "WICK_STATUS_UNKNOWN";
}

size_t wick_dtype_size(int32_t dtype) {
  const int v = static_cast<int>(dtype);
  return v >= 0 && v < kNumDTypes ? dtype_size(static_cast<DType>(v)) : 0;
}

const char* wick_dtype_name(int32_t dtype) {
  const int v = static_cast<int>(dtype);
  return v >= 0 && v < kNumDTypes ? dtype_name(static_cast<DType>(v)).data() : "";
}

// ---- devices ---------------------------------------------------------------------------------

wick_status wick_device_parse(const char* text, wick_device* out) {
  return guard([&] {
    out_ptr(out, "device_parse");
    if (!text) throw ArgumentError("device_parse: the text is null");
    Device d;
    if (!Device::parse(text, &d))
      throw DeviceError(detail::str_cat("device_parse: \"", text, "\" is not a device (cpu, cuda, cuda:1, rocm:0)"));
    *out = device_out(d);
  });
}

wick_status wick_device_count(int32_t type, int* out) {
  return guard([&] {
    out_ptr(out, "device_count");
    *out = device_count(device_in({type, 0}, "device_count").type());
  });
}

int wick_backend_built(int32_t type) {
  return type >= WICK_DEVICE_CPU && type <= WICK_DEVICE_ROCM && backend_built(static_cast<DeviceType>(type));
}

wick_status wick_device_describe(wick_device device, char* buf, size_t cap, size_t* len) {
  return guard([&] { text_out(describe_device(device_in(device, "device_describe")), buf, cap, len); });
}

wick_status wick_synchronize(wick_device device) {
  return guard([&] { synchronize(device_in(device, "synchronize")); });
}

wick_status wick_memory_use(wick_device device, int64_t* in_use, int64_t* peak) {
  return guard([&] {
    const MemoryUse use = memory_use(device_in(device, "memory_use"));
    if (in_use != nullptr) *in_use = use.in_use;
    if (peak != nullptr) *peak = use.peak;
  });
}

wick_status wick_reset_peak_memory(wick_device device) {
  return guard([&] { reset_peak_memory(device_in(device, "reset_peak_memory")); });
}

wick_status wick_manual_seed(uint64_t seed, wick_device device) {
  return guard([&] { manual_seed(seed, device_in(device, "manual_seed")); });
}

wick_status wick_native_stream(wick_device device, void** out) {
  return guard([&] { *out_ptr(out, "native_stream") = native_stream(device_in(device, "native_stream")); });
}

// ---- tensors: creation -----------------------------------------------------------------------

void wick_tensor_free(wick_tensor* t) {
  free_handle(tensor_handles(), t,
              "wick_tensor_free: not a live wick_tensor handle (freed already, or never made by wick)");
}

wick_status wick_tensor_retain(const wick_tensor* t, wick_tensor** out) {
  return map("retain", {t, "t"}, out, [](const Tensor& x) { return x; });
}

wick_status wick_tensor_from_host(const void* data, size_t nbytes, int32_t dtype, const int64_t* shape, int rank,
                                  wick_device device, wick_tensor** out) {
  return make("from_host", shape, rank, dtype, device, out, [&](const Shape& s, DType dt, Device d) {
    const int64_t n = s.numel();
    if (nbytes % dtype_size(dt) != 0 || static_cast<uint64_t>(n) != nbytes / dtype_size(dt))
      throw ArgumentError(detail::str_cat("from_host: ", nbytes, " bytes for shape ", s, " of ", dt, " (", n,
                                          " elements of ", dtype_size(dt), " bytes)"));
    if (n > 0 && !data) throw ArgumentError("from_host: the data pointer is null");
    return Tensor::from_data(data, n, dt, s, d);
  });
}

wick_status wick_tensor_from_blob(void* data, const int64_t* shape, const int64_t* strides, int rank, int32_t dtype,
                                  wick_device device, void (*release)(void* ctx), void* ctx, wick_tensor** out) {
  // The release runs exactly once: here if the call fails, else when the storage goes.
  std::shared_ptr<const void> owner;
  wick_status s = guard([&] {
    owner = std::shared_ptr<const void>(ctx, [release](const void* c) {
      if (release) release(const_cast<void*>(c));
    });
  });
  if (s != WICK_OK) return s;
  return make("from_blob", shape, rank, dtype, device, out, [&](const Shape& sh, DType dt, Device d) {
    Strides st = strides ? shape_in(strides, rank, "from_blob", "strides") : Layout(sh).strides();
    return Tensor::from_blob(data, sh, st, dt, d, std::move(owner));
  });
}

wick_status wick_tensor_zeros(const int64_t* shape, int rank, int32_t dtype, wick_device device, wick_tensor** out) {
  return make("zeros", shape, rank, dtype, device, out,
              [](const Shape& s, DType dt, Device d) { return Tensor::zeros(s, dt, d); });
}

wick_status wick_tensor_ones(const int64_t* shape, int rank, int32_t dtype, wick_device device, wick_tensor** out) {
  return make("ones", shape, rank, dtype, device, out,
              [](const Shape& s, DType dt, Device d) { return Tensor::ones(s, dt, d); });
}

wick_status wick_tensor_full(const int64_t* shape, int rank, double value, int32_t dtype, wick_device device,
                             wick_tensor** out) {
  return make("full", shape, rank, dtype, device, out,
              [&](const Shape& s, DType dt, Device d) { return Tensor::full(s, scalar_in(value), dt, d); });
}

wick_status wick_tensor_arange(double start, double end, double step, int32_t dtype, wick_device device,
                               wick_tensor** out) {
  return make("arange", nullptr, 0, dtype, device, out, [&](const Shape&, DType dt, Device d) {
    return Tensor::arange(scalar_in(start), scalar_in(end), scalar_in(step), dt, d);
  });
}

wick_status wick_tensor_eye(int64_t n, int32_t dtype, wick_device device, wick_tensor** out) {
  return make("eye", nullptr, 0, dtype, device, out,
              [&](const Shape&, DType dt, Device d) { return Tensor::eye(n, dt, d); });
}

wick_status wick_tensor_rand_uniform(const int64_t* shape, int rank, double lo, double up, int32_t dtype,
                                     wick_device device, wick_tensor** out) {
  return make("rand_uniform", shape, rank, dtype, device, out,
              [&](const Shape& s, DType dt, Device d) { return Tensor::rand_uniform(s, lo, up, dt, d); });
}

wick_status wick_tensor_rand_normal(const int64_t* shape, int rank, double mean, double std, int32_t dtype,
                                    wick_device device, wick_tensor** out) {
  return make("rand_normal", shape, rank, dtype, device, out,
              [&](const Shape& s, DType dt, Device d) { return Tensor::rand_normal(s, mean, std, dt, d); });
}

// ---- tensors: inspection and data ------------------------------------------------------------

wick_status wick_tensor_rank(const wick_tensor* t, int* out) {
  return guard([&] { *out_ptr(out, "rank") = in(t, "rank", "t").rank(); });
}

wick_status wick_tensor_shape(const wick_tensor* t, int64_t* out) {
  return guard([&] {
    const Tensor& x = in(t, "shape", "t");
    if (x.rank() > 0) std::memcpy(out_ptr(out, "shape"), x.shape().data(), sizeof(int64_t) * x.rank());
  });
}

wick_status wick_tensor_strides(const wick_tensor* t, int64_t* out) {
  return guard([&] {
    const Tensor& x = in(t, "strides", "t");
    if (x.rank() > 0) std::memcpy(out_ptr(out, "strides"), x.strides().data(), sizeof(int64_t) * x.rank());
  });
}

wick_status wick_tensor_offset(const wick_tensor* t, int64_t* out) {
  return guard([&] { *out_ptr(out, "offset") = in(t, "offset", "t").offset(); });
}

wick_status wick_tensor_numel(const wick_tensor* t, int64_t* out) {
  return guard([&] { *out_ptr(out, "numel") = in(t, "numel", "t").numel(); });
}

wick_status wick_tensor_dtype(const wick_tensor* t, wick_dtype* out) {
  return guard([&] { *out_ptr(out, "dtype") = static_cast<wick_dtype>(in(t, "dtype", "t").dtype()); });
}

wick_status wick_tensor_device(const wick_tensor* t, wick_device* out) {
  return guard([&] { *out_ptr(out, "device") = device_out(in(t, "device", "t").device()); });
}

wick_status wick_tensor_is_contiguous(const wick_tensor* t, int* out) {
  return guard([&] { *out_ptr(out, "is_contiguous") = in(t, "is_contiguous", "t").is_contiguous(); });
}

wick_status wick_tensor_data_ptr(const wick_tensor* t, void** out) {
  return guard([&] { *out_ptr(out, "data_ptr") = in(t, "data_ptr", "t").data_ptr(); });
}

wick_status wick_tensor_to_host(const wick_tensor* t, void* dst, size_t nbytes) {
  return guard([&] {
    const Tensor& x = in(t, "to_host", "t");
    const size_t want = static_cast<size_t>(x.numel()) * dtype_size(x.dtype());
    if (nbytes != want)
      throw ArgumentError(detail::str_cat("to_host: a buffer of ", nbytes, " bytes for ", x.numel(), " elements of ",
                                          x.dtype(), " (", want, " bytes)"));
    if (want > 0 && !dst) throw ArgumentError("to_host: the destination is null");
    // The bytes as they are, whatever the dtype: made contiguous where they lie, then one transfer.
    Tensor c = x.contiguous().to_device(Device::cpu());
    if (want > 0) std::memcpy(dst, c.data_ptr(), want);
  });
}

wick_status wick_tensor_format(const wick_tensor* t, char* buf, size_t cap, size_t* len) {
  return guard([&] {
    std::ostringstream os;
    os << in(t, "format", "t");
    text_out(os.str(), buf, cap, len);
  });
}

wick_status wick_tensor_to_dtype(const wick_tensor* t, int32_t dtype, wick_tensor** out) {
  return map("to_dtype", {t, "t"}, out, [&](const Tensor& x) { return x.to_dtype(dtype_in(dtype, "to_dtype")); });
}

wick_status wick_tensor_to_device(const wick_tensor* t, wick_device device, wick_tensor** out) {
  return map("to_device", {t, "t"}, out, [&](const Tensor& x) { return x.to_device(device_in(device, "to_device")); });
}

wick_status wick_tensor_contiguous(const wick_tensor* t, wick_tensor** out) {
  return map("contiguous", {t, "t"}, out, [](const Tensor& x) { return x.contiguous(); });
}

wick_status wick_tensor_copy(const wick_tensor* t, wick_tensor** out) {
  return map("copy", {t, "t"}, out, [](const Tensor& x) { return x.copy(); });
}

// ---- views -----------------------------------------------------------------------------------

wick_status wick_narrow(const wick_tensor* t, int64_t dim, int64_t start, int64_t len, wick_tensor** out) {
  return map("narrow", {t, "t"}, out, [&](const Tensor& x) { return x.narrow(dim, start, len); });
}

wick_status wick_slice(const wick_tensor* t, int64_t dim, int64_t start, int64_t end, int64_t step, wick_tensor** out) {
  return map("slice", {t, "t"}, out, [&](const Tensor& x) { return x.slice(dim, start, end, step); });
}

wick_status wick_select(const wick_tensor* t, int64_t dim, int64_t index, wick_tensor** out) {
  return map("select", {t, "t"}, out, [&](const Tensor& x) { return x.select(dim, index); });
}

wick_status wick_transpose(const wick_tensor* t, int64_t dim0, int64_t dim1, wick_tensor** out) {
  return map("transpose", {t, "t"}, out, [&](const Tensor& x) { return x.transpose(dim0, dim1); });
}

wick_status wick_permute(const wick_tensor* t, const int64_t* dims, int rank, wick_tensor** out) {
  return map("permute", {t, "t"}, out, [&](const Tensor& x) {
    const Shape d = shape_in(dims, rank, "permute", "dims");
    return x.permute(std::span<const int64_t>(d.begin(), d.end()));
  });
}

wick_status wick_broadcast_as(const wick_tensor* t, const int64_t* shape, int rank, wick_tensor** out) {
  return map("broadcast_as", {t, "t"}, out,
             [&](const Tensor& x) { return x.broadcast_as(shape_in(shape, rank, "broadcast_as")); });
}

wick_status wick_squeeze(const wick_tensor* t, int64_t dim, wick_tensor** out) {
  return map("squeeze", {t, "t"}, out, [&](const Tensor& x) { return x.squeeze(dim); });
}

wick_status wick_unsqueeze(const wick_tensor* t, int64_t dim, wick_tensor** out) {
  return map("unsqueeze", {t, "t"}, out, [&](const Tensor& x) { return x.unsqueeze(dim); });
}

wick_status wick_reshape(const wick_tensor* t, const int64_t* shape, int rank, wick_tensor** out) {
  return map("reshape", {t, "t"}, out, [&](const Tensor& x) { return x.reshape(shape_in(shape, rank, "reshape")); });
}

wick_status wick_flatten(const wick_tensor* t, int64_t start_dim, int64_t end_dim, wick_tensor** out) {
  return map("flatten", {t, "t"}, out, [&](const Tensor& x) { return x.flatten(start_dim, end_dim); });
}

}  // extern "C"
