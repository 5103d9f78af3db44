// The random loop's ordinary calls: small inputs through every kind of view, every public op
// family, compared with the reference (random_calls.h). Parameters are mostly valid, sometimes
// not (a dim one past the end, shapes that do not broadcast, mixed dtypes): then both must refuse.
#include "random_calls.h"

#include <algorithm>
#include <sstream>

#include "backend/storage.h"

namespace wick::adversarial {

using Ins = std::vector<Tensor>;
using Out = std::vector<Tensor>;

std::string describe(const Input& in) {
  static const char* forms[] = {"contiguous", "transposed", "narrowed", "stride2", "broadcast"};
  std::ostringstream os;
  os << in.dtype << " " << in.shape << " " << (in.huge ? "broadcast of one element" : forms[static_cast<int>(in.form)]);
  return os.str();
}

namespace {

template <typename... A>
std::string str(const A&... a) {
  std::ostringstream os;
  (os << ... << a);
  return os.str();
}

// A dim of a tensor of rank r: mostly valid (negative a third of the time), sometimes out of range.
int64_t pick_dim(Gen& g, int rank) {
  if (rank == 0 || g.chance(0.04)) return g.chance(0.5) ? rank : -rank - 1;
  const int64_t d = g.range(0, rank - 1);
  return g.chance(0.3) ? d - rank : d;
}

// The size of a dim, or 1 when the dim is out of range.
int64_t size_at(const Shape& s, int64_t dim) {
  const int64_t d = dim < 0 ? dim + s.rank() : dim;
  return d >= 0 && d < s.rank() ? s[static_cast<int>(d)] : 1;
}

// A shape that broadcasts with `out` to `out`: a suffix of it with some dims 1 (rarely not).
Shape broadcastable(Gen& g, const Shape& out) {
  Shape r;
  for (int i = static_cast<int>(g.range(0, out.rank())); i < out.rank(); ++i) r.push_back(g.chance(0.3) ? 1 : out[i]);
  if (r.rank() > 0 && g.chance(0.04)) r[0] += 2;
  return r;
}

Values values_for(Gen& g, DType dt) {
  if (g.chance(0.25)) return Values::Small;
  return is_float(dt) && g.chance(0.15) ? Values::Special : Values::Normal;
}

Compare exact_if(bool exact) { return exact ? Compare::Exact : Compare::Close; }

// The destination of an in-place op and the whole storage under it (to see writes outside it).
Out with_storage(const Tensor& dst) {
  const int64_t n = static_cast<int64_t>(dst.storage()->nbytes()) / dtype_size(dst.dtype());
  return {dst, Tensor(dst.storage(), Layout(Shape{n}), dst.dtype())};
}

struct Unary {
  const char* name;
  Tensor (Tensor::*fn)() const;
  bool exact;
};
const Unary kUnary[] = {
    {"exp", &Tensor::exp, false},         {"log", &Tensor::log, false},     {"sin", &Tensor::sin, false},
    {"cos", &Tensor::cos, false},         {"tanh", &Tensor::tanh, false},   {"abs", &Tensor::abs, true},
    {"neg", &Tensor::neg, true},          {"recip", &Tensor::recip, false}, {"sqr", &Tensor::sqr, false},
    {"sqrt", &Tensor::sqrt, false},       {"gelu", &Tensor::gelu, false},   {"gelu_erf", &Tensor::gelu_erf, false},
    {"erf", &Tensor::erf, false},         {"relu", &Tensor::relu, true},    {"silu", &Tensor::silu, false},
    {"sigmoid", &Tensor::sigmoid, false}, {"floor", &Tensor::floor, true},  {"ceil", &Tensor::ceil, true},
    {"round", &Tensor::round, true},      {"sign", &Tensor::sign, true},
};

Call unary(Gen& g) {
  const Unary& u = kUnary[g.range(0, std::size(kUnary) - 1)];
  const DType dt = g.chance(0.8) ? g.float_dtype() : g.any_dtype();
  const Shape s = g.shape(0, 4);
  Call c;
  c.inputs = {g.input(dt, s, values_for(g, dt))};
  c.desc = u.name;
  c.compare = exact_if(u.exact || is_int(dt));
  c.run = [fn = u.fn](Ins& in, Device) { return Out{(in[0].*fn)()}; };
  return c;
}

using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);
struct Binary {
  const char* name;
  BinaryFn fn;
  bool exact;
};
const Binary kBinary[] = {
    {"add", [](const Tensor& a, const Tensor& b) { return a.add(b); }, false},
    {"sub", [](const Tensor& a, const Tensor& b) { return a.sub(b); }, false},
    {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, false},
    {"div", [](const Tensor& a, const Tensor& b) { return a / b; }, false},
    {"maximum", [](const Tensor& a, const Tensor& b) { return a.maximum(b); }, true},
    {"minimum", [](const Tensor& a, const Tensor& b) { return a.minimum(b); }, true},
    {"eq", [](const Tensor& a, const Tensor& b) { return a.eq(b); }, true},
    {"ne", [](const Tensor& a, const Tensor& b) { return a.ne(b); }, true},
    {"lt", [](const Tensor& a, const Tensor& b) { return a.lt(b); }, true},
    {"le", [](const Tensor& a, const Tensor& b) { return a.le(b); }, true},
    {"gt", [](const Tensor& a, const Tensor& b) { return a.gt(b); }, true},
    {"ge", [](const Tensor& a, const Tensor& b) { return a.ge(b); }, true},
};

Call binary(Gen& g) {
  const Binary& b = kBinary[g.range(0, std::size(kBinary) - 1)];
  const DType dt = g.any_dtype(), dt2 = g.chance(0.04) ? g.any_dtype() : dt;
  const Shape out = g.shape(0, 4);
  const Values v = values_for(g, dt);
  Call c;
  c.inputs = {g.input(dt, broadcastable(g, out), v), g.input(dt2, broadcastable(g, out), v)};
  c.desc = b.name;
  c.compare = exact_if(b.exact || is_int(dt));
  c.run = [fn = b.fn](Ins& in, Device) { return Out{fn(in[0], in[1])}; };
  return c;
}

Call binary_scalar(Gen& g) {
  const DType dt = g.any_dtype();
  const std::vector<Scalar> scalars = {Scalar(g.range(-5, 5)),
                                       Scalar(1.5),
                                       Scalar(300),
                                       Scalar(kI64Max),
                                       Scalar(-0.0),
                                       Scalar(1e300),
                                       Scalar(std::numeric_limits<double>::quiet_NaN())};
  const Scalar s = g.pick(scalars);
  const int op = static_cast<int>(g.range(0, 11));
  static const char* names[] = {"x + s", "x - s", "x * s",      "x / s",      "s + x", "s - x",
                                "s * x", "s / x", "maximum(s)", "minimum(s)", "lt(s)", "ne(s)"};
  const Shape shape = g.shape(0, 3);
  Call c;
  c.inputs = {g.input(dt, shape, values_for(g, dt))};
  c.desc = str(names[op], " with s = ", s.to_string());
  c.compare = exact_if(is_int(dt) || op >= 8);
  c.run = [op, s](Ins& in, Device) {
    const Tensor& x = in[0];
    switch (op) {
      case 0: return Out{x + s};
      case 1: return Out{x - s};
      case 2: return Out{x * s};
      case 3: return Out{x / s};
      case 4: return Out{s + x};
      case 5: return Out{s - x};
      case 6: return Out{s * x};
      case 7: return Out{s / x};
      case 8: return Out{x.maximum(s)};
      case 9: return Out{x.minimum(s)};
      case 10: return Out{x.lt(s)};
      default: return Out{x.ne(s)};
    }
  };
  return c;
}

Call where(Gen& g) {
  const DType dt = g.any_dtype(), cond = g.chance(0.95) ? g.index_dtype() : g.float_dtype();
  const DType dt2 = g.chance(0.04) ? g.any_dtype() : dt;
  const Shape out = g.shape(0, 4);
  Call c;
  c.inputs = {g.input(cond, broadcastable(g, out), Values::Cond), g.input(dt, broadcastable(g, out)),
              g.input(dt2, broadcastable(g, out))};
  c.desc = "where_cond";
  c.run = [](Ins& in, Device) { return Out{where_cond(in[0], in[1], in[2])}; };
  return c;
}

Call affine_family(Gen& g) {
  const DType dt = g.chance(0.7) ? g.float_dtype() : g.any_dtype();
  const int op = static_cast<int>(g.range(0, 3));
  const double a = g.pick(std::vector<double>{2, -1.5, 0.5, 0, 1e10, 3}), b = g.pick(std::vector<double>{0, 1, -3.25});
  const int64_t lo = g.range(-5, 2), hi = g.range(-1, 10);
  const Shape s = g.shape(0, 3);
  const Values v = op == 1 ? Values::Positive : values_for(g, dt);
  Call c;
  c.inputs = {g.input(dt, s, v)};
  c.compare = exact_if(op == 3 || is_int(dt));
  switch (op) {
    case 0: c.desc = str("affine(", a, ", ", b, ")"); break;
    case 1: c.desc = str("powf(", a, ")"); break;
    case 2: c.desc = str("elu(", b, ")"); break;
    default: c.desc = str("clamp(", lo, ", ", hi, ")"); break;
  }
  c.run = [op, a, b, lo, hi](Ins& in, Device) {
    switch (op) {
      case 0: return Out{in[0].affine(a, b)};
      case 1: return Out{in[0].powf(a)};
      case 2: return Out{in[0].elu(b)};
      default: return Out{in[0].clamp(lo, hi)};
    }
  };
  return c;
}

Call cast_or_copy(Gen& g) {
  const DType dt = g.any_dtype(), to = g.any_dtype();
  const int op = static_cast<int>(g.range(0, 3));
  const Shape s = g.shape(0, 4);
  Call c;
  c.inputs = {g.input(dt, s, values_for(g, dt))};
  c.desc = op == 0 ? str("to_dtype(", to, ")") : op == 1 ? "contiguous" : op == 2 ? "copy" : "to_device(reference)";
  c.run = [op, to](Ins& in, Device) {
    switch (op) {
      case 0: return Out{in[0].to_dtype(to)};
      case 1: return Out{in[0].contiguous()};
      case 2: return Out{in[0].copy()};
      default: return Out{in[0].to_device(reference_device()).to_device(in[0].device())};
    }
  };
  return c;
}

// Views with small parameters, and a quarter of the time hostile ones (the loop checks that an
// accepted view stays inside its storage).
Call view(Gen& g) {
  const DType dt = g.any_dtype();
  const Shape s = g.shape(0, 4);
  const int r = s.rank();
  Call c;
  c.hostile = g.maybe_hostile(0.25);
  auto num = [&](int64_t normal) { return c.hostile && g.chance(0.5) ? g.hostile() : normal; };
  c.inputs = {g.input(dt, s)};
  const int64_t dim = num(pick_dim(g, r)), size = size_at(s, dim);
  const int op = static_cast<int>(g.range(0, 11));
  Shape target;
  if (op == 7) {
    const int64_t n = s.numel();
    const std::vector<Shape> plain = {{n}, {-1}, {1, n}, {n, 1}, {n, -1}, {-1, 1, 1}};
    target = g.pick(plain);
    if (c.hostile) target = g.pick(std::vector<Shape>{{p2(62) + 1, 4}, {num(n), -1}, {p2(32), p2(32)}, {-1, num(1)}});
  } else if (op == 8) {
    for (int i = 0; i < r; ++i) target.push_back(s[i] == 1 && g.chance(0.5) ? g.range(0, 3) : s[i]);
    if (g.chance(0.5)) target.insert(0, g.range(1, 3));
    if (c.hostile) target.insert(0, g.hostile());
  }
  std::vector<int64_t> perm;
  for (int i = 0; i < r; ++i) perm.push_back(i);
  std::shuffle(perm.begin(), perm.end(), g.rng());
  if (!perm.empty() && g.chance(0.05)) perm[0] = num(perm.back());
  const int64_t a = num(g.range(-size - 1, size + 1)), b = num(g.range(-size - 1, size + 1));
  const int64_t step = num(g.chance(0.04) ? 0 : g.range(1, 3));
  switch (op) {
    case 0: c.desc = str("narrow(", dim, ", ", a, ", ", b, ")"); break;
    case 1: c.desc = str("slice(", dim, ", ", a, ", ", b, ", ", step, ")"); break;
    case 2: c.desc = str("select(", dim, ", ", a, ")"); break;
    case 3: c.desc = str("transpose(", dim, ", ", b, ")"); break;
    case 4: c.desc = str("permute(", Dims(perm), ")"); break;
    case 5: c.desc = str("squeeze(", dim, ")"); break;
    case 6: c.desc = str("unsqueeze(", a, ")"); break;
    case 7: c.desc = str("reshape(", target, ")"); break;
    case 8: c.desc = str("broadcast_as(", target, ")"); break;
    case 9: c.desc = str("flatten(", dim, ", ", b, ")"); break;
    case 10: c.desc = "t"; break;
    default: c.desc = "squeeze()"; break;
  }
  c.run = [=](Ins& in, Device) {
    const Tensor& x = in[0];
    switch (op) {
      case 0: return Out{x.narrow(dim, a, b)};
      case 1: return Out{x.slice(dim, a, b, step)};
      case 2: return Out{x.select(dim, a)};
      case 3: return Out{x.transpose(dim, b)};
      case 4: return Out{x.permute(perm)};
      case 5: return Out{x.squeeze(dim)};
      case 6: return Out{x.unsqueeze(a)};
      case 7: return Out{x.reshape(target)};
      case 8: return Out{x.broadcast_as(target)};
      case 9: return Out{x.flatten(dim, b)};
      case 10: return Out{x.t()};
      default: return Out{x.squeeze()};
    }
  };
  return c;
}

Call split_chunk(Gen& g) {
  const DType dt = g.any_dtype();
  const Shape s = g.shape(1, 3);
  Call c;
  c.hostile = g.maybe_hostile(0.25);
  auto num = [&](int64_t normal) { return c.hostile && g.chance(0.6) ? g.hostile() : normal; };
  c.inputs = {g.input(dt, s)};
  const int64_t dim = pick_dim(g, s.rank()), size = size_at(s, dim), n = num(g.range(1, 6));
  const int op = static_cast<int>(g.range(0, 2));
  std::vector<int64_t> sizes;
  if (c.hostile) {
    // Two hostile pieces and a third that makes the total wrap around to the dim's size.
    const int64_t h1 = g.hostile(), h2 = g.hostile();
    sizes = {h1, h2,
             static_cast<int64_t>(static_cast<uint64_t>(size) - static_cast<uint64_t>(h1) - static_cast<uint64_t>(h2))};
  } else {
    for (int64_t left = size; left > 0;) sizes.push_back(std::min(left, g.range(0, 3))), left -= sizes.back();
    if (g.chance(0.1)) sizes.push_back(g.range(-1, 1));
  }
  c.desc = op == 0   ? str("chunk(", n, ", ", dim, ")")
           : op == 1 ? str("split(", n, ", ", dim, ")")
                     : str("split(", Dims(sizes), ", ", dim, ")");
  c.run = [=](Ins& in, Device) {
    if (op == 0) return in[0].chunk(n, dim);
    if (op == 1) return in[0].split(n, dim);
    return in[0].split(sizes, dim);
  };
  return c;
}

Call reduce(Gen& g) {
  const DType dt = g.chance(0.8) ? g.any_dtype() : g.float_dtype();
  const Shape s = g.shape(0, 4);
  const int r = s.rank();
  Dims dims;
  for (int64_t i = 0, k = g.range(0, r); i < k; ++i) dims.push_back(pick_dim(g, r));
  const int64_t dim = pick_dim(g, r);
  const bool keep = g.chance(0.5), asc = g.chance(0.5);
  const int op = static_cast<int>(g.range(0, 10));
  static const char* names[] = {"sum",  "max", "min",    "sum()",   "argmax", "argmin",
                                "mean", "var", "cumsum", "argsort", "sort"};
  Call c;
  c.inputs = {g.input(dt, s, values_for(g, dt))};
  c.desc = str(names[op], " dims ", dims, " dim ", dim, " keepdim ", keep, " ascending ", asc);
  c.compare = exact_if(is_int(dt) || op == 1 || op == 2 || op == 4 || op == 5 || op >= 9);
  c.run = [=](Ins& in, Device) {
    const Tensor& x = in[0];
    switch (op) {
      case 0: return Out{x.sum(dims, keep)};
      case 1: return Out{x.max(dims, keep)};
      case 2: return Out{x.min(dims, keep)};
      case 3: return Out{x.sum(), x.max(), x.min()};
      case 4: return Out{x.argmax(dim, keep)};
      case 5: return Out{x.argmin(dim, keep)};
      case 6: return Out{x.mean(dims, keep)};
      case 7: return Out{x.var(dims, keep)};
      case 8: return Out{x.cumsum(dim)};
      case 9: return Out{x.argsort(asc)};
      default: {
        auto [values, ids] = x.sort(asc);
        return Out{values, ids};
      }
    }
  };
  return c;
}

Call index(Gen& g) {
  const DType dt = g.any_dtype(), it = g.chance(0.96) ? g.index_dtype() : g.float_dtype();
  const Shape s = g.shape(1, 3);
  const int r = s.rank();
  const int64_t dim = pick_dim(g, r), size = size_at(s, dim);
  const int64_t d = dim < 0 ? dim + r : dim;
  const int op = static_cast<int>(g.range(0, 5));
  // ids and src of gather/scatter: x's rank, no larger than x except along dim.
  Shape fit;
  for (int i = 0; i < r; ++i) fit.push_back(i == d ? g.range(0, 4) : g.range(0, s[i]));
  const int64_t len = g.range(0, 4);
  Shape added = s;
  if (d >= 0 && d < r) added[static_cast<int>(d)] = len;
  Call c;
  c.compare = exact_if(is_int(dt) || (op != 3 && op != 4));
  static const char* names[] = {"index_select", "gather", "scatter", "scatter_add", "index_add", "embedding"};
  c.desc = str(names[op], " dim ", dim);
  switch (op) {
    case 0: c.inputs = {g.input(dt, s), g.index_input(it, {len}, size)}; break;
    case 1: c.inputs = {g.input(dt, s), g.index_input(it, fit, size)}; break;
    case 2:
    case 3: c.inputs = {g.input(dt, s), g.index_input(it, fit, size), g.input(dt, fit)}; break;
    case 4: c.inputs = {g.input(dt, s), g.index_input(it, {len}, size), g.input(dt, added)}; break;
    default: c.inputs = {g.input(dt, {s[0], 3}), g.index_input(it, g.shape(0, 3), s[0])}; break;
  }
  c.run = [=](Ins& in, Device) {
    switch (op) {
      case 0: return Out{in[0].index_select(in[1], dim)};
      case 1: return Out{in[0].gather(in[1], dim)};
      case 2: return Out{in[0].scatter(in[1], in[2], dim)};
      case 3: return Out{in[0].scatter_add(in[1], in[2], dim)};
      case 4: return Out{in[0].index_add(in[1], in[2], dim)};
      default: return Out{embedding(in[0], in[1])};
    }
  };
  return c;
}

Call in_place(Gen& g) {
  const DType dt = g.any_dtype();
  const Shape s = g.shape(1, 3);
  const int r = s.rank();
  const int64_t dim = pick_dim(g, r), size = size_at(s, dim);
  const int64_t d = dim < 0 ? dim + r : dim;
  Shape fit, part = s;
  for (int i = 0; i < r; ++i) fit.push_back(i == d ? g.range(0, 4) : g.range(0, s[i]));
  const bool hostile_start = g.maybe_hostile(0.1);
  const int64_t len = g.range(0, size), start = hostile_start ? g.hostile() : g.range(-1, size - len + 1);
  if (d >= 0 && d < r) part[static_cast<int>(d)] = len;
  const int op = static_cast<int>(g.range(0, 5));
  const Scalar v = g.pick(std::vector<Scalar>{Scalar(3), Scalar(-1), Scalar(2.5), Scalar(300)});
  static const char* names[] = {"scatter_set", "scatter_add_set", "slice_set", "const_set", "copy_from", "zero"};
  Call c;
  c.hostile = hostile_start;
  c.desc = str(names[op], " dim ", dim, " start ", start, " value ", v.to_string());
  c.compare = exact_if(is_int(dt) || op != 1);
  Input dst = g.input(dt, s, Values::Normal, true);
  switch (op) {
    case 0:
    case 1: c.inputs = {dst, g.index_input(g.index_dtype(), fit, size), g.input(dt, fit)}; break;
    case 2: c.inputs = {dst, g.input(g.chance(0.04) ? g.any_dtype() : dt, part)}; break;
    case 4: c.inputs = {dst, g.input(dt, broadcastable(g, s))}; break;
    default: c.inputs = {dst};
  }
  c.run = [=](Ins& in, Device) {
    Tensor x = in[0];
    switch (op) {
      case 0: x.scatter_set(in[1], in[2], dim); break;
      case 1: x.scatter_add_set(in[1], in[2], dim); break;
      case 2: x.slice_set(in[1], dim, start); break;
      case 3: x.const_set(v); break;
      case 4: x.copy_from(in[1]); break;
      default: x.zero(); break;
    }
    return with_storage(x);
  };
  return c;
}

Call join(Gen& g) {
  const DType dt = g.any_dtype();
  const Shape s = g.shape(1, 3);
  const int r = s.rank();
  const bool stacked = g.chance(0.3);
  const int64_t dim = stacked ? g.range(-r - 1, r) : pick_dim(g, r);
  const int64_t d = dim < 0 ? dim + r : dim;
  Call c;
  for (int64_t i = 0, k = g.range(1, 4); i < k; ++i) {
    Shape p = s;
    if (!stacked && d >= 0 && d < r) p[static_cast<int>(d)] = g.range(0, 3);
    if (g.chance(0.04)) p[0] += 1;
    c.inputs.push_back(g.input(g.chance(0.03) ? g.any_dtype() : dt, p));
  }
  c.desc = str(stacked ? "stack" : "cat", " dim ", dim);
  c.run = [=](Ins& in, Device) { return Out{stacked ? stack(in, dim) : cat(in, dim)}; };
  return c;
}

Call matmul(Gen& g) {
  const DType dt = g.chance(0.93) ? g.float_dtype() : g.any_dtype();
  auto dimsize = [&] { return g.chance(0.05) ? 0 : g.range(1, 5); };
  const int64_t m = dimsize(), k = dimsize(), n = dimsize();
  const int op = static_cast<int>(g.range(0, 5));
  Shape batch = g.shape(0, 2, 3), ba, bb;
  for (int64_t b : batch) ba.push_back(g.chance(0.3) ? 1 : b), bb.push_back(g.chance(0.3) ? 1 : b);
  if (g.chance(0.5)) ba = Shape{};
  Shape sa = ba, sb = bb;
  sa.push_back(m), sa.push_back(k), sb.push_back(g.chance(0.04) ? k + 1 : k), sb.push_back(n);
  Call c;
  c.compare = Compare::Close;
  switch (op) {
    case 0: c.inputs = {g.input(dt, sa), g.input(dt, sb)}; break;
    case 1: c.inputs = {g.input(dt, {k}), g.input(dt, sb)}; break;
    case 2: c.inputs = {g.input(dt, sa), g.input(dt, {k})}; break;
    case 3: c.inputs = {g.input(dt, {k}), g.input(dt, {g.chance(0.05) ? k + 1 : k})}; break;
    default: c.inputs = {g.input(dt, {m, k}), g.input(dt, {k})}; break;
  }
  c.desc = op == 3 ? "dot" : op == 4 ? "mv" : "matmul";
  c.run = [op](Ins& in, Device) {
    if (op == 3) return Out{in[0].dot(in[1])};
    if (op == 4) return Out{in[0].mv(in[1])};
    return Out{in[0].matmul(in[1])};
  };
  return c;
}

Call conv(Gen& g) {
  const DType dt = g.chance(0.95) ? g.float_dtype() : g.any_dtype();
  const bool two = g.chance(0.5), transposed = g.chance(0.4);
  const int64_t groups = g.range(1, 2), cin = groups * g.range(1, 2), cout = groups * g.range(1, 2);
  const int64_t n = g.range(0, 2), ks = g.range(1, 3);
  const int64_t pad = g.range(0, 2), stride = g.range(1, 3), dil = g.range(1, 2);
  const int64_t out_pad = transposed ? g.range(0, std::max(stride, dil) - 1) : 0;
  Shape x = {n, cin, g.range(1, 6)}, k = {transposed ? cin : cout, (transposed ? cout : cin) / groups, ks};
  if (two) x.push_back(g.range(1, 6)), k.push_back(g.range(1, 3));
  Call c;
  c.compare = Compare::Close;
  c.inputs = {g.input(dt, x), g.input(dt, k)};
  c.desc = str(transposed ? "conv_transpose" : "conv", two ? "2d" : "1d", " padding ", pad, " stride ", stride,
               " dilation ", dil, " output_padding ", out_pad, " groups ", groups);
  c.run = [=](Ins& in, Device) {
    if (two) {
      const Conv2dOptions o{pad, stride, dil, out_pad, groups};
      return Out{transposed ? in[0].conv_transpose2d(in[1], o) : in[0].conv2d(in[1], o)};
    }
    const Conv1dOptions o{pad, stride, dil, out_pad, groups};
    return Out{transposed ? in[0].conv_transpose1d(in[1], o) : in[0].conv1d(in[1], o)};
  };
  return c;
}

Call pool_upsample(Gen& g) {
  const int op = static_cast<int>(g.range(0, 5));
  const DType dt = op == 0 || op >= 4 ? (g.chance(0.95) ? g.float_dtype() : g.any_dtype()) : g.any_dtype();
  const Shape x = {g.range(0, 2), g.range(1, 2), g.range(1, 6), g.range(1, 6)};
  const Pair kernel{g.range(1, 3), g.range(1, 3)}, stride{g.range(1, 3), g.range(1, 3)};
  const int64_t h = g.range(1, 7), w = g.range(1, 7);
  const double scale = g.pick(std::vector<double>{0.5, 0.75, 1.5, 2, 2.5, 3});
  const bool corners = g.chance(0.5);
  Call c;
  c.compare = exact_if(op == 1 || op == 2 || op == 3);
  c.inputs = {g.input(dt, op == 2 ? Shape{x[0], x[1], x[2]} : x)};
  static const char* names[] = {"avg_pool2d",         "max_pool2d",          "upsample_nearest1d",
                                "upsample_nearest2d", "upsample_bilinear2d", "upsample_bilinear2d_scale"};
  c.desc = str(names[op], " kernel ", kernel.h, "x", kernel.w, " stride ", stride.h, "x", stride.w, " size ", h, "x", w,
               " scale ", scale, " align_corners ", corners);
  c.run = [=](Ins& in, Device) {
    switch (op) {
      case 0: return Out{in[0].avg_pool2d(kernel, stride)};
      case 1: return Out{in[0].max_pool2d(kernel, stride)};
      case 2: return Out{in[0].upsample_nearest1d(h)};
      case 3: return Out{in[0].upsample_nearest2d(h, w)};
      case 4: return Out{in[0].upsample_bilinear2d(h, w, corners)};
      default: return Out{in[0].upsample_bilinear2d_scale(scale, scale, corners)};
    }
  };
  return c;
}

Call create(Gen& g) {
  const DType dt = g.any_dtype();
  const Shape s = g.shape(0, 3);
  const int op = static_cast<int>(g.range(0, 6));
  const int64_t a = g.range(-6, 6), b = g.range(-6, 12), step = g.pick(std::vector<int64_t>{1, 2, 3, -1, -2, 0});
  Call c;
  c.seed = op >= 5 ? static_cast<uint64_t>(g.range(1, 1000000)) : 0;
  c.compare = exact_if(op < 5);
  static const char* names[] = {"zeros", "ones", "full(2)", "arange", "eye", "rand_uniform", "rand_normal"};
  c.desc = str(names[op], " ", s, " ", dt, " arange ", a, ", ", b, ", ", step);
  c.run = [=](Ins&, Device dev) {
    switch (op) {
      case 0: return Out{Tensor::zeros(s, dt, dev)};
      case 1: return Out{Tensor::ones(s, dt, dev)};
      case 2: return Out{Tensor::full(s, 2, dt, dev)};
      case 3: return Out{Tensor::arange(a, b, step, dt, dev)};
      case 4: return Out{Tensor::eye(a, dt, dev)};
      case 5: return Out{Tensor::rand_uniform(s, -1.5, 2.0, dt, dev)};
      default: return Out{Tensor::rand_normal(s, 0.5, 2.0, dt, dev)};
    }
  };
  return c;
}

}  // namespace

std::vector<Maker> ordinary_makers() {
  return {{"unary", 10, unary},
          {"binary", 10, binary},
          {"binary_scalar", 5, binary_scalar},
          {"where", 3, where},
          {"affine", 4, affine_family},
          {"cast_copy", 5, cast_or_copy},
          {"view", 12, view},
          {"split_chunk", 4, split_chunk},
          {"reduce", 10, reduce},
          {"index", 8, index},
          {"in_place", 8, in_place},
          {"join", 4, join},
          {"matmul", 5, matmul},
          {"conv", 5, conv},
          {"pool_upsample", 5, pool_upsample},
          {"create", 4, create}};
}

}  // namespace wick::adversarial
