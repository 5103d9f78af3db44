// The cases of `wick bench` and the inputs they make. Sizes depend on the scale: on a GPU every
// memory-bound case moves far more than the L2 cache holds; on the CPU the whole run takes under
// a minute on two cores; --quick is for tests.
#include <array>
#include <cmath>
#include <sstream>
#include <utility>

#include "backend/nn_kernels.h"
#include "bench.h"
#include "cpu/parallel.h"
#include "nn/nn_ops.h"
#include "parity/cases.h"

namespace wick::bench {

using parity::Arg;
using parity::label;

Inputs::Inputs(Backend& backend, uint64_t seed) : ctx_(backend, seed) { backend.set_seed(seed); }

Arg Inputs::floats(DType dtype, const Shape& shape, Form form, double lo, double hi) {
  const int r = shape.rank();
  Shape stored = shape;
  Layout view(shape);
  if (form == Form::Transposed && r >= 2) {
    std::swap(stored[r - 2], stored[r - 1]);
    view = Layout(stored).transpose(-2, -1);
  } else if (form == Form::Permuted && r >= 2) {
    std::vector<int64_t> dims = {r - 1};
    stored = Shape();
    for (int d = 1; d < r; ++d) {
      stored.push_back(shape[d]);
      dims.push_back(d - 1);
    }
    stored.push_back(shape[0]);
    view = Layout(stored).permute(dims);
  } else if (form == Form::Broadcast0 && r >= 1) {
    stored[0] = 1;
    view = Layout(stored).broadcast_as(shape);
  }
  return {backend().rand_uniform(stored, dtype, lo, hi), view, dtype};
}

Arg Inputs::cond(DType dtype, const Shape& shape) {
  // Uniform in [0, 2) cast to an integer (truncation): 0 or 1.
  const Layout layout(shape);
  StoragePtr f = backend().rand_uniform(shape, DType::F32, 0, 2);
  return {backend().cast(View{*f, layout, DType::F32}, dtype), layout, dtype};
}

Arg Inputs::indices(DType dtype, const Shape& shape, int64_t size) { return ctx_.indices(dtype, shape, size, false); }

std::string dims_label(const Shape& shape) {
  if (shape.rank() == 0) return "scalar";
  std::ostringstream os;
  for (int d = 0; d < shape.rank(); ++d) os << (d ? "x" : "") << shape[d];
  return os.str();
}

namespace {

struct Sizes {
  Shape elementwise;  // unary, binary, affine, cast, where, cmp, the copy ceilings
  Shape matrix;       // reductions and the transpose
  Shape broadcast;    // the binary op over a permuted and a broadcast operand
  Shape table;        // rows x columns of the embedding table
  int64_t ids = 0;    // rows looked up
  int64_t gemm = 0;   // m = n = k of the GEMM ceilings and the square matmuls
  Shape batched_a = {}, batched_b = {};
  Shape conv_x = {}, conv_k = {};
  Shape rows = {};     // the nn ops' (rows, features); also timed as (features, rows)
  Shape rope = {};     // rope's x (b, h, t, d)
  Shape prefill = {};  // causal attention's (b, h, t, d)
  std::vector<Shape> decode = {};  // attention of one query: (b, h, h_kv, t_kv, d)
  bool composed_prefill = false;  // time the composed prefill too (its scores fit in memory)
  bool gpu = false;  // half-precision and TF32 products, the batched matmul
};

Sizes sizes_for(Scale scale) {
  switch (scale) {
    case Scale::Gpu:
      return {.elementwise = {16384, 16384},
              .matrix = {8192, 16384},
              .broadcast = {64, 2048, 2048},
              .table = {131072, 4096},
              .ids = 16384,
              .gemm = 8192,
              .batched_a = {64, 2048, 128},
              .batched_b = {64, 128, 2048},
              .conv_x = {64, 256, 56, 56},
              .conv_k = {256, 256, 3, 3},
              .rows = {32768, 4096},
              .rope = {16, 32, 4096, 128},
              .prefill = {4, 32, 4096, 128},
              .decode = {{1, 32, 8, 4096, 128}, {16, 32, 8, 4096, 128}, {1, 32, 8, 32768, 128},
                         {16, 32, 8, 32768, 128}},
              .gpu = true};
    case Scale::Cpu: {
      // 16M elements (64 MB of f32) on a few cores; 4x that on 8 or more threads, whose server
      // parts can hold most of 64 MB in their last-level cache.
      const int64_t f = cpu::max_threads() >= 8 ? 2 : 1;
      return {.elementwise = {4096 * f, 4096 * f},
              .matrix = {2048 * f, 8192 * f},
              .broadcast = {16 * f * f, 1024, 1024},
              .table = {32768 * f * f, 1024},
              .ids = 4096 * f * f,
              .gemm = 2048,
              .conv_x = {8, 64, 56, 56},
              .conv_k = {64, 64, 3, 3},
              .rows = {16384 * f, 1024},
              .rope = {2 * f, 32, 1024, 128},
              .prefill = {1, 8, 1024, 64},
              .decode = {{1, 32, 8, 4096, 128}},
              .composed_prefill = true};
    }
    case Scale::Quick: break;
  }
  return {.elementwise = {256, 256},
          .matrix = {64, 128},
          .broadcast = {4, 32, 32},
          .table = {512, 64},
          .ids = 64,
          .gemm = 64,
          .conv_x = {1, 4, 8, 8},
          .conv_k = {4, 4, 3, 3},
          .rows = {128, 64},
          .rope = {1, 2, 8, 16},
          .prefill = {1, 2, 64, 16},
          .decode = {{1, 4, 2, 128, 16}},
          .composed_prefill = true};
}

double size_of(DType dt) { return static_cast<double>(dtype_size(dt)); }

// A case timing one call on inputs made by `make`: the call's result is what it returns.
template <typename Make>
std::function<Run(Inputs&)> prepare(Make make) {
  return [make](Inputs& in) -> Run { return make(in, in.backend()); };
}

void add_elementwise(std::vector<Case>& cases, const Sizes& s) {
  const Shape shape = s.elementwise;
  const double n = static_cast<double>(shape.numel());
  const std::string dims = dims_label(shape);
  for (UnaryOp op : {UnaryOp::Exp, UnaryOp::Silu}) {
    for (DType dt : {DType::F32, DType::BF16}) {
      cases.push_back({.op = OpKey(op).name(),
                       .dtype = label(dt),
                       .shape = dims,
                       .layout = "contiguous",
                       .main_dtype = dt,
                       .key = op,
                       .dtypes = {dt},
                       .bytes = 2 * n * size_of(dt),
                       .prepare = prepare([=](Inputs& in, Backend& b) {
                         Arg x = in.floats(dt, shape);
                         return [&b, op, x] { return b.unary(op, x.view()); };
                       })});
    }
  }
  for (DType dt : {DType::F32, DType::BF16}) {
    cases.push_back({.op = "binary.add",
                     .dtype = label(dt),
                     .shape = dims,
                     .layout = "contiguous",
                     .main_dtype = dt,
                     .key = BinaryOp::Add,
                     .dtypes = {dt},
                     .bytes = 3 * n * size_of(dt),
                     .prepare = prepare([=](Inputs& in, Backend& b) {
                       Arg x = in.floats(dt, shape), y = in.floats(dt, shape);
                       return [&b, x, y] { return b.binary(BinaryOp::Add, x.view(), y.view()); };
                     })});
  }
  for (DType dt : {DType::F32, DType::BF16}) {
    cases.push_back({.op = "affine",
                     .dtype = label(dt),
                     .shape = dims,
                     .layout = "contiguous",
                     .main_dtype = dt,
                     .key = OpCode::Affine,
                     .dtypes = {dt},
                     .bytes = 2 * n * size_of(dt),
                     .prepare = prepare([=](Inputs& in, Backend& b) {
                       Arg x = in.floats(dt, shape);
                       return [&b, x] { return b.affine(x.view(), 1.5, -0.25); };
                     })});
  }
  for (auto [from, to] : {std::pair{DType::F32, DType::BF16}, std::pair{DType::BF16, DType::F32}}) {
    cases.push_back({.op = "cast",
                     .dtype = label(from) + "->" + label(to),
                     .shape = dims,
                     .layout = "contiguous",
                     .main_dtype = from,
                     .key = OpCode::Cast,
                     .dtypes = {from, to},
                     .bytes = n * (size_of(from) + size_of(to)),
                     .prepare = prepare([=](Inputs& in, Backend& b) {
                       Arg x = in.floats(from, shape);
                       return [&b, x, to] { return b.cast(x.view(), to); };
                     })});
  }
  cases.push_back({.op = "where",
                   .dtype = label(DType::F32, DType::U8),
                   .shape = dims,
                   .layout = "contiguous",
                   .main_dtype = DType::F32,
                   .key = OpCode::Where,
                   .dtypes = {DType::U8, DType::F32},
                   .bytes = n * (1 + 3 * 4),
                   .prepare = prepare([=](Inputs& in, Backend& b) {
                     Arg k = in.cond(DType::U8, shape), t = in.floats(DType::F32, shape),
                         f = in.floats(DType::F32, shape);
                     return [&b, k, t, f] { return b.where(k.view(), t.view(), f.view()); };
                   })});
  for (DType dt : {DType::F32, DType::BF16}) {
    cases.push_back({.op = "cmp.lt",
                     .dtype = label(dt),
                     .shape = dims,
                     .layout = "contiguous",
                     .main_dtype = dt,
                     .key = CmpOp::Lt,
                     .dtypes = {dt},
                     .bytes = n * (2 * size_of(dt) + 1),
                     .prepare = prepare([=](Inputs& in, Backend& b) {
                       Arg x = in.floats(dt, shape), y = in.floats(dt, shape);
                       return [&b, x, y] { return b.cmp(CmpOp::Lt, x.view(), y.view()); };
                     })});
  }
}

void add_reduce(std::vector<Case>& cases, const Sizes& s) {
  const Shape shape = s.matrix;
  const double n = static_cast<double>(shape.numel());
  struct R {
    ReduceOp op;
    int dim;
  };
  for (R r :
       {R{ReduceOp::Sum, 1}, R{ReduceOp::Sum, 0}, R{ReduceOp::Max, 1}, R{ReduceOp::Max, 0}, R{ReduceOp::ArgMax, 1}}) {
    for (DType dt : {DType::F32, DType::BF16}) {
      const bool arg = r.op == ReduceOp::ArgMax;
      const double out = static_cast<double>(shape[1 - r.dim]) * (arg ? 4 : size_of(dt));
      cases.push_back({.op = OpKey(r.op).name(),
                       .dtype = label(dt),
                       .shape = dims_label(shape) + " over " + std::to_string(r.dim),
                       .layout = "contiguous",
                       .main_dtype = dt,
                       .key = r.op,
                       .dtypes = {dt},
                       .bytes = n * size_of(dt) + out,
                       .prepare = prepare([=](Inputs& in, Backend& b) {
                         Arg x = in.floats(dt, shape);
                         return [&b, x, r] {
                           const int dims[] = {r.dim};
                           return b.reduce(r.op, x.view(), dims);
                         };
                       })});
    }
  }
}

// copy_strided from `form` into a contiguous buffer made once.
Case copy_case(const Shape& shape, DType dt, Form form, const char* layout) {
  return {.op = "copy_strided",
          .dtype = label(dt),
          .shape = dims_label(shape),
          .layout = layout,
          .main_dtype = dt,
          .key = OpCode::CopyStrided,
          .dtypes = {dt},
          .bytes = 2 * static_cast<double>(shape.numel()) * size_of(dt),
          .defines = form == Form::Contiguous ? "copy" : "",
          .prepare = prepare([=](Inputs& in, Backend& b) {
            Arg x = in.floats(dt, shape, form);
            StoragePtr dst = b.alloc(dt, shape.numel());
            return [&b, x, dst, dt, to = Layout(shape)] {
              b.copy_strided(x.view(), MutView{*dst, to, dt});
              return StoragePtr();
            };
          })};
}

void add_copies_and_index(std::vector<Case>& cases, const Sizes& s) {
  cases.push_back(copy_case(s.matrix, DType::F32, Form::Transposed, "transposed"));

  const Shape bs = s.broadcast;
  const double n = static_cast<double>(bs.numel());
  cases.push_back({.op = "binary.add",
                   .dtype = "f32",
                   .shape = dims_label(bs),
                   .layout = "permuted+broadcast",
                   .main_dtype = DType::F32,
                   .key = BinaryOp::Add,
                   .dtypes = {DType::F32},
                   .bytes = 4 * (2 * n + n / static_cast<double>(bs[0])),
                   .prepare = prepare([=](Inputs& in, Backend& b) {
                     Arg x = in.floats(DType::F32, bs, Form::Permuted), y = in.floats(DType::F32, bs, Form::Broadcast0);
                     return [&b, x, y] { return b.binary(BinaryOp::Add, x.view(), y.view()); };
                   })});

  // Embedding lookups: only the rows looked up are read.
  const Shape table = s.table;
  const int64_t ids = s.ids;
  const double rows_bytes = static_cast<double>(ids * table[1]) * 2;
  const std::string dims = dims_label(table) + " ids " + std::to_string(ids);
  cases.push_back({.op = "index_select",
                   .dtype = label(DType::BF16, DType::U32),
                   .shape = dims,
                   .layout = "contiguous",
                   .main_dtype = DType::BF16,
                   .key = OpCode::IndexSelect,
                   .dtypes = {DType::BF16, DType::U32},
                   .bytes = 2 * rows_bytes + 4.0 * static_cast<double>(ids),
                   .prepare = prepare([=](Inputs& in, Backend& b) {
                     Arg x = in.floats(DType::BF16, table), i = in.indices(DType::U32, {ids}, table[0]);
                     return [&b, x, i] { return b.index_select(x.view(), i.view(), 0); };
                   })});
  // gather along dim 0 with one id per row, broadcast over the columns (stride 0).
  cases.push_back({.op = "gather",
                   .dtype = label(DType::BF16, DType::U32),
                   .shape = dims,
                   .layout = "ids-broadcast",
                   .main_dtype = DType::BF16,
                   .key = OpCode::Gather,
                   .dtypes = {DType::BF16, DType::U32},
                   .bytes = 2 * rows_bytes + 4.0 * static_cast<double>(ids),
                   .prepare = prepare([=](Inputs& in, Backend& b) {
                     Arg x = in.floats(DType::BF16, table), i = in.indices(DType::U32, {ids, 1}, table[0]);
                     i.layout = i.layout.broadcast_as({ids, table[1]});
                     return [&b, x, i] { return b.gather(x.view(), i.view(), 0); };
                   })});
}

// a (..., m, k) @ b (..., k, n); values in [-1, 1) keep f16 sums in range.
Case matmul_case(const Shape& a, const Shape& b, DType dt, bool tf32, std::string defines) {
  const int r = a.rank();
  const double batch = static_cast<double>(a.numel() / (a[r - 2] * a[r - 1]));
  const double m = static_cast<double>(a[r - 2]), k = static_cast<double>(a[r - 1]), n = static_cast<double>(b[r - 1]);
  return {.op = "matmul",
          .dtype = label(dt),
          .shape = dims_label(a) + " @ " + dims_label(b),
          .layout = tf32 ? "tf32" : "contiguous",
          .main_dtype = dt,
          .key = OpCode::Matmul,
          .dtypes = {dt},
          .bytes = batch * (m * k + k * n + m * n) * size_of(dt),
          .flops = 2 * batch * m * n * k,
          .tf32 = tf32,
          .defines = std::move(defines),
          .prepare = prepare([=](Inputs& in, Backend& be) {
            Arg x = in.floats(dt, a, Form::Contiguous, -1, 1), y = in.floats(dt, b, Form::Contiguous, -1, 1);
            return [&be, x, y] { return be.matmul(x.view(), y.view()); };
          })};
}

// x (N, C, H, W) * k (C_out, C, KH, KW), stride 1, padding 1; own_gemm: through wick's own
// im2col + GEMM path instead of the vendor library (GPU backends).
Case conv_case(const Shape& x, const Shape& k, DType dt, bool tf32, bool own_gemm = false) {
  ConvParams p;
  p.padding[0] = p.padding[1] = 1;
  const Shape out = conv_output_shape(x, k, p, 2, false);
  const double flops = 2.0 * static_cast<double>(out.numel()) * static_cast<double>(k[1] * k[2] * k[3]);
  return {.op = "conv2d",
          .dtype = label(dt),
          .shape = dims_label(x) + " * " + dims_label(k) + " pad 1",
          .layout = own_gemm ? "own-gemm"
                    : tf32   ? "tf32"
                             : "contiguous",
          .main_dtype = dt,
          .key = OpCode::Conv2d,
          .dtypes = {dt},
          .bytes = static_cast<double>(x.numel() + k.numel() + out.numel()) * size_of(dt),
          .flops = flops,
          .tf32 = tf32,
          .prepare = prepare([=](Inputs& in, Backend& b) {
            Arg xs = in.floats(dt, x, Form::Contiguous, -1, 1), ks = in.floats(dt, k, Form::Contiguous, -1, 1);
            if (!own_gemm) return Run([&b, xs, ks, p] { return b.conv2d(xs.view(), ks.view(), p); });
            return Run([&b, xs, ks, p] {
              b.set_option("conv", "gemm");
              StoragePtr out = b.conv2d(xs.view(), ks.view(), p);
              b.set_option("conv", "library");
              return out;
            });
          })};
}

}  // namespace

// The nn wing's fused kernels over the last dim of (rows, features) and (features, rows).
void add_fused(std::vector<Case>& cases, const Sizes& s) {
  for (const Shape& shape : {s.rows, Shape{s.rows[1], s.rows[0]}}) {
    const double n = static_cast<double>(shape.numel());
    const int64_t d = shape[1];
    for (NnOp op : {NnOp::Softmax, NnOp::LogSoftmax, NnOp::RmsNorm, NnOp::AddRmsNorm, NnOp::LayerNorm, NnOp::SiluMul}) {
      for (DType dt : {DType::F32, DType::BF16}) {
        const bool norm = op == NnOp::RmsNorm || op == NnOp::AddRmsNorm || op == NnOp::LayerNorm;
        // Rows read and written: add_rms_norm reads two and writes two, silu_mul reads two.
        const double streams = op == NnOp::AddRmsNorm ? 4 : op == NnOp::SiluMul ? 3 : 2;
        cases.push_back({.op = OpKey(op).name(),
                         .dtype = label(dt),
                         .shape = dims_label(shape),
                         .layout = "contiguous",
                         .main_dtype = dt,
                         .key = op,
                         .dtypes = {dt},
                         .bytes = streams * n * size_of(dt) + (norm ? 2 * static_cast<double>(d) * size_of(dt) : 0),
                         .prepare = prepare([=](Inputs& in, Backend& b) {
                           const Arg x = in.floats(dt, shape, Form::Contiguous, -4, 4);
                           const Arg y = in.floats(dt, shape, Form::Contiguous, -4, 4);  // residual, up
                           const Arg w = in.floats(dt, {d}, Form::Contiguous, 0.5, 1.5);
                           const Arg bias = in.floats(dt, {d});
                           return [&b, op, x, y, w, bias] {
                             const View bv = bias.view();
                             switch (op) {
                               case NnOp::RmsNorm: return b.nn()->rms_norm(x.view(), w.view(), 1e-5);
                               case NnOp::AddRmsNorm:
                                 return b.nn()->add_rms_norm(x.view(), y.view(), w.view(), 1e-5).second;
                               case NnOp::SiluMul: return b.nn()->silu_mul(x.view(), y.view());
                               case NnOp::LayerNorm: return b.nn()->layer_norm(x.view(), w.view(), &bv, 1e-5);
                               default: return b.nn()->softmax(x.view(), 1, op == NnOp::LogSoftmax);
                             }
                           };
                         })});
      }
    }
  }
}

// rope, rope_i and rope_thd on x (b, h, t, d) ((b, t, h, d) for rope_thd), and rope on a model's
// (b, t, h, d) transposed to (b, h, t, d); the bytes are x read and the output written (the
// tables, t rows, are small beside them).
void add_rope(std::vector<Case>& cases, const Sizes& s) {
  const Shape bhtd = s.rope, bthd = {s.rope[0], s.rope[2], s.rope[1], s.rope[3]};
  const int64_t t = s.rope[2], half = s.rope[3] / 2;
  const double n = static_cast<double>(bhtd.numel());
  for (NnOp op : {NnOp::Rope, NnOp::RopeI, NnOp::RopeThd}) {
    for (bool transposed : {false, true}) {
      if (transposed && op != NnOp::Rope) continue;
      for (DType dt : {DType::F32, DType::BF16}) {
        const bool thd = op == NnOp::RopeThd;
        const RopePairs pairs = op == NnOp::RopeI ? RopePairs::Interleaved : RopePairs::Halves;
        cases.push_back({.op = OpKey(op).name(),
                         .dtype = label(dt),
                         .shape = dims_label(thd ? bthd : bhtd),
                         .layout = transposed ? "bthd-transposed" : "contiguous",
                         .main_dtype = dt,
                         .key = op,
                         .dtypes = {dt},
                         .bytes = 2 * n * size_of(dt),
                         .prepare = prepare([=](Inputs& in, Backend& b) {
                           Arg x = in.floats(dt, thd || transposed ? bthd : bhtd, Form::Contiguous, -4, 4);
                           if (transposed) x.layout = x.layout.transpose(1, 2);
                           const Arg c = in.floats(dt, {t, half}, Form::Contiguous, -1, 1);
                           const Arg sn = in.floats(dt, {t, half}, Form::Contiguous, -1, 1);
                           return [&b, x, c, sn, pairs, thd] {
                             return b.nn()->rope(x.view(), c.view(), sn.view(), pairs, thd);
                           };
                         })});
      }
    }
  }
}

// rope_write_at's kernel: q (b, h, t, d), k and v (b, h / 4, t, d) turned and written into caches
// of t positions (rope's sizes; the front end composes steps of several positions, the kernel
// takes them), and one decoding step of each decode shape (b, h, h_kv, capacity, d); the bytes are
// q, k and v read and written once (the tables and positions are small beside them).
void add_rope_write(std::vector<Case>& cases, const Sizes& s) {
  std::vector<std::array<int64_t, 6>> shapes;  // b, h, h_kv, t, capacity, d
  if (s.rope[1] % 4 == 0) shapes.push_back({s.rope[0], s.rope[1], s.rope[1] / 4, s.rope[2], s.rope[2], s.rope[3]});
  for (const Shape& d : s.decode) shapes.push_back({d[0], d[1], d[2], 1, d[3], d[4]});
  for (const auto& [b, h, h_kv, t, capacity, d] : shapes)
    for (DType dt : {DType::F32, DType::BF16}) {
      const double n = static_cast<double>((h + 2 * h_kv) * b * t * d);
      cases.push_back(
          {.op = OpKey(NnOp::RopeWriteAt).name(),
           .dtype = label(dt),
           .shape = dims_label({b, h, t, d}) + " kv " + std::to_string(h_kv) + "x" + std::to_string(capacity),
           .layout = "contiguous",
           .main_dtype = dt,
           .key = NnOp::RopeWriteAt,
           .dtypes = {dt},
           .bytes = 2 * n * size_of(dt),
           .prepare = prepare([=](Inputs& in, Backend& be) {
             const Arg q = in.floats(dt, {b, h, t, d}, Form::Contiguous, -4, 4);
             const Arg k = in.floats(dt, {b, h_kv, t, d}, Form::Contiguous, -4, 4);
             const Arg v = in.floats(dt, {b, h_kv, t, d}, Form::Contiguous, -4, 4);
             const Arg c = in.floats(dt, {t, d / 2}, Form::Contiguous, -1, 1);
             const Arg sn = in.floats(dt, {t, d / 2}, Form::Contiguous, -1, 1);
             const Tensor positions = Tensor::arange(t, DType::I64, be.device());  // distinct
             const Arg at{positions.storage(), positions.layout(), positions.dtype()};
             const Arg kc = in.floats(dt, {b, h_kv, capacity, d}), vc = in.floats(dt, {b, h_kv, capacity, d});
             return [&be, q, k, v, c, sn, at, kc, vc] {
               return be.nn()->rope_write_at(q.view(), k.view(), v.view(), c.view(), sn.view(), RopePairs::Halves,
                                             at.view(), kc.mut(), vc.mut(), false);
             };
           })});
    }
}

// nn.attention: causal prefill (t_q = t_kv) in FLOP/s of 4 b h t^2 d / 2, and decode (one query,
// grouped heads) in GB/s of the keys and values read; with `composed`, the same through the
// composition of wick ops (matmul, reductions, elementwise), which runs wherever matmul does.
void add_attention(std::vector<Case>& cases, const Sizes& s) {
  struct Shapes {
    Shape q, kv;
    bool causal;
  };
  std::vector<Shapes> all = {{s.prefill, s.prefill, true}};
  for (const Shape& d : s.decode) all.push_back({{d[0], d[1], 1, d[4]}, {d[0], d[2], d[3], d[4]}, false});
  const std::vector<DType> dtypes =
      s.gpu ? std::vector<DType>{DType::BF16} : std::vector<DType>{DType::F32, DType::BF16};
  for (const Shapes& sh : all) {
    const bool prefill = sh.causal;
    for (DType dt : dtypes) {
      for (bool composed : {false, true}) {
        if (composed && prefill && !s.composed_prefill) continue;  // a GPU's would hold tens of GB of scores
        const double t = static_cast<double>(sh.kv[2]);
        const AttentionArgs args{1 / std::sqrt(static_cast<double>(sh.q[3])), sh.causal, 0};
        cases.push_back(
            {.op = OpKey(NnOp::Attention).name(),
             .dtype = label(dt),
             .shape = dims_label(sh.q) + (prefill ? " causal" : " kv " + dims_label(sh.kv)),
             .layout = composed ? "composed" : "contiguous",
             .main_dtype = dt,
             .key = composed ? OpKey(OpCode::Matmul) : OpKey(NnOp::Attention),
             .dtypes = {dt},
             .bytes = 2 * static_cast<double>(sh.kv.numel()) * size_of(dt),
             .flops = prefill ? 2 * static_cast<double>(sh.q.numel()) * t : 0,
             .prepare = prepare([=](Inputs& in, Backend& b) {
               const Arg q = in.floats(dt, sh.q), k = in.floats(dt, sh.kv), v = in.floats(dt, sh.kv);
               if (!composed)
                 return Run(
                     [&b, q, k, v, args] { return b.nn()->attention(q.view(), k.view(), v.view(), nullptr, args); });
               return Run([q, k, v, args] {
                 auto tensor = [](const Arg& a) { return Tensor(a.storage, a.layout, a.dtype); };
                 return nn::detail::attention_composed(tensor(q), tensor(k), tensor(v), Tensor(), args).storage();
               });
             })});
      }
    }
  }
}

// nn.paged_attention: one decoding step of each decode shape (b, h, h_kv, t_kv, d) as the engine
// runs it, b queries each reading t_kv positions of its own sequence through a table of 16-position
// blocks (the blocks of all sequences shuffled in the pools), in GB/s of the keys and values read.
void add_paged_attention(std::vector<Case>& cases, const Sizes& s) {
  constexpr int64_t kBlock = 16;
  for (const Shape& sh : s.decode) {
    const int64_t b = sh[0], h = sh[1], h_kv = sh[2], t_kv = sh[3], d = sh[4];
    const int64_t per_seq = (t_kv + kBlock - 1) / kBlock, blocks = b * per_seq;
    for (DType dt : {DType::F32, DType::BF16}) {
      const AttentionArgs args{1 / std::sqrt(static_cast<double>(d)), true, 0};
      cases.push_back(
          {.op = OpKey(NnOp::PagedAttention).name(),
           .dtype = label(dt),
           .shape = dims_label({b, h, d}) + " kv " + std::to_string(h_kv) + "x" + std::to_string(t_kv),
           .layout = "blocks of 16",
           .main_dtype = dt,
           .key = NnOp::PagedAttention,
           .dtypes = {dt},
           .bytes = 2 * static_cast<double>(b * t_kv * h_kv * d) * size_of(dt),
           .prepare = prepare([=](Inputs& in, Backend& be) {
             const Arg q = in.floats(dt, {b, h, d});
             const Arg k = in.floats(dt, {blocks, kBlock, h_kv, d}), v = in.floats(dt, {blocks, kBlock, h_kv, d});
             std::vector<int32_t> order(static_cast<size_t>(blocks)), seq(static_cast<size_t>(b)),
                 last(static_cast<size_t>(b), static_cast<int32_t>(t_kv - 1));
             for (int64_t i = 0; i < blocks; ++i)
               order[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919) % blocks);
             for (int64_t i = 0; i < b; ++i) seq[static_cast<size_t>(i)] = static_cast<int32_t>(i);
             auto ints = [&](const std::vector<int32_t>& x, Shape shape) {
               const Tensor t = Tensor::from_vector(x, shape, be.device());
               return Arg{t.storage(), t.layout(), t.dtype()};
             };
             const Arg tables = ints(order, {b, per_seq}), seqs = ints(seq, {b}), positions = ints(last, {b});
             return [&be, q, k, v, tables, seqs, positions, args] {
               return be.nn()->paged_attention(q.view(), k.view(), v.view(), tables.view(), seqs.view(),
                                               positions.view(), args);
             };
           })});
    }
  }
}

