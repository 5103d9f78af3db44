// Tensor: construction, creation, inspection, data transfer and views.
#include "wick/tensor.h"

#include <cmath>
#include <ostream>
#include <sstream>
#include <string_view>
#include <vector>

#include "backend/host_memory.h"
#include "backend/registry.h"
#include "backend/scalar_cast.h"
#include "core/checked.h"
#include "core/checks.h"
#include "core/dispatch.h"

namespace wick {

using ops::backend_of;
using ops::describe;

namespace {

// `message` led by "op: " (layout checks name themselves "layout", "numel" or "tensor").
std::string named(const char* op, const char* message) {
  const std::string_view m(message), o(op);
  const bool has = m.size() > o.size() && m.substr(0, o.size()) == o && m[o.size()] == ':';
  return has ? std::string(m) : detail::str_cat(op, ": ", m);
}

// Runs a view transform, adding the op's name and the tensor's dtype and device to a layout error.
template <typename F>
Tensor view_in_context(const Tensor& t, const char* op, F&& f) {
  ops::check_defined(op, t);
  try {
    return f();
  } catch (const ShapeError& e) {
    throw ShapeError(detail::str_cat(named(op, e.what()), " (tensor ", describe(t), ")"));
  } catch (const IndexError& e) {
    throw IndexError(detail::str_cat(named(op, e.what()), " (tensor ", describe(t), ")"));
  }
}

// Sizes are non-negative and the element count and byte size fit in int64.
int64_t check_shape(const char* op, const Shape& shape, DType dtype, Device device) {
  return checked::numel(shape, dtype, op, " (", dtype, " on ", device, ")");
}

// Room for `count` pieces of a split; OutOfMemoryError, at once, when the host has none (a dim of
// 2^40 split in ones), rather than a loop that runs until memory is gone.
template <typename V>
void reserve_pieces(V& v, int64_t count, const char* op, const Tensor& t) {
  try {
    v.reserve(static_cast<size_t>(count));
  } catch (const std::exception&) {
    WICK_THROW(OutOfMemoryError, op, "cannot hold ", count, " pieces in host memory (", describe(t), ")");
  }
}

}  // namespace

Tensor::Tensor(std::shared_ptr<Storage> storage, Layout layout, DType dtype)
    : storage_(std::move(storage)), layout_(std::move(layout)), dtype_(dtype) {
  if (storage_) {
    // The layout is valid (Layout's constructor), so extent() fits; its elements must lie inside
    // the storage. A view may hold more elements than memory could (a broadcast): every op checks
    // the size of what it makes (ops::check_output).
    WICK_CHECK(is_valid(dtype_), DTypeError, "tensor", "invalid dtype ", static_cast<int>(dtype_), " (layout ",
               layout_.to_string(), " on ", storage_->device(), ")");
    int64_t end_bytes = 0;
    // An empty layout addresses nothing, wherever its offset lies.
    const bool inside = layout_.numel() == 0 ||
                        (!__builtin_mul_overflow(layout_.extent(), dtype_size(dtype_), &end_bytes) &&
                         static_cast<uint64_t>(end_bytes) <= storage_->nbytes());
    WICK_CHECK(inside, ShapeError, "tensor", "layout ", layout_.to_string(), " of ", dtype_,
               " reaches past a storage of ", storage_->nbytes(), " bytes on ", storage_->device());
  }
}

// ---- creation ---------------------------------------------------------------------------------

Tensor Tensor::from_data(const void* data, int64_t count, DType dtype, const Shape& shape, Device device) {
  const int64_t n = check_shape("from_vector", shape, dtype, device);
  WICK_CHECK(count == n, ShapeError, "from_vector", count, " values for shape ", shape, " (", n, " elements of ", dtype,
             " on ", device, ")");
  Backend& b = backend_for(device, "from_vector");
  return ops::wrap(b.from_host(data, static_cast<size_t>(count * dtype_size(dtype))), shape, dtype);
}

Tensor Tensor::from_blob(void* data, const Shape& shape, const Strides& strides, DType dtype, Device device,
                         std::shared_ptr<const void> owner) {
  const char* op = "from_blob";
  check_shape(op, shape, dtype, device);
  WICK_CHECK(strides.rank() == shape.rank(), ShapeError, op, strides.rank(), " strides for shape ", shape, " (",
             dtype, " on ", device, ")");
  for (int i = 0; i < strides.rank(); ++i)
    WICK_CHECK(strides[i] >= 0, ShapeError, op, "negative stride in ", strides, " for shape ", shape,
               ": wick's strides are >= 0");
  const int64_t n = shape.numel();
  WICK_CHECK(data != nullptr || n == 0, ShapeError, op, "a null address for ", n, " elements of ", dtype, " on ",
             device);
  WICK_CHECK(reinterpret_cast<uintptr_t>(data) % static_cast<uintptr_t>(dtype_size(dtype)) == 0, ShapeError, op,
             "address ", data, " is not aligned to the ", dtype_size(dtype), " bytes of ", dtype);
  Backend& b = backend_for(device, op);
  // The bytes the layout reaches (Layout checks that shape and strides address within int64).
  Layout layout(shape, strides, 0);
  const int64_t extent = n == 0 ? 0 : layout.extent();
  const int64_t nbytes = checked::mul(extent, static_cast<int64_t>(dtype_size(dtype)), op, "shape ", shape, " strides ", strides, " of ", dtype);
  auto storage = std::make_shared<Storage>(&b, data, static_cast<size_t>(nbytes), std::move(owner));
  return Tensor(std::move(storage), std::move(layout), dtype);
}

void* Tensor::data_ptr() const {
  ops::check_defined("data_ptr", *this);
  return static_cast<char*>(storage_->data()) + offset() * static_cast<int64_t>(dtype_size(dtype_));
}

namespace {

// full() and its shorthands, each naming itself in errors.
Tensor filled(const char* op, const Shape& shape, Scalar value, DType dtype, Device device) {
  const int64_t n = check_shape(op, shape, dtype, device);
  ops::check_scalar_fits(op, value, dtype, detail::str_cat("shape ", shape, " on ", device));
  Backend& b = backend_for(device, op);
  Tensor t = ops::wrap(b.alloc(dtype, n), shape, dtype);
  b.const_set(ops::mut_view_of(t), value);
  return t;
}

}  // namespace

Tensor Tensor::full(const Shape& shape, Scalar value, DType dtype, Device device) {
  return filled("full", shape, value, dtype, device);
}
Tensor Tensor::scalar(Scalar value, DType dtype, Device device) {
  return filled("scalar", Shape{}, value, dtype, device);
}
Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  return filled("zeros", shape, 0, dtype, device);
}
Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) { return filled("ones", shape, 1, dtype, device); }

