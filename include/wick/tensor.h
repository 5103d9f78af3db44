// Tensor: a handle to (shared storage, layout, dtype). Copying a Tensor copies the handle; views
// share storage; ops return new contiguous tensors. Names follow Candle and PyTorch.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "wick/device.h"
#include "wick/dtype.h"
#include "wick/error.h"
#include "wick/layout.h"
#include "wick/nn_options.h"
#include "wick/scalar.h"
#include "wick/shape.h"

namespace wick {

class Storage;

class Tensor {
 public:
  Tensor() = default;  // undefined: every op on it throws
  Tensor(std::shared_ptr<Storage> storage, Layout layout, DType dtype);

  // ---- creation ---------------------------------------------------------------------------
  // Copies `data` (row-major, shape.numel() elements) to a new tensor on `device`.
  template <typename T>
  static Tensor from_vector(const std::vector<T>& data, const Shape& shape, Device device = Device::cpu()) {
    return from_data(data.data(), static_cast<int64_t>(data.size()), dtype_of<T>, shape, device);
  }
  // The same from a braced list: Tensor::from_vector({1.f, 2.f}, {2}).
  template <typename T>
  static Tensor from_vector(std::initializer_list<T> data, const Shape& shape, Device device = Device::cpu()) {
    return from_data(data.begin(), static_cast<int64_t>(data.size()), dtype_of<T>, shape, device);
  }
  static Tensor from_data(const void* data, int64_t count, DType dtype, const Shape& shape,
                          Device device = Device::cpu());
  // A tensor over memory that something else owns, without a copy (DLPack, the C API and the
  // Python module use it): `data` is the address of element 0 on `device` (device memory for a
  // GPU), aligned to the dtype's size; `strides` are in elements, non-negative, one per dim.
  // `owner` is kept alive until the last tensor or view over this memory is gone, and wick never
  // frees the memory itself. Writes through wick's in-place ops land in that memory.
  static Tensor from_blob(void* data, const Shape& shape, const Strides& strides, DType dtype, Device device,
                          std::shared_ptr<const void> owner);
  // A rank-0 tensor holding `value` converted to `dtype`.
  static Tensor scalar(Scalar value, DType dtype, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor ones(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, Scalar value, DType dtype = DType::F32, Device device = Device::cpu());
  // start, start+step, ... below end (above end for a negative step). Integer dtypes count in
  // 64-bit integers, float dtypes in f64.
  static Tensor arange(Scalar start, Scalar end, Scalar step, DType dtype, Device device = Device::cpu());
  static Tensor arange(int64_t end, DType dtype = DType::I64, Device device = Device::cpu());
  // n x n identity.
  static Tensor eye(int64_t n, DType dtype = DType::F32, Device device = Device::cpu());
  // Uniform in [lo, up) computed in f32 (f64 for f64), then rounded to the dtype; normal with
  // mean and std. Float dtypes only. Numbers come from the device's Philox generator
  // (manual_seed), the same on every backend.
  static Tensor rand_uniform(const Shape& shape, double lo = 0.0, double up = 1.0, DType dtype = DType::F32,
                             Device device = Device::cpu());
  static Tensor rand_normal(const Shape& shape, double mean = 0.0, double std = 1.0, DType dtype = DType::F32,
                            Device device = Device::cpu());
  Tensor zeros_like() const;
  Tensor ones_like() const;
  Tensor full_like(Scalar value) const;
  Tensor rand_uniform_like(double lo = 0.0, double up = 1.0) const;
  Tensor rand_normal_like(double mean = 0.0, double std = 1.0) const;

  // ---- inspection -------------------------------------------------------------------------
  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return layout_.shape(); }
  const Strides& strides() const { return layout_.strides(); }
  const Layout& layout() const { return layout_; }
  int64_t offset() const { return layout_.offset(); }
  int rank() const { return layout_.rank(); }
  int64_t dim(int64_t i) const;  // negative counts from the end
  int64_t numel() const { return layout_.numel(); }
  DType dtype() const { return dtype_; }
  Device device() const;
  bool is_contiguous() const { return layout_.is_contiguous(); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  // The address of element 0 (the storage's memory plus offset()) on the tensor's device: device
  // memory for a GPU tensor. Valid while a tensor over the storage lives; work queued on a GPU may
  // still be writing it (synchronize, or order on native_stream(device()), before reading).
  void* data_ptr() const;
  std::string to_string() const;  // "Tensor[2, 3] f32 cpu"

  // ---- data out ---------------------------------------------------------------------------
  // All elements in row-major order; T must be the tensor's element type.
  template <typename T>
  std::vector<T> to_vector() const {
    std::vector<T> out;
    host_buffer(out, dtype_of<T>, "to_vector");
    copy_to_host(out.data(), dtype_of<T>);
    return out;
  }
  // The single element of a tensor with numel() == 1.
  template <typename T>
  T item() const {
    T out{};
    copy_item_to_host(&out, dtype_of<T>);
    return out;
  }
  Tensor to_dtype(DType dtype) const;  // casts: see docs/numerics.md
  Tensor to_device(Device device) const;
  Tensor contiguous() const;  // itself when already contiguous
  Tensor copy() const;        // always a new contiguous tensor

  // ---- views (no data moves) ----------------------------------------------------------------
  Tensor narrow(int64_t dim, int64_t start, int64_t len) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;  // narrow to one and drop the dim
  Tensor get(int64_t index) const { return select(0, index); }
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;  // swaps the last two dims (rank >= 2)
  Tensor permute(std::span<const int64_t> dims) const;
  Tensor permute(std::initializer_list<int64_t> dims) const;
  Tensor broadcast_as(const Shape& shape) const;
  Tensor expand(const Shape& shape) const { return broadcast_as(shape); }
  Tensor squeeze(int64_t dim) const;
  Tensor squeeze() const;  // every size-1 dim
  Tensor unsqueeze(int64_t dim) const;
  // A view when the elements are laid out for it (always when contiguous), else a copy. One dim
  // may be -1: it is inferred.
  Tensor reshape(const Shape& shape) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor flatten_all() const { return flatten(0, -1); }
  // `chunks` pieces along dim, of size ceil(dim / chunks) (the last may be smaller).
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  // Pieces of split_size along dim (the last may be smaller), or of the given sizes.
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> split(std::span<const int64_t> sizes, int64_t dim = 0) const;

  // ---- elementwise (numpy broadcasting; both operands of one dtype) ---------------------------
  Tensor add(const Tensor& rhs) const;
  Tensor sub(const Tensor& rhs) const;
  Tensor mul(const Tensor& rhs) const;
  Tensor div(const Tensor& rhs) const;
  Tensor maximum(const Tensor& rhs) const;
  Tensor minimum(const Tensor& rhs) const;
  Tensor add(Scalar rhs) const;
  Tensor sub(Scalar rhs) const;
  Tensor mul(Scalar rhs) const;
  Tensor div(Scalar rhs) const;
  Tensor maximum(Scalar rhs) const;
  Tensor minimum(Scalar rhs) const;

  Tensor exp() const;
  Tensor log() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor tanh() const;
  Tensor abs() const;
  Tensor neg() const;
  Tensor recip() const;
  Tensor sqr() const;
  Tensor sqrt() const;
  Tensor gelu() const;  // tanh approximation
  Tensor gelu_erf() const;
  Tensor erf() const;
  Tensor relu() const;
  Tensor silu() const;
  Tensor sigmoid() const;
  Tensor floor() const;
  Tensor ceil() const;
  Tensor round() const;  // ties away from zero
  Tensor sign() const;

  Tensor affine(double mul, double add) const;  // x * mul + add
  Tensor powf(double exponent) const;
  Tensor elu(double alpha) const;
  Tensor clamp(Scalar lo, Scalar hi) const;

  // Comparisons give u8 (1 true, 0 false).
  Tensor eq(const Tensor& rhs) const;
  Tensor ne(const Tensor& rhs) const;
  Tensor lt(const Tensor& rhs) const;
  Tensor le(const Tensor& rhs) const;
  Tensor gt(const Tensor& rhs) const;
  Tensor ge(const Tensor& rhs) const;
  Tensor eq(Scalar rhs) const;
  Tensor ne(Scalar rhs) const;
  Tensor lt(Scalar rhs) const;
  Tensor le(Scalar rhs) const;
  Tensor gt(Scalar rhs) const;
  Tensor ge(Scalar rhs) const;
  // This tensor (an integer dtype) is the condition: nonzero picks on_true.
  Tensor where_cond(const Tensor& on_true, const Tensor& on_false) const;

  // ---- reductions ---------------------------------------------------------------------------
  Tensor sum(const Dims& dims, bool keepdim = false) const;
  Tensor sum(int64_t dim, bool keepdim = false) const;
  Tensor sum() const;  // over every dim, rank 0
  Tensor mean(const Dims& dims, bool keepdim = false) const;
  Tensor mean(int64_t dim, bool keepdim = false) const;
  Tensor mean() const;
  Tensor max(const Dims& dims, bool keepdim = false) const;
  Tensor max(int64_t dim, bool keepdim = false) const;
  Tensor max() const;
  Tensor min(const Dims& dims, bool keepdim = false) const;
  Tensor min(int64_t dim, bool keepdim = false) const;
  Tensor min() const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;  // u32, ties to the first index
  Tensor argmin(int64_t dim, bool keepdim = false) const;
  // Unbiased variance (divides by n - 1).
  Tensor var(const Dims& dims, bool keepdim = false) const;
  Tensor var(int64_t dim, bool keepdim = false) const;
  Tensor cumsum(int64_t dim) const;
  // Indices (u32) that sort the last dim; stable: equal values keep their order.
  Tensor argsort(bool ascending = true) const;
  std::pair<Tensor, Tensor> sort(bool ascending = true) const;  // (values, indices)

  // ---- matmul, convolution, pooling, upsampling (float dtypes; max_pool2d and nearest
  // upsampling also integers) ---------------------------------------------------------------
  // (..., m, k) x (..., k, n) -> (..., m, n), batch dims broadcast (numpy). A rank-1 operand is
  // a row (left) or column (right) vector whose dim is dropped from the result, as in PyTorch.
  // Transposed views are used in place, other strided operands copied internally.
  Tensor matmul(const Tensor& rhs) const;
  Tensor dot(const Tensor& rhs) const;  // rank 1 . rank 1 -> rank 0
  Tensor mv(const Tensor& vec) const;   // (m, k) . (k) -> (m)
  // x (N, C_in, L) with kernel (C_out, C_in / groups, K) -> (N, C_out, L_out),
  // L_out = (L + 2 padding - dilation (K - 1) - 1) / stride + 1.
  Tensor conv1d(const Tensor& kernel, const Conv1dOptions& options = {}) const;
  // x (N, C_in, L) with kernel (C_in, C_out / groups, K) -> (N, C_out, L_out),
  // L_out = (L - 1) stride - 2 padding + dilation (K - 1) + output_padding + 1.
  Tensor conv_transpose1d(const Tensor& kernel, const Conv1dOptions& options = {}) const;
  // x (N, C_in, H, W) with kernel (C_out, C_in / groups, KH, KW), per axis as conv1d.
  Tensor conv2d(const Tensor& kernel, const Conv2dOptions& options = {}) const;
  Tensor conv_transpose2d(const Tensor& kernel, const Conv2dOptions& options = {}) const;
  // x (N, C, H, W); windows of `kernel` every `stride` (default: the kernel), no padding, floor
  // output size. avg divides by the window size; max propagates NaN.
  Tensor avg_pool2d(Pair kernel) const { return avg_pool2d(kernel, kernel); }
  Tensor avg_pool2d(Pair kernel, Pair stride) const;
  Tensor max_pool2d(Pair kernel) const { return max_pool2d(kernel, kernel); }
  Tensor max_pool2d(Pair kernel, Pair stride) const;
  // x (N, C, L) -> (N, C, size); source index min(L - 1, floor(i L / size)).
  Tensor upsample_nearest1d(int64_t size) const;
  Tensor upsample_nearest2d(int64_t height, int64_t width) const;
  // PyTorch's bilinear interpolation to a size, or by scale factors (size floor(in * scale)).
  Tensor upsample_bilinear2d(int64_t height, int64_t width, bool align_corners = false) const;
  Tensor upsample_bilinear2d_scale(double scale_h, double scale_w, bool align_corners = false) const;

  // ---- indexing -----------------------------------------------------------------------------
  // `ids` hold indices of an integer dtype; the dtype's maximum value is a "skip" sentinel.
  Tensor index_select(const Tensor& ids, int64_t dim) const;
  Tensor gather(const Tensor& ids, int64_t dim) const;
  Tensor scatter(const Tensor& ids, const Tensor& src, int64_t dim) const;
  Tensor scatter_add(const Tensor& ids, const Tensor& src, int64_t dim) const;
  Tensor index_add(const Tensor& ids, const Tensor& src, int64_t dim) const;
  Tensor pad_with_zeros(int64_t dim, int64_t left, int64_t right) const;

  // ---- in place (writes through views into the shared storage) --------------------------------
  void scatter_set(const Tensor& ids, const Tensor& src, int64_t dim);
  void scatter_add_set(const Tensor& ids, const Tensor& src, int64_t dim);
  // Writes `src` into this tensor's elements start.. along dim.
  void slice_set(const Tensor& src, int64_t dim, int64_t start);
  void const_set(Scalar value);
  void fill(Scalar value) { const_set(value); }
  void zero() { const_set(0); }
  // Writes `src` (broadcast to this shape, same dtype) into this tensor's elements.
  void copy_from(const Tensor& src);

 private:
  void copy_to_host(void* dst, DType expected, const char* op = "to_vector") const;
  // Sizes `out` to hold every element, after checking the dtype; a buffer the host cannot give
  // is an OutOfMemoryError naming op, never std::bad_alloc or std::length_error.
  template <typename V>
  void host_buffer(V& out, DType expected, const char* op) const {
    check_host_copy(expected, op);
    try {
      out.resize(static_cast<size_t>(numel()));
    } catch (const std::exception&) {
      throw_host_out_of_memory(op);
    }
  }
  void check_host_copy(DType expected, const char* op) const;
  [[noreturn]] void throw_host_out_of_memory(const char* op) const;
  void copy_item_to_host(void* dst, DType expected) const;
  Tensor with_layout(Layout layout) const { return Tensor(storage_, std::move(layout), dtype_); }

  std::shared_ptr<Storage> storage_;
  Layout layout_;
  DType dtype_ = DType::F32;
};

// The values as PyTorch prints them, summarised past 1000 elements (the first and last three
// along each longer dim), then dtype and device: "tensor([1.5000, 2.0000], dtype=f32)".
// to_string() gives the one-line summary without values.
std::ostream& operator<<(std::ostream& os, const Tensor& t);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(Scalar a, const Tensor& b);
Tensor operator-(const Tensor& a);

}  // namespace wick
