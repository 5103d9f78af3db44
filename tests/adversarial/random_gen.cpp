// The random loop's generator and inputs (random_calls.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "random_calls.h"

namespace wick::adversarial {

int64_t checked_bytes(const Shape& shape, DType dtype) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  }
  int64_t bytes;
  return __builtin_mul_overflow(n, dtype_size(dtype), &bytes) ? -1 : bytes;
}

int64_t Gen::range(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }

bool Gen::chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

DType Gen::any_dtype() { return kAllDTypes[range(0, kNumDTypes - 1)]; }

DType Gen::float_dtype() {
  return pick(std::vector<DType>{DType::F32, DType::F32, DType::F64, DType::F16, DType::BF16, DType::F8E4M3});
}

DType Gen::index_dtype() { return pick(std::vector<DType>{DType::U32, DType::I64, DType::I32, DType::U8, DType::I16}); }

Shape Gen::shape(int lo, int hi, int64_t max_dim) {
  Shape s;
  const int rank = static_cast<int>(range(lo, hi));
  for (int i = 0; i < rank; ++i) s.push_back(chance(0.05) ? 0 : range(1, max_dim));
  return s;
}

int64_t Gen::hostile() {
  static const std::vector<int64_t> values = {
      -1,         -2,          kI64Min,         kI64Min + 1, -p2(31),    -p2(32), p2(31) - 1, p2(31),
      p2(31) + 1, p2(32) - 1,  p2(32),          p2(32) + 1,  p2(57) + 3, p2(61),  p2(62),     p2(62) + 1,
      kI64Max,    kI64Max - 1, kI64Max / 2 + 1, 3037000499,  0,          1};
  return pick(values);
}

Shape Gen::hostile_shape(DType dtype) {
  for (;;) {
    Shape s;
    const int rank = static_cast<int>(range(1, 4));
    for (int i = 0; i < rank; ++i) s.push_back(chance(0.5) ? hostile() : range(1, 4));
    const int64_t bytes = checked_bytes(s, dtype);
    const bool empty = std::find(s.begin(), s.end(), 0) != s.end();
    if (bytes < 0 || bytes >= kHugeBytes || (empty && bytes == 0)) return s;
  }
}

Shape Gen::huge_view_shape(DType dtype) {
  for (;;) {
    Shape s;
    const int rank = static_cast<int>(range(1, 3));
    for (int i = 0; i < rank; ++i) {
      s.push_back(chance(0.6) ? pick(std::vector<int64_t>{p2(31), p2(32) + 1, p2(57), p2(61), p2(62), kI64Max})
                              : range(1, 3));
    }
    // A tensor's dense bytes must fit in int64 (a view past that is refused when it is made).
    const int64_t bytes = checked_bytes(s, dtype);
    if (bytes >= kHugeBytes) return s;
  }
}

Input Gen::input(DType dtype, const Shape& shape, Values values, bool writable) {
  Input in{dtype, shape};
  in.values = values;
  in.seed = rng_();
  std::vector<Form> forms = {Form::Contiguous, Form::Contiguous, Form::Transposed, Form::Narrowed, Form::Stride2};
  if (!writable) forms.push_back(Form::Broadcast);
  in.form = pick(forms);
  return in;
}

Input Gen::index_input(DType dtype, const Shape& shape, int64_t bound) {
  Input in = input(dtype, shape, Values::Index);
  in.bound = bound;
  return in;
}

Input Gen::huge_input(DType dtype, const Shape& shape) {
  Input in{dtype, shape};
  in.huge = true;
  return in;
}