Tensor Tensor::arange(Scalar start, Scalar end, Scalar step, DType dtype, Device device) {
  backend_for(device, "arange");
  const bool ints = is_int(dtype);
  WICK_CHECK(!ints || (start.is_integral() && end.is_integral() && step.is_integral()), DTypeError, "arange",
             "integer dtype ", dtype, " needs integer start, end and step (got ", start.to_string(), ", ",
             end.to_string(), ", ", step.to_string(), ")");
  const double s = start.to_double(), e = end.to_double(), d = step.to_double();
  WICK_CHECK(d != 0 && std::isfinite(s) && std::isfinite(e) && std::isfinite(d), ShapeError, "arange",
             "needs finite bounds and a nonzero step (got ", start.to_string(), ", ", end.to_string(), ", ",
             step.to_string(), ")");
  // The count in 128 bits: the span of two int64 bounds does not fit in int64.
  __int128 count;
  if (ints) {
    const __int128 a = start.int_value(), b = end.int_value(), st = step.int_value();
    count = st > 0 ? (b > a ? (b - a + st - 1) / st : 0) : (a > b ? (a - b - st - 1) / -st : 0);
  } else {
    const double c = std::max(0.0, std::ceil((e - s) / d));
    count = c < 0x1p63 ? static_cast<__int128>(c) : static_cast<__int128>(checked::kMax) + 1;
  }
  WICK_CHECK(count <= checked::kMax, ShapeError, "arange", "from ", start.to_string(), " to ", end.to_string(),
             " by ", step.to_string(), " has more than 2^63 - 1 elements (", dtype, " on ", device, ")");
  const int64_t n = static_cast<int64_t>(count);
  check_shape("arange", Shape{n}, dtype, device);
  std::vector<unsigned char> host;
  try {
    if (static_cast<uint64_t>(n) > host_memory_bytes() / dtype_size(dtype)) throw std::bad_alloc();
    host.resize(static_cast<size_t>(n * dtype_size(dtype)));
  } catch (const std::exception&) {
    WICK_THROW(OutOfMemoryError, "arange", "cannot stage ", n, " elements of ", dtype, " in host memory (for ", device,
               ")");
  }
  dispatch(dtype, [&]<typename T>() {
    T* p = reinterpret_cast<T*>(host.data());
    // i * step stays within [start, end] for i < n, so it cannot overflow.
    for (int64_t i = 0; i < n; ++i) {
      p[i] = ints ? kernels::cast<T>(start.int_value() + i * step.int_value())
                  : kernels::cast<T>(s + static_cast<double>(i) * d);
    }
  });
  return from_data(host.data(), n, dtype, Shape{n}, device);
}

