// The front end of the quantized-weight ops: the format table, QTensor, and quantize, dequantize
// and qmatmul with their checks, a backend's kernels where it has them, and the host fallback.
#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <iterator>
#include <ostream>
#include <string>
#include <vector>

#include "backend/quant_kernels.h"
#include "core/checked.h"
#include "core/checks.h"
#include "cpu/parallel.h"
#include "quant/quant_ops.h"
#include "wick/ops.h"

namespace wick::quant {

namespace kq = kernels::quant;

// ---- the format table -------------------------------------------------------------------------

namespace {

// QType's values are 0 .. count - 1, in kAllQTypes' order.
constexpr size_t kQTypes = std::size(kAllQTypes);
static_assert(static_cast<size_t>(kAllQTypes[kQTypes - 1]) == kQTypes - 1);

constexpr std::string_view kNames[] = {
#define WICK_X(e, name, ggml) name,
    WICK_FORALL_QTYPES(WICK_X)
#undef WICK_X
};
constexpr int kGgmlTypes[] = {
#define WICK_X(e, name, ggml) ggml,
    WICK_FORALL_QTYPES(WICK_X)
#undef WICK_X
};

}  // namespace

QType detail::check_qtype(const char* op, QType qtype) {
  WICK_CHECK(static_cast<size_t>(qtype) < kQTypes, DTypeError, op, static_cast<unsigned>(qtype),
             " is not a block format (QType's values are 0 to ", kQTypes - 1, ", ", kNames[0], " to ",
             kNames[kQTypes - 1], ")");
  return qtype;
}

std::string_view qtype_name(QType qtype) {
  return kNames[static_cast<size_t>(detail::check_qtype("qtype_name", qtype))];
}

std::optional<QType> parse_qtype(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (QType q : kAllQTypes)
    if (qtype_name(q) == lower) return q;
  return std::nullopt;
}

int ggml_type(QType qtype) { return kGgmlTypes[static_cast<size_t>(detail::check_qtype("ggml_type", qtype))]; }

std::optional<QType> from_ggml_type(int type) {
  for (QType q : kAllQTypes)
    if (ggml_type(q) == type) return q;
  return std::nullopt;
}

int64_t block_values(QType qtype) {
  return kq::dispatch_qtype(detail::check_qtype("block_values", qtype),
                            []<QType Q>() -> int64_t { return kq::Format<Q>::kValues; });
}

int64_t block_bytes(QType qtype) {
  return kq::dispatch_qtype(detail::check_qtype("block_bytes", qtype),
                            []<QType Q>() -> int64_t { return sizeof(typename kq::Format<Q>::Block); });
}

int64_t row_bytes(QType qtype, int64_t cols) {
  detail::check_qtype("row_bytes", qtype);
  const int64_t bv = block_values(qtype);
  WICK_CHECK(cols > 0 && cols % bv == 0, ShapeError, "quant", "a row of ", qtype, " needs a positive multiple of ", bv,
             " values, got ", cols);
  return checked::mul(cols / bv, block_bytes(qtype), "quant", " (a row of ", cols, " values of ", qtype, ")");
}

std::ostream& operator<<(std::ostream& os, QType qtype) {
  return os << kNames[static_cast<size_t>(detail::check_qtype("operator<<", qtype))];
}

// ---- QTensor ----------------------------------------------------------------------------------

namespace {

// rows * row_bytes, checked; the message names the op and the weight's shape.
int64_t total_bytes(const char* op, QType qtype, int64_t rows, int64_t cols) {
  detail::check_qtype(op, qtype);
  WICK_CHECK(rows >= 0, ShapeError, op, "a ", qtype, " weight needs rows >= 0, got ", rows);
  const int64_t bv = block_values(qtype);
  WICK_CHECK(cols > 0 && cols % bv == 0, ShapeError, op, "a ", qtype, " weight of ", rows, " x ", cols,
             " needs cols a positive multiple of ", bv);
  return checked::mul(rows, row_bytes(qtype, cols), op, " (a ", qtype, " weight of ", rows, " x ", cols, ")");
}

std::string describe(const QTensor& w) {
  return ::wick::detail::str_cat("[", w.rows(), ", ", w.cols(), "] ", w.qtype(), " on ", w.device());
}

void check_defined(const char* op, const QTensor& w) {
  WICK_CHECK(w.defined(), Error, op, "the quantized weight is undefined");
}

}  // namespace

QTensor::QTensor(QType qtype, int64_t rows, int64_t cols, const Tensor& bytes) {
  ops::check_defined("QTensor", bytes);
  WICK_CHECK(bytes.dtype() == DType::U8, DTypeError, "QTensor", "the blocks must be a u8 tensor, got ",
             ops::describe(bytes));
  const int64_t n = total_bytes("QTensor", qtype, rows, cols);
  WICK_CHECK(bytes.numel() == n, ShapeError, "QTensor", "a ", qtype, " weight of ", rows, " x ", cols, " takes ", n,
             " bytes, got ", ops::describe(bytes));
  qtype_ = qtype;
  rows_ = rows;
  cols_ = cols;
  // The kernels read the blocks from the start of the storage.
  Tensor c = bytes.contiguous();
  if (c.offset() != 0) c = c.copy();
  bytes_ = c.reshape({rows, row_bytes(qtype, cols)});
}

QTensor QTensor::from_blocks(QType qtype, int64_t rows, int64_t cols, const void* data, int64_t nbytes,
                             Device device) {
  const int64_t n = total_bytes("QTensor::from_blocks", qtype, rows, cols);
  WICK_CHECK(nbytes == n, ShapeError, "QTensor::from_blocks", "a ", qtype, " weight of ", rows, " x ", cols, " takes ",
             n, " bytes, got ", nbytes);
  WICK_CHECK(data != nullptr || n == 0, Error, "QTensor::from_blocks", "null data for ", n, " bytes");
  return QTensor(qtype, rows, cols, Tensor::from_data(data, n, DType::U8, {n}, device));
}

QTensor QTensor::to_device(Device device) const {
  check_defined("QTensor::to_device", *this);
  if (device == this->device()) return *this;
  return QTensor(qtype_, rows_, cols_, plain().bytes_.to_device(device));
}

QTensor QTensor::arrange() const {
  check_defined("QTensor::arrange", *this);
  const QuantKernels* k = ops::backend_of(bytes_).quant();
  if (arranged_ || k == nullptr || rows_ == 0) return *this;
  StoragePtr s = k->arrange(*bytes_.storage(), qtype_, rows_, cols_);
  if (s == nullptr) return *this;
  QTensor a = *this;
  a.bytes_ = ops::wrap(std::move(s), bytes_.shape(), DType::U8);
  a.arranged_ = true;
  return a;
}

QTensor QTensor::plain() const {
  check_defined("QTensor::plain", *this);
  if (!arranged_) return *this;
  QTensor p = *this;
  p.bytes_ = ops::wrap(ops::backend_of(bytes_).quant()->plain(*bytes_.storage(), qtype_, rows_, cols_), bytes_.shape(),
                       DType::U8);
  p.arranged_ = false;
  return p;
}

QTensor QTensor::index_select(const Tensor& ids) const {
  check_defined("QTensor::index_select", *this);
  if (!ids.defined() || ids.rank() != 1 || (ids.dtype() != DType::I64 && ids.dtype() != DType::I32))
    throw ShapeError(
        ::wick::detail::str_cat("QTensor::index_select: ids must be one i64 or i32 dimension, not ",
                                ids.defined() ? ::wick::detail::str_cat(ids.dtype(), " ", ids.shape()) : "undefined"));
  const int64_t n = ids.numel();
  if (!arranged_ || n == 0) return QTensor(qtype_, n, cols_, bytes_.index_select(ids.to_device(device()), 0));
  // The groups of kArrangedRows rows that hold the ids, each once, made plain; then each id's row.
  // Rows past the last whole group lie as they were, after the groups' rows.
  const std::vector<int64_t> id = ids.to_dtype(DType::I64).to_device(Device::cpu()).to_vector<int64_t>();
  const int64_t whole = rows_ / kArrangedRows * kArrangedRows;
  std::vector<int64_t> groups, slot(static_cast<size_t>(whole / kArrangedRows), -1), pick(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = id[static_cast<size_t>(i)];
    if (r < 0 || r >= rows_)
      throw IndexError(::wick::detail::str_cat("QTensor::index_select: row ", r, " (index ", i, ") of a ", qtype_,
                                               " weight of ", rows_, " rows"));
    if (r >= whole) continue;
    int64_t& s = slot[static_cast<size_t>(r / kArrangedRows)];
    if (s < 0) {
      s = static_cast<int64_t>(groups.size());
      groups.push_back(r / kArrangedRows);
    }
    pick[static_cast<size_t>(i)] = s * kArrangedRows + r % kArrangedRows;
  }
  const auto taken = static_cast<int64_t>(groups.size()) * kArrangedRows;
  for (int64_t i = 0; i < n; ++i)
    if (id[static_cast<size_t>(i)] >= whole) pick[static_cast<size_t>(i)] = taken + id[static_cast<size_t>(i)] - whole;
  const int64_t row = quant::row_bytes(qtype_, cols_);
  std::vector<Tensor> parts;
  if (!groups.empty()) {
    QTensor g(qtype_, taken, cols_,
              bytes_.narrow(0, 0, whole)
                  .reshape({whole / kArrangedRows, kArrangedRows * row})
                  .index_select(Tensor::from_vector(groups, {static_cast<int64_t>(groups.size())}, device()), 0));
    g.arranged_ = true;
    parts.push_back(g.plain().bytes_);
  }
  if (whole < rows_) parts.push_back(bytes_.narrow(0, whole, rows_ - whole));
  const Tensor all = parts.size() == 1 ? parts.front() : cat(parts, 0);
  return QTensor(qtype_, n, cols_, all.index_select(Tensor::from_vector(pick, {n}, device()), 0));
}

// ---- quantize ---------------------------------------------------------------------------------

namespace detail {

void dequantize_host(QType qtype, const uint8_t* blocks, int64_t rows, int64_t cols, float* out) {
  kq::dispatch_qtype(qtype, [&]<QType Q>() {
    using F = kq::Format<Q>;
    const auto* b = reinterpret_cast<const typename F::Block*>(blocks);
    const int64_t n = rows * (cols / F::kValues);
    for (int64_t i = 0; i < n; ++i)
      for (int g = 0; g < F::kGroups; ++g) kq::dequantize_group<Q>(b[i], g, out + i * F::kValues + g * F::kGroup);
  });
}

}  // namespace detail

namespace {

// A float as the shortest text that reads back as it: 1e+09, 524160, 3.4028235e+38.
std::string shortest(float v) {
  char buf[32];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

// The error for element i of w (rows of `cols` values), which is not finite or not below `limit`.
[[noreturn]] void refuse_value(const Tensor& w, QType qtype, size_t i, float v, float limit) {
  const size_t cols = static_cast<size_t>(w.dim(1)), row = i / cols, col = i % cols;
  WICK_CHECK(std::isfinite(v), Error, "quantize", "needs finite values; element ", row, ", ", col, " of ",
             ops::describe(w), " is ", v);
  WICK_THROW(Error, "quantize", qtype, " holds magnitudes below ", shortest(limit), ", past which ",
             qtype == QType::Q8_K ? "its values overflow f32" : "its f16 scales overflow", "; element ", row, ", ", col,
             " (row ", row, ", block ", col / static_cast<size_t>(block_values(qtype)), ") of ", ops::describe(w),
             " is ", shortest(v));
}

}  // namespace

QTensor quantize(const Tensor& w, QType qtype) {
  const char* op = "quantize";
  ops::check_defined(op, w);
  WICK_CHECK(w.rank() == 2, ShapeError, op, "needs a 2-D weight (rows, cols), got ", ops::describe(w));
  WICK_CHECK(is_float(w.dtype()) && w.dtype() != DType::F64 && w.dtype() != DType::F8E4M3, DTypeError, op,
             "needs an f32, f16 or bf16 weight, got ", ops::describe(w));
  const int64_t rows = w.dim(0), cols = w.dim(1);
  const int64_t nbytes = total_bytes(op, qtype, rows, cols);
  const std::vector<float> x = w.to_dtype(DType::F32).to_device(Device::cpu()).contiguous().to_vector<float>();
  // Refused rather than saturated: a weight file must hold the model's values, and ggml writes such
  // blocks with an infinite scale (which its loader's ggml_validate_row_data then refuses).
  const float limit = max_magnitude(qtype);
  for (size_t i = 0; i < x.size(); ++i)
    if (!(std::fabs(x[i]) < limit)) [[unlikely]]
      refuse_value(w, qtype, i, x[i], limit);
  std::vector<uint8_t> out(static_cast<size_t>(nbytes));
  const int64_t per_row = cols / block_values(qtype), n = rows * per_row;
  std::atomic<int64_t> first_bad{n};  // the first block whose scales overflowed all the same
  kq::dispatch_qtype(qtype, [&]<QType Q>() {
    using F = kq::Format<Q>;
    auto* b = reinterpret_cast<typename F::Block*>(out.data());
    cpu::parallel_for(n, 64, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        if (detail::quantize_block<Q>(x.data() + i * F::kValues, b[i])) continue;
        int64_t seen = first_bad.load();
        while (i < seen && !first_bad.compare_exchange_weak(seen, i)) {
        }
      }
    });
  });
  if (const int64_t i = first_bad.load(); i < n) {
    const int64_t bv = block_values(qtype);
    float amax = 0.f;
    for (int64_t j = 0; j < bv; ++j) amax = std::max(amax, std::fabs(x[static_cast<size_t>(i * bv + j)]));
    WICK_THROW(Error, op, "row ", i / per_row, ", block ", i % per_row, " of ", ops::describe(w), " (magnitudes up to ",
               shortest(amax), ") gets a ", qtype,
               " scale past f16's range: ggml's least-squares fit degenerates on nearly equal values");
  }
  return QTensor::from_blocks(qtype, rows, cols, out.data(), nbytes, w.device());
}

