// rope, rope_i and rope_thd (rotary position embeddings), and rope_tables, their cos and sin.
#include <cmath>
#include <numbers>
#include <utility>
#include <vector>

#include "backend/host_memory.h"
#include "backend/registry.h"
#include "nn/nn_ops.h"
#include "wick/nn.h"
#include "wick/ops.h"

namespace wick::nn {

void detail::check_rope(const char* op, NnOp nop, const Tensor& x, const Tensor& cos, const Tensor& sin, bool thd,
                        const char* name) {
  detail::check_input(op, nop, x);
  WICK_CHECK(x.rank() == 4, ShapeError, op, name, " must have rank 4, ", thd ? "(b, t, h, d)" : "(b, h, t, d)",
             ", got ", ops::describe(x));
  const int64_t d = x.dim(3), t = x.dim(thd ? 1 : 2);
  WICK_CHECK(d % 2 == 0, ShapeError, op, "the head size d (", name, "'s last dim) must be even, got ",
             ops::describe(x));
  for (const auto& [what, table] : {std::pair{"cos", &cos}, std::pair{"sin", &sin}}) {
    ops::check_defined(op, *table);
    ops::check_same_device(op, {&x, table});
    WICK_CHECK(table->dtype() == x.dtype(), DTypeError, op, what, " ", ops::describe(*table),
               " must have the dtype of ", name, " ", ops::describe(x));
    WICK_CHECK(table->rank() == 2 && table->dim(0) == t && table->dim(1) == d / 2, ShapeError, op, what, " ",
               ops::describe(*table), " must have shape [", t, ", ", d / 2, "] (t, d/2) for ", name, " ",
               ops::describe(x));
  }
  ops::check_output(op, x.shape(), x.dtype(), {&x, &cos, &sin});
}

namespace {

// The composition (the oracle of the fused kernels), in the math type: the first elements a and
// second elements b of the pairs as strided views of x, then (a c - b s, a s + b c) put back in
// place.
Tensor rope_composed(const Tensor& x, const Tensor& cos, const Tensor& sin, RopePairs pairs, bool thd) {
  const DType m = detail::math_dtype(x.dtype());
  const int64_t d = x.dim(3), half = d / 2;
  const Tensor xm = x.to_dtype(m);
  Tensor c = cos.to_dtype(m), s = sin.to_dtype(m);
  if (thd) {  // (t, 1, d/2) against (b, t, h, d/2)
    c = c.unsqueeze(1);
    s = s.unsqueeze(1);
  }
  const bool interleaved = pairs == RopePairs::Interleaved;
  const Tensor a = interleaved ? xm.slice(3, 0, d, 2) : xm.narrow(3, 0, half);
  const Tensor b = interleaved ? xm.slice(3, 1, d, 2) : xm.narrow(3, half, half);
  const Tensor first = a.mul(c).sub(b.mul(s)), second = a.mul(s).add(b.mul(c));
  // Interleaved: (..., d/2, 2) read as (..., d).
  const Tensor out = interleaved ? stack({first, second}, 4).reshape(x.shape()) : cat({first, second}, 3);
  return out.to_dtype(x.dtype());
}

Tensor rope_op(const char* op, NnOp nop, const Tensor& x, const Tensor& cos, const Tensor& sin) {
  const bool thd = nop == NnOp::RopeThd;
  const RopePairs pairs = nop == NnOp::RopeI ? RopePairs::Interleaved : RopePairs::Halves;
  detail::check_rope(op, nop, x, cos, sin, thd);
  if (x.numel() == 0) return Tensor::zeros(x.shape(), x.dtype(), x.device());
  if (const NnKernels* k = detail::fused(nop, x)) {
    return ops::wrap(k->rope(ops::view_of(x), ops::view_of(cos), ops::view_of(sin), pairs, thd), x.shape(), x.dtype());
  }
  return rope_composed(x, cos, sin, pairs, thd);
}

void check_llama3(const char* op, const RopeScaling& s) {
  WICK_CHECK(std::isfinite(s.factor) && s.factor > 0, ShapeError, op,
             "llama3 scaling: factor must be finite and positive, got ", s.factor);
  WICK_CHECK(std::isfinite(s.low_freq_factor) && std::isfinite(s.high_freq_factor) && s.low_freq_factor > 0 &&
                 s.high_freq_factor > s.low_freq_factor,
             ShapeError, op,
             "llama3 scaling: low_freq_factor and high_freq_factor must be finite with 0 < low < high, got ",
             s.low_freq_factor, " and ", s.high_freq_factor);
  WICK_CHECK(s.original_max_position > 0, ShapeError, op,
             "llama3 scaling: original_max_position must be positive, got ", s.original_max_position);
}

// Llama 3.1's rescaling of one inverse frequency (rad per position), as Hugging Face transformers'
// _compute_llama3_parameters: long wavelengths slowed by `factor`, short ones kept, a linear blend
// in 1 / wavelength between.
double llama3_inv_freq(double inv_freq, const RopeScaling& s) {
  const double orig = static_cast<double>(s.original_max_position);
  const double wavelen = 2 * std::numbers::pi / inv_freq;
  if (wavelen < orig / s.high_freq_factor) return inv_freq;
  if (wavelen > orig / s.low_freq_factor) return inv_freq / s.factor;
  const double smooth = (orig / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  return (1 - smooth) * inv_freq / s.factor + smooth * inv_freq;
}

}  // namespace

Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin) { return rope_op("rope", NnOp::Rope, x, cos, sin); }
Tensor rope_i(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  return rope_op("rope_i", NnOp::RopeI, x, cos, sin);
}
Tensor rope_thd(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  return rope_op("rope_thd", NnOp::RopeThd, x, cos, sin);
}

RopeTables rope_tables(int64_t head_dim, int64_t t, double theta, int64_t offset, DType dtype, Device device,
                       const std::optional<RopeScaling>& llama3) {
  constexpr const char* op = "rope_tables";
  WICK_CHECK(head_dim > 0 && head_dim % 2 == 0, ShapeError, op, "head_dim must be even and positive, got ", head_dim);
  WICK_CHECK(t >= 0, ShapeError, op, "t must be at least 0, got ", t);
  WICK_CHECK(offset >= 0, ShapeError, op, "offset must be at least 0, got ", offset);
  int64_t end = 0;
  WICK_CHECK(!__builtin_add_overflow(offset, t, &end), ShapeError, op, "positions past 2^63 - 1: offset ", offset,
             " and t ", t);
  WICK_CHECK(std::isfinite(theta) && theta > 0, ShapeError, op, "theta must be finite and positive, got ", theta);
  WICK_CHECK(op_defined(NnOp::Rope, {&dtype, 1}), DTypeError, op,
             "dtype must be one of rope's, f64, f32, f16 or bf16, got ", dtype);
  if (llama3) check_llama3(op, *llama3);
  backend_for(device, op);  // a device this build has, before any work
  const int64_t half = head_dim / 2;
  const Shape shape = {t, half};
  int64_t numel = 0, bytes = 0;
  WICK_CHECK(!__builtin_mul_overflow(t, half, &numel) && !__builtin_mul_overflow(numel, int64_t(8), &bytes), ShapeError,
             op, "tables of shape ", shape, " would have more than 2^63 - 1 bytes in f64");

  std::vector<double> inv_freq, c, s;
  try {
    // Two f64 tables on the host, then the result: refused past the machine's memory before any
    // is asked for.
    if (static_cast<uint64_t>(bytes) > host_memory_bytes() / 2) throw std::bad_alloc();
    inv_freq.resize(t > 0 ? static_cast<size_t>(half) : 0);
    c.resize(static_cast<size_t>(numel));
    s.resize(c.size());
  } catch (const std::exception&) {
    WICK_THROW(OutOfMemoryError, op, "cannot hold the host tables of shape ", shape, " (f64)");
  }
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const double f = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    inv_freq[i] = llama3 ? llama3_inv_freq(f, *llama3) : f;
  }
  for (int64_t p = 0; p < t; ++p) {
    const double position = static_cast<double>(offset + p);
    for (int64_t i = 0; i < half; ++i) {
      const double angle = position * inv_freq[static_cast<size_t>(i)];
      c[static_cast<size_t>(p * half + i)] = std::cos(angle);
      s[static_cast<size_t>(p * half + i)] = std::sin(angle);
    }
  }
  // Rounded to dtype on the host (casts are the same on every backend), then moved.
  auto make = [&](const std::vector<double>& v) {
    return Tensor::from_vector(v, shape).to_dtype(dtype).to_device(device);
  };
  return {make(c), make(s)};
}

}  // namespace wick::nn
