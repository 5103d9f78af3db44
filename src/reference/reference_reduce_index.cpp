// Reference reductions, cumsum, argsort, index ops and random numbers.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>
#include <vector>

#include "kernels/philox.h"
#include "reference/element.h"
#include "reference/index_iter.h"
#include "reference/reference.h"
#include "wick/error.h"

namespace wick::reference {

namespace {

// A value read as a number of its kind: floats as f64 (exact), integers as int64.
struct Num {
  double f = 0;
  int64_t i = 0;
};

Num get(const Elements& e, int64_t off) {
  Num n;
  if (is_float(e.dtype()))
    n.f = static_cast<double>(e.get_f(off));
  else
    n.i = e.get_i(off);
  return n;
}

// Total order used by argsort and the argmin/argmax scans: NaN above every number.
bool less(const Num& a, const Num& b, bool floats) {
  if (!floats) return a.i < b.i;
  if (std::isnan(a.f)) return false;
  return std::isnan(b.f) || a.f < b.f;
}

uint64_t index_skip(DType dt) {
  switch (dt) {
    case DType::U8: return 0xff;
    case DType::U32: return 0xffffffffull;
    case DType::I16: return 0x7fff;
    case DType::I32: return 0x7fffffff;
    default: return 0x7fffffffffffffffull;
  }
}

// Reads an index; returns false for the skip value, raises IndexError outside [0, size).
bool read_index(const char* op, const Elements& ids, int64_t off, int64_t size, int64_t* out) {
  int64_t v = ids.get_i(off);
  if (static_cast<uint64_t>(v) == index_skip(ids.dtype()) && v >= 0) return false;
  WICK_CHECK(v >= 0 && v < size, IndexError, op, "index ", v, " is out of range for a dim of size ", size,
             " (reference)");
  *out = v;
  return true;
}

void check_all_indices(const char* op, const View& ids, int64_t size) {
  Elements e(ids.storage, ids.dtype);
  int64_t v;
  for (IndexIter it(ids.layout.shape()); !it.done(); it.next())
    read_index(op, e, offset_of(ids.layout, it.index()), size, &v);
}

}  // namespace

StoragePtr ReferenceBackend::reduce(ReduceOp op, const View& x, std::span<const int> dims) {
  const Shape& shape = x.layout.shape();
  Shape out_shape = shape;
  for (int d : dims) out_shape[d] = 1;
  const bool arg = op == ReduceOp::ArgMin || op == ReduceOp::ArgMax;
  const DType out_dtype = arg ? DType::U32 : x.dtype;
  const bool floats = is_float(x.dtype);
  StoragePtr out = alloc(out_dtype, out_shape.numel());
  Elements in(x.storage, x.dtype), o(*out, out_dtype);
  // Walk every input element in row-major order and fold it into its output element.
  std::vector<Num> acc(static_cast<size_t>(out_shape.numel()));
  std::vector<int64_t> where(acc.size(), -1);  // position along the reduced dim; -1: nothing yet
  int64_t idx_out[kMaxRank];
  for (IndexIter it(shape); !it.done(); it.next()) {
    for (int d = 0; d < shape.rank(); ++d) idx_out[d] = it[d];
    for (int d : dims) idx_out[d] = 0;
    size_t k = static_cast<size_t>(linear_of(out_shape, idx_out));
    Num v = get(in, offset_of(x.layout, it.index()));
    Num& a = acc[k];
    const bool first = where[k] < 0;
    switch (op) {
      case ReduceOp::Sum:
        if (floats)
          a.f += v.f;
        else
          a.i = static_cast<int64_t>(static_cast<uint64_t>(a.i) + static_cast<uint64_t>(v.i));
        where[k] = 0;
        break;
      case ReduceOp::Max:
      case ReduceOp::Min: {
        bool take = first || (floats && std::isnan(v.f) && !std::isnan(a.f));
        if (!take && !(floats && std::isnan(a.f))) take = op == ReduceOp::Max ? less(a, v, floats) : less(v, a, floats);
        if (take) a = v;
        where[k] = 0;
        break;
      }
      case ReduceOp::ArgMax:
      case ReduceOp::ArgMin: {
        // NaN is the extreme for both; the first extreme wins (strict comparisons).
        bool take = first;
        if (!take && !(floats && std::isnan(a.f))) {
          take = (floats && std::isnan(v.f)) || (op == ReduceOp::ArgMax ? less(a, v, floats) : less(v, a, floats));
        }
        if (take) {
          a = v;
          where[k] = it[dims[0]];
        }
        break;
      }
    }
  }
  for (size_t k = 0; k < acc.size(); ++k) {
    int64_t pos = static_cast<int64_t>(k);
    if (arg)
      o.set_i(pos, where[k]);
    else if (floats)
      o.set_f(pos, acc[k].f);
    else
      o.set_i(pos, acc[k].i);
  }
  return out;
}

StoragePtr ReferenceBackend::cumsum(const View& x, int dim) {
  const Shape& shape = x.layout.shape();
  StoragePtr out = alloc(x.dtype, shape.numel());
  Elements in(x.storage, x.dtype), o(*out, x.dtype);
  const bool floats = is_float(x.dtype);
  for (IndexIter it(shape); !it.done(); it.next()) {
    if (it[dim] != 0) continue;  // start of a line along dim
    Num acc;
    int64_t idx[kMaxRank];
    std::copy(it.index(), it.index() + shape.rank(), idx);
    for (int64_t j = 0; j < shape[dim]; ++j) {
      idx[dim] = j;
      Num v = get(in, offset_of(x.layout, idx));
      int64_t pos = linear_of(shape, idx);
      if (floats) {
        acc.f += v.f;
        o.set_f(pos, acc.f);
      } else {
        acc.i = static_cast<int64_t>(static_cast<uint64_t>(acc.i) + static_cast<uint64_t>(v.i));
        o.set_i(pos, acc.i);
      }
    }
  }
  return out;
}

StoragePtr ReferenceBackend::argsort(const View& x, bool ascending) {
  const Shape& shape = x.layout.shape();
  StoragePtr out = alloc(DType::U32, shape.numel());
  Elements in(x.storage, x.dtype), o(*out, DType::U32);
  const bool floats = is_float(x.dtype);
  const int last = shape.rank() - 1;
  const int64_t len = last >= 0 ? shape[last] : 1;
  for (IndexIter it(shape); !it.done(); it.next()) {
    if (last >= 0 && it[last] != 0) continue;  // start of a row
    int64_t idx[kMaxRank];
    std::copy(it.index(), it.index() + shape.rank(), idx);
    std::vector<Num> row(static_cast<size_t>(len));
    for (int64_t j = 0; j < len; ++j) {
      if (last >= 0) idx[last] = j;
      row[static_cast<size_t>(j)] = get(in, offset_of(x.layout, idx));
    }
    std::vector<int64_t> order(static_cast<size_t>(len));
    std::iota(order.begin(), order.end(), 0);
    // Stable insertion sort: obviously stable, and rows in the harness are short.
    for (size_t i = 1; i < order.size(); ++i) {
      for (size_t j = i; j > 0; --j) {
        const Num& prev = row[static_cast<size_t>(order[j - 1])];
        const Num& cur = row[static_cast<size_t>(order[j])];
        bool swap = ascending ? less(cur, prev, floats) : less(prev, cur, floats);
        if (!swap) break;
        std::swap(order[j - 1], order[j]);
      }
    }
    for (int64_t j = 0; j < len; ++j) {
      if (last >= 0) idx[last] = j;
      o.set_i(linear_of(shape, idx), order[static_cast<size_t>(j)]);
    }
  }
  return out;
}

StoragePtr ReferenceBackend::gather(const View& x, const View& ids, int dim) {
  const Shape& shape = ids.layout.shape();
  StoragePtr out = alloc(x.dtype, shape.numel());
  Elements in(x.storage, x.dtype), id(ids.storage, ids.dtype), o(*out, x.dtype);
  check_all_indices("gather", ids, x.layout.dim(dim));
  int64_t pos = 0;
  for (IndexIter it(shape); !it.done(); it.next(), ++pos) {
    int64_t v;
    if (read_index("gather", id, offset_of(ids.layout, it.index()), x.layout.dim(dim), &v))
      o.copy_from(pos, in, offset_of(x.layout, it.index(), dim, v));
    else
      o.set_from_i(pos, 0);
  }
  return out;
}

StoragePtr ReferenceBackend::index_select(const View& x, const View& ids, int dim) {
  Shape shape = x.layout.shape();
  shape[dim] = ids.layout.dim(0);
  StoragePtr out = alloc(x.dtype, shape.numel());
  Elements in(x.storage, x.dtype), id(ids.storage, ids.dtype), o(*out, x.dtype);
  check_all_indices("index_select", ids, x.layout.dim(dim));
  int64_t pos = 0;
  for (IndexIter it(shape); !it.done(); it.next(), ++pos) {
    int64_t v, j = it[dim];
    if (read_index("index_select", id, ids.layout.offset() + j * ids.layout.stride(0), x.layout.dim(dim), &v))
      o.copy_from(pos, in, offset_of(x.layout, it.index(), dim, v));
    else
      o.set_from_i(pos, 0);
  }
  return out;
}

namespace {

// dst[i with dim = ids[i]] = src[i] (or +=) for every i of src, in row-major order.
void scatter(const char* op, const MutView& dst, const View& ids, const Layout& ids_layout, const View& src, int dim,
             bool add) {
  Elements d(dst.storage, dst.dtype), id(ids.storage, ids.dtype), s(src.storage, src.dtype);
  const int64_t size = dst.layout.dim(dim);
  int64_t v;
  for (IndexIter it(src.layout.shape()); !it.done(); it.next())
    read_index(op, id, offset_of(ids_layout, it.index()), size, &v);
  for (IndexIter it(src.layout.shape()); !it.done(); it.next()) {
    if (!read_index(op, id, offset_of(ids_layout, it.index()), size, &v)) continue;
    int64_t to = offset_of(dst.layout, it.index(), dim, v), from = offset_of(src.layout, it.index());
    if (!add)
      d.copy_from(to, s, from);
    else if (is_float(dst.dtype))
      d.set_f(to, static_cast<double>(d.get_f(to)) + static_cast<double>(s.get_f(from)));
    else
      d.set_i(to, static_cast<int64_t>(static_cast<uint64_t>(d.get_i(to)) + static_cast<uint64_t>(s.get_i(from))));
  }
}

}  // namespace

void ReferenceBackend::scatter_set(const MutView& dst, const View& ids, const View& src, int dim) {
  scatter("scatter_set", dst, ids, ids.layout, src, dim, false);
}

void ReferenceBackend::scatter_add_set(const MutView& dst, const View& ids, const View& src, int dim) {
  scatter("scatter_add_set", dst, ids, ids.layout, src, dim, true);
}

StoragePtr ReferenceBackend::index_add(const View& x, const View& ids, const View& src, int dim) {
  const Layout out_layout(x.layout.shape());
  StoragePtr out = alloc(x.dtype, out_layout.numel());
  copy_strided(x, MutView{*out, out_layout, x.dtype});
  // ids (rank 1) seen over src's shape: it varies along dim only.
  Strides strides = src.layout.shape();
  for (int d = 0; d < strides.rank(); ++d) strides[d] = d == dim ? ids.layout.stride(0) : 0;
  const Layout ids_over_src(src.layout.shape(), strides, ids.layout.offset());
  scatter("index_add", MutView{*out, out_layout, x.dtype}, ids, ids_over_src, src, dim, true);
  return out;
}

namespace {

// Element i of a call: block i / L of the stream, its lane i % L, transformed in f64.
template <bool kNormal>
StoragePtr generate(Backend& b, const Shape& shape, DType dtype, double p0, double p1, uint64_t seed, uint64_t stream) {
  const int64_t n = shape.numel();
  StoragePtr out = b.alloc(dtype, n);
  Elements o(*out, dtype);
  const bool wide = dtype == DType::F64;
  const int lanes = wide ? 2 : 4;
  for (int64_t i = 0; i < n; ++i) {
    kernels::PhiloxBlock blk = kernels::philox_block(seed, stream, static_cast<uint64_t>(i / lanes));
    const int lane = static_cast<int>(i % lanes);
    auto unit = [&](int w) {  // uniform in [0, 1) from word w (two words for f64)
      if (wide) return static_cast<double>(((uint64_t(blk.w[w]) << 32) | blk.w[w + 1]) >> 11) * std::ldexp(1.0, -53);
      return static_cast<double>(blk.w[w] >> 8) * std::ldexp(1.0, -24);
    };
    double v;
    if (!kNormal) {
      v = p0 + unit(wide ? 2 * lane : lane) * (p1 - p0);
    } else {
      const int pair = wide ? 0 : 2 * (lane / 2);  // f32: words (0,1) or (2,3); f64: words (0,1),(2,3)
      const double u1 = unit(pair) + std::ldexp(1.0, wide ? -53 : -24);
      const double u2 = unit(wide ? 2 : pair + 1);
      const double r = std::sqrt(-2.0 * std::log(u1)), theta = 2.0 * std::numbers::pi * u2;
      v = p0 + p1 * (lane % 2 == 0 ? r * std::cos(theta) : r * std::sin(theta));
    }
    o.set_f(i, v);
  }
  return out;
}

}  // namespace

StoragePtr ReferenceBackend::rand_uniform(const Shape& shape, DType dtype, double lo, double up) {
  const RandomStreams::Draw d = random_.next();
  return generate<false>(*this, shape, dtype, lo, up, d.seed, d.stream);
}

StoragePtr ReferenceBackend::rand_normal(const Shape& shape, DType dtype, double mean, double std) {
  const RandomStreams::Draw d = random_.next();
  return generate<true>(*this, shape, dtype, mean, std, d.seed, d.stream);
}

}  // namespace wick::reference