// ---- dequantize -------------------------------------------------------------------------------

namespace {

const QuantKernels* kernels_for(const Tensor& t, QuantOp op, DType dtype) {
  Backend& b = ops::backend_of(t);
  return b.supports(op, {&dtype, 1}) ? b.quant() : nullptr;
}

void check_float(const char* op, DType dtype, const std::string& what) {
  WICK_CHECK(dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16, DTypeError, op,
             "needs f32, f16 or bf16 for ", what, ", got ", dtype);
}

// The fallback: the blocks to the host, ggml's dequantization there, the values back as f32.
Tensor dequantize_on_host(const QTensor& w) {
  Backend& b = ops::backend_of(w.bytes());
  std::vector<uint8_t> blocks(static_cast<size_t>(w.nbytes()));
  b.to_host(*w.bytes().storage(), static_cast<size_t>(w.bytes().offset()), blocks.size(), blocks.data());
  std::vector<float> values(static_cast<size_t>(w.rows() * w.cols()));
  detail::dequantize_host(w.qtype(), blocks.data(), w.rows(), w.cols(), values.data());
  StoragePtr s = b.from_host(values.data(), values.size() * sizeof(float));
  return ops::wrap(std::move(s), {w.rows(), w.cols()}, DType::F32);
}

}  // namespace

