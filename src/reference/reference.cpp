// Reference memory, copies and elementwise ops.
#include "reference/reference.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>

#include "reference/element.h"
#include "reference/index_iter.h"
#include "wick/error.h"

namespace wick::reference {

namespace {

using F = long double;

bool nan(F x) { return std::isnan(x); }

// Two's complement arithmetic on int64 without undefined overflow; the result is wrapped to the
// dtype's width when stored.
int64_t add_wrap(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t sub_wrap(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
int64_t mul_wrap(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

F unary_float(UnaryOp op, F x) {
  const double d = static_cast<double>(x);
  switch (op) {
    case UnaryOp::Exp: return std::exp(d);
    case UnaryOp::Log: return std::log(d);
    case UnaryOp::Sin: return std::sin(d);
    case UnaryOp::Cos: return std::cos(d);
    case UnaryOp::Tanh: return std::tanh(d);
    case UnaryOp::Abs: return std::fabs(x);
    case UnaryOp::Neg: return -x;
    case UnaryOp::Recip: return 1.0 / d;
    case UnaryOp::Sqr: return d * d;
    case UnaryOp::Sqrt: return std::sqrt(d);
    case UnaryOp::Gelu:
      return 0.5 * d * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (d + 0.044715 * d * d * d)));
    case UnaryOp::GeluErf: return 0.5 * d * (1.0 + std::erf(d / std::numbers::sqrt2));
    case UnaryOp::Erf: return std::erf(d);
    case UnaryOp::Relu: return (x > 0 || nan(x)) ? x : 0;
    case UnaryOp::Silu: return d / (1.0 + std::exp(-d));
    case UnaryOp::Sigmoid: return 1.0 / (1.0 + std::exp(-d));
    case UnaryOp::Floor: return std::floor(x);
    case UnaryOp::Ceil: return std::ceil(x);
    case UnaryOp::Round: return std::round(x);
    case UnaryOp::Sign: return x > 0 ? 1 : (x < 0 ? -1 : x);
  }
  return 0;
}

int64_t unary_int(UnaryOp op, int64_t x) {
  switch (op) {
    case UnaryOp::Abs: return x < 0 ? sub_wrap(0, x) : x;
    case UnaryOp::Neg: return sub_wrap(0, x);
    case UnaryOp::Sqr: return mul_wrap(x, x);
    case UnaryOp::Relu: return x < 0 ? 0 : x;
    case UnaryOp::Sign: return x > 0 ? 1 : (x < 0 ? -1 : 0);
    default: return x;  // floor, ceil, round of an integer
  }
}

// In f64: correctly rounded for f64, and one innocuous extra rounding for the narrower floats.
double binary_float(BinaryOp op, double a, double b) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
    case BinaryOp::Maximum: return std::isnan(a) ? a : std::isnan(b) ? b : (a < b ? b : a);
    case BinaryOp::Minimum: return std::isnan(a) ? a : std::isnan(b) ? b : (b < a ? b : a);
  }
  return 0;
}

int64_t binary_int(BinaryOp op, int64_t a, int64_t b) {
  switch (op) {
    case BinaryOp::Add: return add_wrap(a, b);
    case BinaryOp::Sub: return sub_wrap(a, b);
    case BinaryOp::Mul: return mul_wrap(a, b);
    case BinaryOp::Div:
      if (b == 0) return 0;
      if (b == -1) return sub_wrap(0, a);
      return a / b;  // truncates toward zero
    case BinaryOp::Maximum: return a < b ? b : a;
    case BinaryOp::Minimum: return b < a ? b : a;
  }
  return 0;
}

template <typename V>
bool compare(CmpOp op, V a, V b) {
  switch (op) {
    case CmpOp::Eq: return a == b;
    case CmpOp::Ne: return a != b;
    case CmpOp::Lt: return a < b;
    case CmpOp::Le: return a <= b;
    case CmpOp::Gt: return a > b;
    case CmpOp::Ge: return a >= b;
  }
  return false;
}

// out[i] = f(x[i]) for every multi-index of x's shape, into a new contiguous storage.
template <typename Fn>
StoragePtr map1(Backend& b, const View& x, DType out_dtype, Fn&& f) {
  const Shape& shape = x.layout.shape();
  StoragePtr out = b.alloc(out_dtype, shape.numel());
  Elements in(x.storage, x.dtype), o(*out, out_dtype);
  int64_t pos = 0;
  for (IndexIter it(shape); !it.done(); it.next()) f(o, pos++, in, offset_of(x.layout, it.index()));
  return out;
}

}  // namespace

ReferenceBackend& reference_backend() {
  static ReferenceBackend backend;
  return backend;
}

// ---- memory -------------------------------------------------------------------------------

StoragePtr ReferenceBackend::alloc(size_t nbytes) {
  auto* p = new unsigned char[nbytes > 0 ? nbytes : 1];
  return std::make_shared<Storage>(this, p, nbytes);
}

void ReferenceBackend::release(void* data, size_t) noexcept { delete[] static_cast<unsigned char*>(data); }

StoragePtr ReferenceBackend::from_host(const void* src, size_t nbytes) {
  StoragePtr s = alloc(nbytes);
  if (nbytes) std::memcpy(s->data(), src, nbytes);
  return s;
}

void ReferenceBackend::to_host(const Storage& src, size_t byte_offset, size_t nbytes, void* dst) {
  if (nbytes) std::memcpy(dst, static_cast<const unsigned char*>(src.data()) + byte_offset, nbytes);
}