Tensor Tensor::arange(int64_t end, DType dtype, Device device) { return arange(0, end, 1, dtype, device); }

Tensor Tensor::eye(int64_t n, DType dtype, Device device) {
  WICK_CHECK(n >= 0, ShapeError, "eye", "size must be non-negative, got ", n, " (", dtype, " on ", device, ")");
  check_shape("eye", Shape{n, n}, dtype, device);
  backend_for(device, "eye");
  Tensor t = zeros({n, n}, dtype, device);
  Layout diagonal(Shape{n}, Strides{n + 1}, 0);  // n + 1 fits: n * n does
  backend_of(t).const_set(MutView{*t.storage(), diagonal, dtype}, 1);
  return t;
}

Tensor Tensor::rand_uniform(const Shape& shape, double lo, double up, DType dtype, Device device) {
  WICK_CHECK(is_float(dtype), DTypeError, "rand_uniform", "needs a float dtype, got ", dtype, " (shape ", shape, " on ",
             device, ")");
  check_shape("rand_uniform", shape, dtype, device);
  WICK_CHECK(std::isfinite(lo) && std::isfinite(up) && lo < up && std::isfinite(up - lo), ShapeError, "rand_uniform",
             "needs finite bounds with lo < up and a finite span up - lo, got [", lo, ", ", up, ") (shape ", shape,
             " ", dtype, " on ", device, ")");
  Backend& b = backend_for(device, "rand_uniform");
  return ops::wrap(b.rand_uniform(shape, dtype, lo, up), shape, dtype);
}

Tensor Tensor::rand_normal(const Shape& shape, double mean, double std, DType dtype, Device device) {
  WICK_CHECK(is_float(dtype), DTypeError, "rand_normal", "needs a float dtype, got ", dtype, " (shape ", shape, " on ",
             device, ")");
  check_shape("rand_normal", shape, dtype, device);
  WICK_CHECK(std::isfinite(mean) && std::isfinite(std) && std >= 0, ShapeError, "rand_normal",
             "needs a finite mean and a finite, non-negative standard deviation, got mean ", mean, " std ", std,
             " (shape ", shape, " ", dtype, " on ", device, ")");
  Backend& b = backend_for(device, "rand_normal");
  return ops::wrap(b.rand_normal(shape, dtype, mean, std), shape, dtype);
}

Tensor Tensor::zeros_like() const { return full_like(0); }
Tensor Tensor::ones_like() const { return full_like(1); }
Tensor Tensor::full_like(Scalar value) const {
  ops::check_defined("full_like", *this);
  return full(shape(), value, dtype_, device());
}
Tensor Tensor::rand_uniform_like(double lo, double up) const {
  ops::check_defined("rand_uniform_like", *this);
  return rand_uniform(shape(), lo, up, dtype_, device());
}
Tensor Tensor::rand_normal_like(double mean, double std) const {
  ops::check_defined("rand_normal_like", *this);
  return rand_normal(shape(), mean, std, dtype_, device());
}

// ---- inspection -------------------------------------------------------------------------------

int64_t Tensor::dim(int64_t i) const { return layout_.dim(ops::dim_of("dim", *this, i)); }

Device Tensor::device() const {
  ops::check_defined("device", *this);
  return storage_->device();
}

std::string Tensor::to_string() const { return "Tensor" + describe(*this); }


// ---- data out ---------------------------------------------------------------------------------

void Tensor::check_host_copy(DType expected, const char* op) const {
  ops::check_defined(op, *this);
  WICK_CHECK(expected == dtype_, DTypeError, op, "the tensor holds ", dtype_, ", not ", expected, " (", describe(*this),
             ")");
  ops::check_output(op, shape(), dtype_, {this});
  // Refused before asking the host (see kMaxAllocBytes).
  if (static_cast<uint64_t>(numel()) > kMaxAllocBytes / dtype_size(dtype_)) throw_host_out_of_memory(op);
}