namespace {

// The dtype's largest value, as an int64 (the index ops' skip sentinel).
int64_t int_max_of(DType dt) {
  switch (dt) {
    case DType::U8: return 255;
    case DType::U32: return 0xffffffffLL;
    case DType::I16: return 32767;
    case DType::I32: return std::numeric_limits<int32_t>::max();
    default: return kI64Max;
  }
}

double float_value(Values values, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  const double x = u(rng);
  switch (values) {
    case Values::Positive: return 0.125 + std::floor(x * 256) / 64;
    case Values::Small: return std::floor(x * 17) - 8;
    case Values::Cond: return x < 0.45 ? 0 : 1;
    case Values::Special:
      if (u(rng) < 0.2) {
        const double specials[] = {std::numeric_limits<double>::quiet_NaN(),
                                   std::numeric_limits<double>::infinity(),
                                   -std::numeric_limits<double>::infinity(),
                                   -0.0,
                                   1e30,
                                   -1e-30,
                                   70000};
        return specials[static_cast<size_t>(x * 7)];
      }
      [[fallthrough]];
    default: return std::floor(x * 384) / 64 - 3;
  }
}

int64_t int_value(DType dt, Values values, int64_t bound, std::mt19937_64& rng) {
  auto in = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const bool unsigned_dt = is_unsigned(dt);
  switch (values) {
    case Values::Positive: return in(1, 50);
    case Values::Small: return unsigned_dt ? in(0, 8) : in(-8, 8);
    case Values::Cond: return in(0, 9) < 5 ? 0 : in(1, 3);
    case Values::Index: {
      const int64_t r = in(0, 99);
      if (r < 4) return int_max_of(dt);                                              // skip
      if (r < 6) return unsigned_dt || in(0, 1) ? std::max<int64_t>(bound, 0) : -1;  // out of range
      if (r < 7 && dt == DType::I64) return in(0, 1) ? kI64Min : kI64Max - 1;        // far out of range
      return bound > 0 ? in(0, bound - 1) : 0;
    }
    default:
      switch (dt) {
        case DType::U8: return in(0, 255);
        case DType::U32: return in(0, 3) ? in(0, 1000) : in(0, 0xffffffffLL);
        case DType::I16: return in(-32768, 32767);
        case DType::I32:
          return in(0, 3) ? in(-1000, 1000)
                          : in(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
        default: return in(0, 3) ? in(-1000, 1000) : in(kI64Min, kI64Max);
      }
  }
}

}  // namespace

Tensor make(const Input& in, Device device) {
  if (in.huge) return broadcast_zero(in.shape, in.dtype, device);
  const int r = in.shape.rank();
  Form form = in.form;
  if (r == 0 || (form == Form::Transposed && r < 2)) form = Form::Contiguous;
  Shape base = in.shape;
  switch (form) {
    case Form::Transposed: std::swap(base[r - 2], base[r - 1]); break;
    case Form::Narrowed: base[r - 1] += 3; break;
    case Form::Stride2: base[r - 1] = 2 * base[r - 1] + 1; break;
    case Form::Broadcast: base[0] = 1; break;
    case Form::Contiguous: break;
  }
  std::mt19937_64 rng(in.seed);
  const auto n = static_cast<size_t>(base.numel());
  Tensor host;
  if (is_float(in.dtype) && in.values != Values::Index) {
    std::vector<double> v(n);
    for (double& x : v) x = float_value(in.values, rng);
    host = Tensor::from_vector(v, base).to_dtype(in.dtype);
  } else {
    std::vector<int64_t> v(n);
    for (int64_t& x : v) x = int_value(in.dtype, in.values, in.bound, rng);
    host = Tensor::from_vector(v, base).to_dtype(in.dtype);
  }
  Tensor t = host.to_device(device);
  switch (form) {
    case Form::Transposed: return t.transpose(r - 2, r - 1);
    case Form::Narrowed: return t.narrow(r - 1, 2, in.shape[r - 1]);
    case Form::Stride2: return t.slice(r - 1, 1, base[r - 1], 2);
    case Form::Broadcast: return t.broadcast_as(in.shape);
    case Form::Contiguous: break;
  }
  return t;
}

}  // namespace wick::adversarial