Tensor dequantize(const QTensor& w, DType dtype) {
  const char* op = "dequantize";
  check_defined(op, w);
  check_float(op, dtype, "the result");
  if (w.rows() == 0) return Tensor::zeros({0, w.cols()}, dtype, w.device());
  if (w.arranged()) return dequantize(w.plain(), dtype);
  if (const QuantKernels* k = kernels_for(w.bytes(), QuantOp::Dequantize, dtype))
    return ops::wrap(k->dequantize(*w.bytes().storage(), w.qtype(), w.rows(), w.cols(), dtype), {w.rows(), w.cols()},
                     dtype);
  return dequantize_on_host(w).to_dtype(dtype);
}

// ---- qmatmul ----------------------------------------------------------------------------------

Tensor qmatmul(const Tensor& x, const QTensor& w) {
  const char* op = "qmatmul";
  ops::check_defined(op, x);
  check_defined(op, w);
  check_float(op, x.dtype(), "x " + ops::describe(x));
  WICK_CHECK(x.device() == w.device(), DeviceError, op, "x ", ops::describe(x), " and the weight ", describe(w),
             " are on different devices");
  WICK_CHECK(x.rank() >= 1 && x.dim(-1) == w.cols(), ShapeError, op, "x ", ops::describe(x),
             " must end in the weight's ", w.cols(), " columns (weight ", describe(w), ")");
  Shape out_shape = x.shape();
  out_shape[out_shape.rank() - 1] = w.rows();
  ops::check_output(op, out_shape, x.dtype(), {&x});
  const int64_t m = x.numel() / w.cols();
  if (m == 0 || w.rows() == 0) return Tensor::zeros(out_shape, x.dtype(), x.device());
  const Tensor x2 = x.contiguous().reshape({m, w.cols()});
  const QuantKernels* k = kernels_for(x, QuantOp::Matmul, x.dtype());
  if (w.arranged() && k != nullptr)
    return ops::wrap(k->matmul_arranged(ops::view_of(x2), *w.bytes().storage(), w.qtype(), w.rows(), w.cols()),
                     out_shape, x.dtype());
  if (w.arranged()) return qmatmul(x, w.plain());
  if (k != nullptr)
    return ops::wrap(k->matmul(ops::view_of(x2), *w.bytes().storage(), w.qtype(), w.rows(), w.cols()), out_shape,
                     x.dtype());
  // The composition (the oracle of the kernels): the weight's exact values, the product in f32.
  const Tensor wf = dequantize(w, DType::F32);
  return x2.to_dtype(DType::F32).matmul(wf.t()).to_dtype(x.dtype()).reshape(out_shape);
}