// ---- copies -------------------------------------------------------------------------------

void ReferenceBackend::copy_strided(const View& src, const MutView& dst) {
  Elements in(src.storage, src.dtype), out(dst.storage, dst.dtype);
  for (IndexIter it(src.layout.shape()); !it.done(); it.next())
    out.copy_from(offset_of(dst.layout, it.index()), in, offset_of(src.layout, it.index()));
}

void ReferenceBackend::copy2d(const Storage& src, Storage& dst, DType dtype, const Copy2dParams& p) {
  Elements in(src, dtype), out(dst, dtype);
  for (int64_t r = 0; r < p.rows; ++r)
    for (int64_t c = 0; c < p.cols; ++c)
      out.copy_from(p.dst_offset + r * p.dst_stride + c, in, p.src_offset + r * p.src_stride + c);
}

void ReferenceBackend::const_set(const MutView& dst, Scalar value) {
  Elements out(dst.storage, dst.dtype);
  for (IndexIter it(dst.layout.shape()); !it.done(); it.next()) {
    int64_t off = offset_of(dst.layout, it.index());
    if (value.is_integral())
      out.set_from_i(off, value.int_value());
    else
      out.set_from_f(off, value.to_double());
  }
}

// ---- elementwise --------------------------------------------------------------------------

StoragePtr ReferenceBackend::cast(const View& x, DType to) {
  return map1(*this, x, to, [&](const Elements& o, int64_t i, const Elements& in, int64_t j) {
    if (is_float(x.dtype))
      o.set_from_f(i, in.get_f(j));
    else
      o.set_from_i(i, in.get_i(j));
  });
}

StoragePtr ReferenceBackend::affine(const View& x, double mul, double add) {
  return map1(*this, x, x.dtype, [&](const Elements& o, int64_t i, const Elements& in, int64_t j) {
    if (is_float(x.dtype))
      o.set_f(i, static_cast<F>(static_cast<double>(in.get_f(j)) * mul + add));
    else
      o.set_from_f(i, static_cast<F>(static_cast<double>(in.get_i(j)) * mul + add));
  });
}

StoragePtr ReferenceBackend::powf(const View& x, double exponent) {
  return map1(*this, x, x.dtype, [&](const Elements& o, int64_t i, const Elements& in, int64_t j) {
    o.set_f(i, std::pow(static_cast<double>(in.get_f(j)), exponent));
  });
}

StoragePtr ReferenceBackend::elu(const View& x, double alpha) {
  return map1(*this, x, x.dtype, [&](const Elements& o, int64_t i, const Elements& in, int64_t j) {
    double v = static_cast<double>(in.get_f(j));
    o.set_f(i, v > 0 ? v : alpha * std::expm1(v));
  });
}

StoragePtr ReferenceBackend::unary(UnaryOp op, const View& x) {
  return map1(*this, x, x.dtype, [&](const Elements& o, int64_t i, const Elements& in, int64_t j) {
    if (is_float(x.dtype))
      o.set_f(i, unary_float(op, in.get_f(j)));
    else
      o.set_i(i, unary_int(op, in.get_i(j)));
  });
}

StoragePtr ReferenceBackend::binary(BinaryOp op, const View& a, const View& b) {
  Elements eb(b.storage, b.dtype);
  int64_t pos = 0;
  StoragePtr out = alloc(a.dtype, a.layout.numel());
  Elements ea(a.storage, a.dtype), o(*out, a.dtype);
  for (IndexIter it(a.layout.shape()); !it.done(); it.next(), ++pos) {
    int64_t ia = offset_of(a.layout, it.index()), ib = offset_of(b.layout, it.index());
    if (is_float(a.dtype))
      o.set_f(pos, binary_float(op, static_cast<double>(ea.get_f(ia)), static_cast<double>(eb.get_f(ib))));
    else
      o.set_i(pos, binary_int(op, ea.get_i(ia), eb.get_i(ib)));
  }
  return out;
}

StoragePtr ReferenceBackend::cmp(CmpOp op, const View& a, const View& b) {
  int64_t pos = 0;
  StoragePtr out = alloc(DType::U8, a.layout.numel());
  Elements ea(a.storage, a.dtype), eb(b.storage, b.dtype), o(*out, DType::U8);
  for (IndexIter it(a.layout.shape()); !it.done(); it.next(), ++pos) {
    int64_t ia = offset_of(a.layout, it.index()), ib = offset_of(b.layout, it.index());
    bool r = is_float(a.dtype) ? compare(op, ea.get_f(ia), eb.get_f(ib)) : compare(op, ea.get_i(ia), eb.get_i(ib));
    o.set_i(pos, r ? 1 : 0);
  }
  return out;
}

StoragePtr ReferenceBackend::where(const View& cond, const View& on_true, const View& on_false) {
  int64_t pos = 0;
  StoragePtr out = alloc(on_true.dtype, on_true.layout.numel());
  Elements c(cond.storage, cond.dtype), t(on_true.storage, on_true.dtype), f(on_false.storage, on_false.dtype),
      o(*out, on_true.dtype);
  for (IndexIter it(on_true.layout.shape()); !it.done(); it.next(), ++pos) {
    bool pick = c.get_i(offset_of(cond.layout, it.index())) != 0;
    if (pick)
      o.copy_from(pos, t, offset_of(on_true.layout, it.index()));
    else
      o.copy_from(pos, f, offset_of(on_false.layout, it.index()));
  }
  return out;
}

}  // namespace wick::reference
