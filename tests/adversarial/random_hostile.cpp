// The random loop's hostile calls (random_calls.h): sizes and parameters near 2^31, 2^32, 2^62 and
// 2^63, negative ones, and ops on broadcast views of any size. Each is built so that a correct
// library can only refuse it or give a small (or, for a view, in-bounds) result: every size that
// would need memory is past int64 or past kHugeBytes, and no call asks for legitimate but endless
// work (a full reduction of 2^62 elements, a split into 2^62 pieces).
#include <cmath>
#include <sstream>

#include "random_calls.h"

namespace wick::adversarial {

namespace {

using Ins = std::vector<Tensor>;
using Out = std::vector<Tensor>;

template <typename... A>
std::string str(const A&... a) {
  std::ostringstream os;
  (os << ... << a);
  return os.str();
}

bool refusable(const Shape& shape, DType dtype) {
  const int64_t bytes = checked_bytes(shape, dtype);
  return bytes < 0 || bytes >= kHugeBytes;
}

// Sizes that drive an output size: past kHugeBytes or past int64, or negative.
int64_t big(Gen& g) {
  return g.pick(std::vector<int64_t>{p2(57) + 1, p2(61), p2(62), kI64Max - 1, kI64Max, -1, kI64Min, -p2(32)});
}

Shape without(const Shape& s, int d) {
  Shape out = s;
  out.erase(d);
  return out;
}

Call hostile_create(Gen& g) {
  const DType dt = g.any_dtype();
  const Shape s = g.hostile_shape(dt);
  const int op = static_cast<int>(g.range(0, 8));
  const int64_t n = g.hostile();
  const int variant = static_cast<int>(g.range(0, 5));
  const int64_t end = g.pick(std::vector<int64_t>{p2(59) + 3, p2(61), p2(62), kI64Max});
  Call c;
  c.hostile = true;
  static const char* names[] = {"zeros", "ones",   "full",      "rand_uniform",        "rand_normal",
                                "eye",   "arange", "from_data", "zeros_like of a view"};
  c.desc = str(names[op], " ", s, " ", dt, " n ", n, " arange variant ", variant, " end ", end);
  c.run = [=](Ins&, Device d) {
    switch (op) {
      case 0: return Out{Tensor::zeros(s, dt, d)};
      case 1: return Out{Tensor::ones(s, dt, d)};
      case 2: return Out{Tensor::full(s, 1, dt, d)};
      case 3: return Out{Tensor::rand_uniform(s, 0, 1, dt, d)};
      case 4: return Out{Tensor::rand_normal(s, 0, 1, dt, d)};
      case 5: return Out{Tensor::eye(n, dt, d)};
      case 6:
        switch (variant) {
          case 0: return Out{Tensor::arange(0, end, 1, DType::I64, d)};
          case 1: return Out{Tensor::arange(kI64Min, kI64Max, 1, DType::I64, d)};
          case 2: return Out{Tensor::arange(kI64Max, kI64Min, -1, DType::I32, d)};
          case 3: return Out{Tensor::arange(0.0, 1e300, 1e-300, DType::F64, d)};
          case 4: return Out{Tensor::arange(-1e300, 1e300, 1e280, DType::F32, d)};
          default: return Out{Tensor::arange(0, end, 2, DType::U8, d)};
        }
      case 7: {
        const std::vector<double> four(4, 1.0);
        return Out{Tensor::from_data(four.data(), p2(61), DType::F64, {p2(61)}, d)};
      }
      default: return Out{broadcast_zero(s, dt, d).zeros_like()};
    }
  };
  return c;
}

Call hostile_view_op(Gen& g) {
  const DType dt = g.any_dtype(), to = g.any_dtype();
  Shape s = g.huge_view_shape(dt);
  int op = static_cast<int>(g.range(0, 17));
  const int r = s.rank();
  const int dim = static_cast<int>(g.range(0, r - 1));
  if (op == 15 || op == 16) s = Shape{1, 1, p2(31), p2(31)};  // pooling: a 4-d input
  // Each op's output must be refusable too; otherwise the call becomes abs, whose output is.
  Shape out_shape = s;
  DType out_dtype = dt;
  switch (op) {
    case 3: out_dtype = to; break;
    case 6: out_dtype = DType::U8; break;
    case 9:
    case 10: out_shape = without(s, dim); break;
    case 11: out_shape = without(s, dim), out_dtype = DType::U32; break;
    case 13: out_dtype = DType::U32; break;
    default: break;
  }
  if (op == 11 && s[dim] > p2(32))
    out_shape = Shape{};  // must be refused for the index width alone
  else if (!refusable(out_shape, out_dtype))
    op = 0;
  Call c;
  c.hostile = true;
  c.inputs = {g.huge_input(dt, s)};
  static const char* names[] = {"abs",           "neg",           "exp",    "to_dtype", "contiguous",
                                "copy",          "eq(0)",         "where",  "affine",   "sum(dim)",
                                "max(dim)",      "argmax(dim)",   "cumsum", "argsort",  "pad_with_zeros",
                                "avg_pool2d(1)", "max_pool2d(1)", "add [1]"};
  c.desc = str(names[op], " dim ", dim, " to ", to);
  c.run = [=](Ins& in, Device d) {
    const Tensor& x = in[0];
    switch (op) {
      case 0: return Out{x.abs()};
      case 1: return Out{x.neg()};
      case 2: return Out{x.exp()};
      case 3: return Out{x.to_dtype(to)};
      case 4: return Out{x.contiguous()};
      case 5: return Out{x.copy()};
      case 6: return Out{x.eq(0)};
      case 7: return Out{where_cond(broadcast_zero(x.shape(), DType::U8, d), x, x)};
      case 8: return Out{x.affine(2, 1)};
      case 9: return Out{x.sum(dim)};
      case 10: return Out{x.max(dim)};
      case 11: return Out{x.argmax(dim)};
      case 12: return Out{x.cumsum(dim)};
      case 13: return Out{x.argsort()};
      case 14: return Out{x.pad_with_zeros(dim, 1, 1)};
      case 15: return Out{x.avg_pool2d(1)};
      case 16: return Out{x.max_pool2d(1)};
      default: return Out{x + Tensor::ones({1}, x.dtype(), d)};
    }
  };
  return c;
}

Call hostile_gather_join(Gen& g) {
  const DType dt = g.any_dtype(), it = g.index_dtype();
  const int64_t n = g.pick(std::vector<int64_t>{p2(61), p2(62), kI64Max, p2(57) + 1});
  const int op = static_cast<int>(g.range(0, 4));
  Call c;
  c.hostile = true;
  c.inputs = {g.input(dt, {3, 2}), g.huge_input(it, {n})};
  static const char* names[] = {"index_select", "embedding", "gather", "cat", "stack"};
  c.desc = str(names[op], " with ", n, " huge");
  c.run = [=](Ins& in, Device d) {
    const Tensor huge = broadcast_zero({n}, dt, d);
    switch (op) {
      case 0: return Out{in[0].index_select(in[1], 0)};
      case 1: return Out{embedding(in[0], in[1])};
      case 2: return Out{in[0].flatten().gather(in[1], 0)};
      case 3: return Out{cat({huge, huge, huge}, 0)};
      default: return Out{stack({huge, huge}, 0)};
    }
  };
  return c;
}

Call hostile_nn(Gen& g) {
  const DType dt = g.float_dtype();
  const int op = static_cast<int>(g.range(0, 9));
  const int64_t any = g.hostile(), size = big(g), size2 = big(g);
  const int which = static_cast<int>(g.range(0, 3));  // the parameter made hostile
  const double scale = g.pick(std::vector<double>{1e300, 0x1p57, INFINITY, NAN, -1, 1e-300, 0x1p62});
  Call c;
  c.hostile = true;
  c.inputs = {g.input(dt, op == 0 || op == 2 ? Shape{1, 2, 3} : Shape{1, 2, 3, 3}),
              g.input(dt, op == 0 || op == 2 ? Shape{2, 2, 2} : Shape{2, 2, 2, 2})};
  c.desc = str("nn op ", op, " parameter ", which, " any ", any, " size ", size, " ", size2, " scale ", scale);
  c.run = [=](Ins& in, Device) {
    const Tensor &x = in[0], &k = in[1];
    // Growing parameters take `size` (past kHugeBytes or int64); the others take any hostile value.
    Conv2dOptions o2;
    Conv1dOptions o1;
    const bool transposed = op == 2 || op == 3;
    const int64_t padding = which == 0 ? (transposed ? any : size) : 0;
    const int64_t stride = which == 1 ? (transposed ? size : any) : 1;
    const int64_t dilation = which == 2 ? (transposed ? size : any) : 1;
    const int64_t output_padding = which == 3 ? any : 0;
    o1 = {padding, stride, dilation, output_padding, 1};
    o2 = {padding, {stride, 1}, {1, dilation}, {output_padding, 0}, 1};
    switch (op) {
      case 0: return Out{x.conv1d(k, o1)};
      case 1: return Out{x.conv2d(k, o2)};
      case 2: return Out{x.conv_transpose1d(k, o1)};
      case 3: return Out{x.conv_transpose2d(k, o2)};
      case 4: return Out{x.avg_pool2d({any, 1}, {1, any})};
      case 5: return Out{x.max_pool2d(which < 2 ? Pair{any, 1} : Pair{1}, which < 2 ? Pair{1} : Pair{1, any})};
      case 6: return Out{x.upsample_nearest2d(size, size2)};
      case 7: return Out{x.upsample_bilinear2d(size, which == 0 ? size2 : 2, which == 1)};
      case 8: return Out{x.upsample_bilinear2d_scale(scale, which == 0 ? scale : 1.0)};
      default: return Out{x.pad_with_zeros(-1, size, which == 0 ? size2 : 0)};
    }
  };
  return c;
}

// Views and splits of a dim of (2^63 - 1) / dtype_size elements (no memory): an accepted view must stay inside
// its storage; pieces are few (split sizes of at least a quarter of the dim).
Call hostile_huge_view(Gen& g) {
  const DType dt = g.any_dtype();
  const int64_t a = g.hostile(), b = g.hostile(), step = g.hostile();
  const int64_t piece = g.pick(std::vector<int64_t>{p2(61), p2(62), kI64Max, -1, kI64Min, 0});
  const int64_t chunks = g.pick(std::vector<int64_t>{1, 2, 3, 4, -1, 0, kI64Min});
  const int op = static_cast<int>(g.range(0, 6));
  Call c;
  c.hostile = true;
  c.inputs = {g.huge_input(dt, {kI64Max / dtype_size(dt)})};  // the longest dim whose bytes fit
  static const char* names[] = {"narrow", "slice", "select", "split", "chunk", "split(sizes)", "unsqueeze+reshape"};
  c.desc = str(names[op], " a ", a, " b ", b, " step ", step, " piece ", piece, " chunks ", chunks);
  c.run = [=](Ins& in, Device) {
    const Tensor& x = in[0];
    switch (op) {
      case 0: return Out{x.narrow(0, a, b)};
      case 1: return Out{x.slice(0, a, b, step)};
      case 2: return Out{x.select(0, a)};
      case 3: return x.split(piece);
      case 4: return x.chunk(chunks);
      case 5: {
        const std::vector<int64_t> sizes = {piece, a, b};
        return x.split(sizes);
      }
      default: return Out{x.unsqueeze(0).reshape({a, -1})};
    }
  };
  return c;
}

}  // namespace

std::vector<Maker> hostile_makers() {
  return {{"hostile_create", 4, hostile_create},
          {"hostile_view_op", 5, hostile_view_op},
          {"hostile_gather_join", 2, hostile_gather_join},
          {"hostile_nn", 4, hostile_nn},
          {"hostile_huge_view", 3, hostile_huge_view}};
}

}  // namespace wick::adversarial