void Tensor::throw_host_out_of_memory(const char* op) const {
  WICK_THROW(OutOfMemoryError, op, "cannot allocate host memory for ", numel(), " elements (", describe(*this), ")");
}

void Tensor::copy_to_host(void* dst, DType expected, const char* op) const {
  check_host_copy(expected, op);
  Tensor c = contiguous();
  backend_of(c).to_host(*c.storage_, static_cast<size_t>(c.offset() * dtype_size(dtype_)),
                        static_cast<size_t>(c.numel() * dtype_size(dtype_)), dst);
}

void Tensor::copy_item_to_host(void* dst, DType expected) const {
  ops::check_defined("item", *this);
  WICK_CHECK(numel() == 1, ShapeError, "item", "needs a tensor of one element, got ", describe(*this));
  copy_to_host(dst, expected, "item");
}

Tensor Tensor::to_dtype(DType dtype) const {
  ops::check_defined("to_dtype", *this);
  if (dtype == dtype_) return *this;
  ops::check_supported("to_dtype", *this, OpCode::Cast, {dtype_, dtype});
  ops::check_output("to_dtype", shape(), dtype, {this});
  return ops::wrap(backend_of(*this).cast(ops::view_of(*this), dtype), shape(), dtype);
}

Tensor Tensor::to_device(Device device) const {
  ops::check_defined("to_device", *this);
  if (device == this->device()) return *this;
  Backend& target = backend_for(device, "to_device");
  ops::check_output("to_device", shape(), dtype_, {this});
  Tensor c = contiguous();
  std::vector<unsigned char> host;
  try {
    host.resize(static_cast<size_t>(numel() * dtype_size(dtype_)));  // fits: checked by the constructor
  } catch (const std::exception&) {
    throw_host_out_of_memory("to_device");
  }
  backend_of(c).to_host(*c.storage_, static_cast<size_t>(c.offset() * dtype_size(dtype_)), host.size(), host.data());
  return ops::wrap(target.from_host(host.data(), host.size()), shape(), dtype_);
}

Tensor Tensor::contiguous() const {
  ops::check_defined("contiguous", *this);
  return is_contiguous() ? *this : copy();
}

Tensor Tensor::copy() const {
  ops::check_defined("copy", *this);
  ops::check_output("copy", shape(), dtype_, {this});
  Backend& b = backend_of(*this);
  Tensor out = ops::wrap(b.alloc(dtype_, numel()), shape(), dtype_);
  b.copy_strided(ops::view_of(*this), ops::mut_view_of(out));
  return out;
}

// ---- views ------------------------------------------------------------------------------------

Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t len) const {
  return view_in_context(*this, "narrow", [&] { return with_layout(layout_.narrow(dim, start, len)); });
}

Tensor Tensor::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  return view_in_context(*this, "slice", [&] { return with_layout(layout_.slice(dim, start, end, step)); });
}

Tensor Tensor::select(int64_t dim, int64_t index) const {
  return view_in_context(*this, "select", [&] {
    int d = ops::dim_of("select", *this, dim);
    int64_t size = layout_.dim(d);
    int64_t i = index < 0 ? index + size : index;
    WICK_CHECK(i >= 0 && i < size, IndexError, "select", "index ", index, " out of range for dim ", dim, " of size ",
               size, " (shape ", shape(), ")");
    return with_layout(layout_.narrow(d, i, 1).squeeze(d));
  });
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  return view_in_context(*this, "transpose", [&] { return with_layout(layout_.transpose(dim0, dim1)); });
}

Tensor Tensor::t() const {
  return view_in_context(*this, "t", [&] {
    WICK_CHECK(rank() >= 2, ShapeError, "t", "needs a tensor of rank 2 or more, got shape ", shape());
    return with_layout(layout_.transpose(-2, -1));
  });
}

Tensor Tensor::permute(std::span<const int64_t> dims) const {
  return view_in_context(*this, "permute", [&] { return with_layout(layout_.permute(dims)); });
}

Tensor Tensor::permute(std::initializer_list<int64_t> dims) const {
  return permute(std::span<const int64_t>(dims.begin(), dims.size()));
}

Tensor Tensor::broadcast_as(const Shape& shape) const {
  return view_in_context(*this, "broadcast_as", [&] { return with_layout(layout_.broadcast_as(shape)); });
}

Tensor Tensor::squeeze(int64_t dim) const {
  return view_in_context(*this, "squeeze", [&] { return with_layout(layout_.squeeze(dim)); });
}