std::vector<Case> bench_cases(Scale scale) {
  const Sizes s = sizes_for(scale);
  std::vector<Case> cases;
  // The ceilings: a raw copy (copy2d of whole rows) and a contiguous copy_strided, then a large
  // GEMM per float dtype; each is also a case of its own.
  const Shape e = s.elementwise;
  cases.push_back({.op = "copy2d",
                   .dtype = "f32",
                   .shape = dims_label(e),
                   .layout = "contiguous",
                   .main_dtype = DType::F32,
                   .key = OpCode::Copy2d,
                   .dtypes = {DType::F32},
                   .bytes = 2 * static_cast<double>(e.numel()) * 4,
                   .defines = "copy",
                   .prepare = prepare([=](Inputs& in, Backend& b) {
                     Arg x = in.floats(DType::F32, e);
                     StoragePtr dst = b.alloc(DType::F32, e.numel());
                     const Copy2dParams p{e[0], e[1], e[1], e[1], 0, 0};
                     return [&b, x, dst, p] {
                       b.copy2d(*x.storage, *dst, DType::F32, p);
                       return StoragePtr();
                     };
                   })});
  cases.push_back(copy_case(e, DType::F32, Form::Contiguous, "contiguous"));
  const Shape sq = {s.gemm, s.gemm};
  std::vector<std::pair<DType, bool>> gemms = {{DType::F32, false}, {DType::F64, false}};
  if (s.gpu)
    gemms = {{DType::BF16, false}, {DType::F16, false}, {DType::F32, false}, {DType::F32, true}, {DType::F64, false}};
  for (auto [dt, tf32] : gemms)
    cases.push_back(matmul_case(sq, sq, dt, tf32, "gemm " + label(dt) + (tf32 ? " tf32" : "")));

  add_elementwise(cases, s);
  add_reduce(cases, s);
  add_copies_and_index(cases, s);
  add_fused(cases, s);
  add_rope(cases, s);
  add_rope_write(cases, s);
  add_attention(cases, s);
  add_paged_attention(cases, s);
  if (s.gpu) cases.push_back(matmul_case(s.batched_a, s.batched_b, DType::BF16, false, ""));
  cases.push_back(conv_case(s.conv_x, s.conv_k, DType::F32, false));
  if (s.gpu) {
    cases.push_back(conv_case(s.conv_x, s.conv_k, DType::F32, true));
    cases.push_back(conv_case(s.conv_x, s.conv_k, DType::BF16, false));
    cases.push_back(conv_case(s.conv_x, s.conv_k, DType::F32, false, true));
    cases.push_back(conv_case(s.conv_x, s.conv_k, DType::BF16, false, true));
  }
  add_quant_cases(cases, scale);
  return cases;
}

}  // namespace wick::bench