// ---- qmatmul_grouped ---------------------------------------------------------------------------

Tensor qmatmul_grouped(const Tensor& x, const QTensor& w, int64_t experts, const Tensor& groups, int64_t max_rows) {
  const char* op = "qmatmul_grouped";
  ops::check_defined(op, x);
  check_defined(op, w);
  ops::check_defined(op, groups);
  check_float(op, x.dtype(), "x " + ops::describe(x));
  WICK_CHECK(x.device() == w.device(), DeviceError, op, "x ", ops::describe(x), " and the weights ", describe(w),
             " are on different devices");
  ops::check_same_device(op, {&x, &groups});
  WICK_CHECK(x.rank() == 2 && x.dim(1) == w.cols(), ShapeError, op, "x ", ops::describe(x), " must be (rows, ",
             w.cols(), "): the weights' columns (", describe(w), ")");
  WICK_CHECK(experts >= 1 && w.rows() % experts == 0, ShapeError, op, "the weights ", describe(w), " do not stack ",
             experts, " experts of equal rows");
  WICK_CHECK(groups.dtype() == DType::I64 && groups.rank() == 2 && groups.dim(1) == 3, ShapeError, op,
             "groups must be (g, 3) i64 ([expert, first row, end row) each), got ", ops::describe(groups));
  WICK_CHECK(max_rows >= 0, ShapeError, op, "max_rows = ", max_rows, " is negative");
  const int64_t p = x.dim(0), rows = w.rows() / experts;
  ops::check_output(op, Shape({p, rows}), x.dtype(), {&x});
  if (p == 0 || rows == 0 || groups.dim(0) == 0) return Tensor::zeros({p, rows}, x.dtype(), x.device());
  const QuantKernels* k = kernels_for(x, QuantOp::MatmulGrouped, x.dtype());
  if (k != nullptr) {
    // One row expanded over all (a stride of 0: a single token's pairs) is read in place.
    const Tensor xc = x.dim(0) > 1 && x.strides()[0] == 0 && x.strides()[1] == 1 ? x : x.contiguous(),
                 gc = groups.contiguous();
    if (StoragePtr out = k->matmul_grouped(ops::view_of(xc), *w.bytes().storage(), w.qtype(), rows, w.cols(), experts,
                                           ops::view_of(gc), max_rows, w.arranged()))
      return ops::wrap(std::move(out), {p, rows}, x.dtype());
  }
  // The composition (the oracle of the kernels): each group's rows through qmatmul with its
  // expert's weight.
  const std::vector<int64_t> g = ops::host_groups(op, groups, experts, p);
  const QTensor plain = w.plain();
  Tensor out = Tensor::zeros({p, rows}, x.dtype(), x.device());
  for (size_t i = 0; i < g.size(); i += 3) {
    const int64_t e = g[i], first = g[i + 1], end = g[i + 2];
    if (first == end) continue;
    const QTensor we(plain.qtype(), rows, plain.cols(), plain.bytes().narrow(0, e * rows, rows));
    out.slice_set(qmatmul(x.narrow(0, first, end - first), we), 0, first);
  }
  return out;
}

}  // namespace wick::quant