Tensor Tensor::squeeze() const {
  ops::check_defined("squeeze", *this);
  Layout l = layout_;
  for (int d = rank() - 1; d >= 0; --d) l = l.squeeze(d);
  return with_layout(l);
}

Tensor Tensor::unsqueeze(int64_t dim) const {
  return view_in_context(*this, "unsqueeze", [&] {
    WICK_CHECK(rank() < kMaxRank, ShapeError, "unsqueeze", "the result would have rank ", rank() + 1,
               ", above wick's maximum rank ", kMaxRank);
    return with_layout(layout_.unsqueeze(dim));
  });
}

Tensor Tensor::reshape(const Shape& shape) const {
  return view_in_context(*this, "reshape", [&] {
    Shape target = shape;
    int infer = -1;
    int64_t known = 1;  // the product of the given sizes, 0 once one of them is 0
    for (int d = 0; d < target.rank(); ++d) {
      if (target[d] == -1) {
        WICK_CHECK(infer < 0, ShapeError, "reshape", "more than one -1 in shape ", shape);
        infer = d;
      } else {
        WICK_CHECK(target[d] >= 0, ShapeError, "reshape", "negative size in shape ", shape);
        known = checked::mul(known, target[d], "reshape", " (shape ", shape, ")");
      }
    }
    if (infer >= 0) {
      WICK_CHECK(known != 0 && numel() % known == 0, ShapeError, "reshape", "cannot reshape ", this->shape(), " (",
                 numel(), " elements) to ", shape);
      target[infer] = numel() / known;
    }
    WICK_CHECK(checked::numel_fits(target), ShapeError, "reshape", "shape ", shape, " has more than 2^63 - 1 elements");
    if (auto view = layout_.reshape(target)) return with_layout(*view);
    return Tensor(copy().storage_, Layout(target), dtype_);
  });
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  return view_in_context(*this, "flatten", [&] {
    if (rank() == 0) return reshape(Shape{1});
    int a = ops::dim_of("flatten", *this, start_dim), b = ops::dim_of("flatten", *this, end_dim);
    WICK_CHECK(a <= b, ShapeError, "flatten", "start dim ", start_dim, " is after end dim ", end_dim, " (shape ",
               shape(), ")");
    Shape s;
    for (int d = 0; d < a; ++d) s.push_back(layout_.dim(d));
    int64_t n = 1;
    for (int d = a; d <= b; ++d) n *= layout_.dim(d);
    s.push_back(n);
    for (int d = b + 1; d < rank(); ++d) s.push_back(layout_.dim(d));
    return reshape(s);
  });
}

std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim) const {
  ops::check_defined("chunk", *this);
  WICK_CHECK(chunks > 0, ShapeError, "chunk", "number of chunks must be positive, got ", chunks, " (", describe(*this),
             ")");
  const int64_t size = this->dim(dim);
  return split(std::max<int64_t>(1, size / chunks + (size % chunks != 0)), dim);
}

std::vector<Tensor> Tensor::split(int64_t split_size, int64_t dim) const {
  ops::check_defined("split", *this);
  WICK_CHECK(split_size > 0, ShapeError, "split", "split size must be positive, got ", split_size, " (",
             describe(*this), ")");
  int64_t size = this->dim(dim);
  std::vector<int64_t> sizes;
  reserve_pieces(sizes, std::max<int64_t>(1, size / split_size + (size % split_size != 0)), "split", *this);
  for (int64_t start = 0; start < size; start += std::min(split_size, size - start))
    sizes.push_back(std::min(split_size, size - start));
  if (sizes.empty()) sizes.push_back(0);
  return split(sizes, dim);
}

std::vector<Tensor> Tensor::split(std::span<const int64_t> sizes, int64_t dim) const {
  ops::check_defined("split", *this);
  int d = ops::dim_of("split", *this, dim);
  int64_t total = 0;
  for (int64_t s : sizes) {
    WICK_CHECK(s >= 0, ShapeError, "split", "negative piece size ", s, " (", describe(*this), ")");
    total = checked::add(total, s, "split", " (piece sizes of ", describe(*this), ")");
  }
  WICK_CHECK(total == layout_.dim(d), ShapeError, "split", "piece sizes add up to ", total, " but dim ", dim,
             " has size ", layout_.dim(d), " (", describe(*this), ")");
  std::vector<Tensor> out;
  reserve_pieces(out, static_cast<int64_t>(sizes.size()), "split", *this);
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(narrow(d, start, s));
    start += s;
  }
  return out;
}

}  // namespace wick
