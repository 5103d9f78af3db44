// Cases for the nn wing (include/wick/nn.h), run through the public functions as users call them:
// on a backend with a fused kernel they test the kernel, elsewhere the composition; the reference
// backend has no kernels, so its side is always the composition (the ops' oracle).
#include <functional>
#include <limits>

#include "parity/cases.h"
#include "wick/nn.h"
#include "wick/ops.h"

namespace wick::parity {

namespace {

constexpr DType kNnDTypes[] = {DType::F64, DType::F32, DType::F16, DType::BF16};

Tensor tensor(const Arg& a) { return Tensor(a.storage, a.layout, a.dtype); }

// The result's storage as the harness compares it: contiguous from element 0.
Output result(const Tensor& t) {
  Tensor c = t.contiguous();
  if (c.offset() != 0) c = c.copy();
  return {c.storage(), c.dtype()};
}

// The layouts of the softmax and norm inputs; the last dim varies the most (the fused kernels'
// groups of threads per row).
std::vector<Variant> nn_variants(DType dt) {
  std::vector<Variant> v;
  for (Variant s : standard_variants(dt))
    if (s.name != "rank0") v.push_back(s);
  v.push_back({"wide_values", {3, 4, 7}, Values::Wide});
  v.push_back({"long_rows", {3, 2, 5000}});
  v.push_back({"long_rows_transposed", {3, 700, 6}});  // the transposed form: a strided reduced dim
  v.push_back({"many_short_rows", {300, 8, 3}});
  // Row lengths for each plan of the GPU's rows-in-registers path (a warp, a block of 256, a block
  // of 1024 threads) and one past it.
  v.push_back({"rows_warp", {5, 3, 96}});
  v.push_back({"rows_block", {2, 3, 2048}});
  v.push_back({"rows_wide_block", {2, 32768}});
  v.push_back({"rows_past_registers", {1, 70000}});
  return v;
}

void add_softmax(std::vector<Case>& cases, DType dt, NnOp op) {
  const bool log = op == NnOp::LogSoftmax;
  for (const Variant& v : nn_variants(dt)) {
    for (int dim = -1; dim < v.shape.rank(); ++dim) {
      if (dim == v.shape.rank() - 1) continue;  // -1 already
      cases.push_back({OpKey(op).name(),
                       label(dt),
                       shape_label(v.shape, "dim " + std::to_string(dim)),
                       v.name,
                       op,
                       {dt},
                       Compare::Float,
                       false,
                       [=](Ctx& c) {
                         const Tensor x = tensor(c.input(dt, v.shape, v.form(0, 1), v.values));
                         return result(log ? nn::log_softmax(x, dim) : nn::softmax(x, dim));
                       }});
    }
  }
}

void add_norm(std::vector<Case>& cases, DType dt, NnOp op) {
  for (const Variant& v : nn_variants(dt)) {
    // weight and bias: contiguous; stride 2 in the stride2 variant; a broadcast scalar (stride 0)
    // in the broadcast variant. rms_norm's `with_bias` false: a weight of x's last two dims (m, d),
    // a row for each of x's rows along dim -2, in the variant's layout.
    for (bool with_bias : {true, false}) {
      if (op == NnOp::RmsNorm && !with_bias && (v.shape.rank() < 2 || v.name == "broadcast")) continue;
      const std::string extra = op == NnOp::RmsNorm ? (with_bias ? "" : "weight per row")
                                : with_bias         ? "bias"
                                                    : "no bias";
      cases.push_back({OpKey(op).name(),
                       label(dt),
                       shape_label(v.shape, extra),
                       v.name,
                       op,
                       {dt},
                       Compare::Float,
                       false,
                       [=](Ctx& c) {
                         const Tensor x = tensor(c.input(dt, v.shape, v.form(0, 3), v.values));
                         const int64_t d = v.shape[v.shape.rank() - 1];
                         auto param = [&](int k) {
                           if (v.name == "broadcast") {
                             Arg a = c.input(dt, {1}, Form::Contiguous, Values::Positive);
                             a.layout = a.layout.broadcast_as({d});
                             return tensor(a);
                           }
                           return tensor(c.input(dt, {d}, v.form(k, 3), Values::Normal));
                         };
                         if (op == NnOp::RmsNorm && !with_bias) {
                           const Shape rows({v.shape[v.shape.rank() - 2], d});
                           return result(
                               nn::rms_norm(x, tensor(c.input(dt, rows, v.form(1, 3), Values::Normal)), 1e-5));
                         }
                         const Tensor w = param(1);
                         if (op == NnOp::RmsNorm) return result(nn::rms_norm(x, w, 1e-5));
                         return result(with_bias ? nn::layer_norm(x, w, param(2), 1e-5) : nn::layer_norm(x, w, 1e-5));
                       }});
    }
  }
}

// add_rms_norm with x, the residual and the weight each in the variant's layout (the rows variants
// take the GPU's one-kernel path, the others its add then rms_norm); the result compared is the
// sum and the normed rows, one after the other.
void add_add_rms_norm(std::vector<Case>& cases, DType dt) {
  for (const Variant& v : nn_variants(dt)) {
    cases.push_back({OpKey(NnOp::AddRmsNorm).name(),
                     label(dt),
                     shape_label(v.shape),
                     v.name,
                     NnOp::AddRmsNorm,
                     {dt},
                     Compare::Float,
                     false,
                     [=](Ctx& c) {
                       const Tensor x = tensor(c.input(dt, v.shape, v.form(0, 3), v.values));
                       const Tensor residual = tensor(c.input(dt, v.shape, v.form(1, 3), Values::Normal));
                       const Tensor w =
                           tensor(c.input(dt, {v.shape[v.shape.rank() - 1]}, Form::Contiguous, Values::Normal));
                       const nn::AddRmsNorm r = nn::add_rms_norm(x, residual, w, 1e-5);
                       return result(cat({r.sum.flatten_all(), r.normed.flatten_all()}, 0));
                     }});
  }
}

// silu_mul of two operands in the variant's layouts, and of the two halves of one stacked row
// (a model's gate and up products computed as one).
void add_silu_mul(std::vector<Case>& cases, DType dt) {
  auto add = [&](const std::string& layout, const Shape& shape, std::function<Output(Ctx&)> run) {
    cases.push_back({OpKey(NnOp::SiluMul).name(),
                     label(dt),
                     shape_label(shape),
                     layout,
                     NnOp::SiluMul,
                     {dt},
                     Compare::Float,
                     false,
                     std::move(run)});
  };
  for (const Variant& v : nn_variants(dt)) {
    add(v.name, v.shape, [=](Ctx& c) {
      const Tensor gate = tensor(c.input(dt, v.shape, v.form(0, 2), v.values));
      const Tensor up = tensor(c.input(dt, v.shape, v.form(1, 2), Values::Normal));
      return result(nn::silu_mul(gate, up));
    });
  }
  for (const Shape& shape : {Shape({1, 1, 4096}), Shape({5, 3, 96}), Shape({16, 1, 1000})}) {
    add("stacked_halves", shape, [=](Ctx& c) {
      const int64_t n = shape[2];
      const Tensor both = tensor(c.input(dt, {shape[0], shape[1], 2 * n}, Form::Contiguous, Values::Normal));
      return result(nn::silu_mul(both.narrow(-1, 0, n), both.narrow(-1, n, n)));
    });
  }
}

// rope's x as the op reads it ((b, h, t, d), (b, t, h, d) for rope_thd) and how x and the tables
// lie in their storage.
enum class RopeX { Contiguous, Swapped, Form };  // Swapped: dims 1 and 2 stored the other way round
enum class RopeTableForm { Contiguous, Broadcast, Transposed, Offset };
struct RopeVariant {
  std::string name;
  Shape shape;
  RopeX x = RopeX::Contiguous;
  Form form = Form::Contiguous;  // with RopeX::Form
  RopeTableForm tables = RopeTableForm::Contiguous;
  Values values = Values::Normal;
};

// Heads of 128 and 16 features take the GPU's 16-byte packs for every dtype (as do narrower ones
// for some); the others, and every strided d, its thread per pair.
std::vector<RopeVariant> rope_variants() {
  return {
      {"contiguous", {2, 3, 5, 8}},
      {"swapped", {2, 3, 5, 16}, RopeX::Swapped},  // a model's (b, t, h, d) viewed as (b, h, t, d)
      {"transposed", {2, 3, 5, 8}, RopeX::Form, Form::Transposed},
      {"narrow", {2, 3, 5, 8}, RopeX::Form, Form::Narrow},
      {"stride2", {2, 3, 5, 8}, RopeX::Form, Form::Stride2},
      {"permuted", {2, 3, 5, 8}, RopeX::Form, Form::Permuted},
      {"broadcast", {2, 3, 5, 8}, RopeX::Form, Form::Broadcast},
      {"tables_broadcast", {2, 3, 5, 8}, RopeX::Contiguous, Form::Contiguous, RopeTableForm::Broadcast},
      {"tables_transposed", {2, 3, 5, 16}, RopeX::Contiguous, Form::Contiguous, RopeTableForm::Transposed},
      {"tables_offset", {1, 2, 7, 16}, RopeX::Contiguous, Form::Contiguous, RopeTableForm::Offset},
      {"odd_half", {3, 5, 7, 6}},
      {"one_pair", {2, 3, 11, 2}},
      {"size1", {1, 1, 1, 4}},
      {"empty_batch", {0, 3, 5, 8}},
      {"empty_t", {2, 3, 0, 8}},
      {"empty_d", {2, 3, 5, 0}},
      {"special", {2, 3, 5, 8}, RopeX::Contiguous, Form::Contiguous, RopeTableForm::Contiguous, Values::Special},
      {"heads", {2, 4, 33, 128}},
      {"heads_swapped", {2, 4, 33, 128}, RopeX::Swapped},
      {"heads_offset", {1, 4, 9, 128}, RopeX::Contiguous, Form::Contiguous, RopeTableForm::Offset},
      {"large", {2, 8, 64, 128}},  // several threads' worth of rows
  };
}

// One rope case: x and the tables as the variant lays them out, through the public function.
Output run_rope(Ctx& c, DType dt, NnOp op, const RopeVariant& v) {
  const Shape& s = v.shape;
  Tensor x;
  if (v.x == RopeX::Swapped) {
    x = tensor(c.input(dt, {s[0], s[2], s[1], s[3]}, Form::Contiguous, v.values)).transpose(1, 2);
  } else {
    x = tensor(c.input(dt, s, v.x == RopeX::Form ? v.form : Form::Contiguous, v.values));
  }
  const int64_t t = s[op == NnOp::RopeThd ? 1 : 2], half = s[3] / 2;
  auto table = [&] {
    switch (v.tables) {
      case RopeTableForm::Broadcast: return tensor(c.input(dt, {1, half})).broadcast_as({t, half});
      case RopeTableForm::Transposed: return tensor(c.input(dt, {half, t})).t();
      case RopeTableForm::Offset: return tensor(c.input(dt, {t + 5, half})).narrow(0, 3, t);
      case RopeTableForm::Contiguous: break;
    }
    return tensor(c.input(dt, {t, half}));
  };
  const Tensor cos = table(), sin = table();
  switch (op) {
    case NnOp::RopeI: return result(nn::rope_i(x, cos, sin));
    case NnOp::RopeThd: return result(nn::rope_thd(x, cos, sin));
    default: return result(nn::rope(x, cos, sin));
  }
}

void add_rope(std::vector<Case>& cases, DType dt, NnOp op) {
  for (const RopeVariant& v : rope_variants()) {
    cases.push_back(
        {OpKey(op).name(), label(dt), shape_label(v.shape), v.name, op, {dt}, Compare::Float, false, [=](Ctx& c) {
           return run_rope(c, dt, op, v);
         }});
  }
}

// rope_write_at: a step's q, k and v as the model gives them (views of one stacked product) or as
// strided tensors of their own, written into a cache that already holds values, so that the
// positions left alone are seen too. The result is the turned q, then every key and value of the
// cache. A GPU's kernel takes steps of one position, in 16-byte packs for heads of 128, 64 and 16
// features, one feature at a time for 6 and for strided rows; steps of several positions (where
// one may repeat: the last wins) are composed everywhere.
struct RopeWriteVariant {
  std::string name;
  int64_t b, h, h_kv, t, d, capacity;
  std::vector<int64_t> at;  // one past the capacity: an IndexError; i64's maximum: skipped
  bool stacked = true;      // views of (b, t, (h + 2 h_kv) d), else (b, heads, t, d) of `form`
  Form form = Form::Contiguous;
};

std::vector<RopeWriteVariant> rope_write_variants() {
  constexpr int64_t kSkip = std::numeric_limits<int64_t>::max();
  return {
      {"decode", 1, 32, 8, 1, 128, 40, {17}},
      {"batch", 3, 4, 2, 1, 64, 9, {5}},
      {"stride2", 2, 4, 2, 1, 16, 6, {4}, false, Form::Stride2},
      {"pairs_of_6", 1, 2, 1, 1, 6, 4, {2}},
      {"skip", 1, 4, 2, 1, 16, 6, {kSkip}},
      {"past_capacity", 1, 4, 2, 1, 16, 6, {6}},
      {"positions", 2, 4, 2, 3, 16, 9, {7, 0, 3}, false},
      {"repeated_positions", 1, 4, 2, 3, 16, 9, {2, 5, 2}, false, Form::Transposed},
  };
}

Output run_rope_write(Ctx& c, DType dt, bool interleaved, const RopeWriteVariant& v) {
  const Device dev = c.backend().device();
  Tensor q, k, val;
  if (v.stacked) {
    const Tensor y = tensor(c.input(dt, {v.b, v.t, (v.h + 2 * v.h_kv) * v.d}));
    auto heads = [&](int64_t from, int64_t n) {
      return y.narrow(2, from * v.d, n * v.d).reshape({v.b, v.t, n, v.d}).transpose(1, 2);
    };
    q = heads(0, v.h);
    k = heads(v.h, v.h_kv);
    val = heads(v.h + v.h_kv, v.h_kv);
  } else {
    q = tensor(c.input(dt, {v.b, v.h, v.t, v.d}, v.form));
    k = tensor(c.input(dt, {v.b, v.h_kv, v.t, v.d}, v.form));
    val = tensor(c.input(dt, {v.b, v.h_kv, v.t, v.d}, v.form));
  }
  const Tensor cos = tensor(c.input(dt, {v.t, v.d / 2})), sin = tensor(c.input(dt, {v.t, v.d / 2}));
  nn::KvCache cache(v.b, v.h_kv, v.capacity, v.d, dt, dev);
  cache.append(tensor(c.input(dt, {v.b, v.h_kv, v.capacity, v.d})),
               tensor(c.input(dt, {v.b, v.h_kv, v.capacity, v.d})));
  const Tensor at = Tensor::from_vector(v.at, {v.t}, dev);
  const nn::KvCache::Rotated r = cache.rope_write_at(q, k, val, cos, sin, interleaved, at, v.capacity);
  auto flat = [](const Tensor& x) { return x.contiguous().reshape({x.numel()}); };
  return result(cat({flat(r.q), flat(r.keys), flat(r.values)}, 0));
}

void add_rope_write(std::vector<Case>& cases, DType dt) {
  for (const RopeWriteVariant& v : rope_write_variants())
    for (bool interleaved : {false, true}) {
      std::string extra = "kv " + std::to_string(v.h_kv) + ", capacity " + std::to_string(v.capacity);
      cases.push_back({OpKey(NnOp::RopeWriteAt).name(),
                       label(dt),
                       shape_label({v.b, v.h, v.t, v.d}, extra),
                       v.name + (interleaved ? ".interleaved" : ""),
                       NnOp::RopeWriteAt,
                       {dt},
                       Compare::Float,
                       v.name == "past_capacity",
                       [=](Ctx& c) { return run_rope_write(c, dt, interleaved, v); }});
    }
}

// rope_write_attention: a decoding step's rope, cache write and attention (one kernel on a GPU for
// halves whose key heads take up to 16 query heads; 32 composed). The result is the attention's
// output, then every key and value of the cache.
struct RopeAttendVariant {
  std::string name;
  int64_t b, h, h_kv, d, capacity, at, length;
  int64_t window = 0;
  bool padding = false;  // a (b, 1, 1, length) mask, about a sixth of the keys -inf
};

std::vector<RopeAttendVariant> rope_attend_variants() {
  constexpr int64_t kSkip = std::numeric_limits<int64_t>::max();
  return {
      {"decode", 1, 32, 8, 128, 40, 39, 40},  {"long", 2, 8, 2, 64, 300, 299, 300, 0, true},
      {"middle", 1, 4, 2, 16, 70, 20, 50, 9}, {"group16", 1, 16, 1, 64, 70, 69, 70},
      {"group32", 1, 32, 1, 64, 33, 32, 33},  {"head_dim256", 1, 2, 1, 256, 40, 39, 40},
      {"skip", 1, 4, 2, 16, 6, kSkip, 6},     {"past_capacity", 1, 4, 2, 16, 6, 6, 6},
  };
}

Output run_rope_attend(Ctx& c, DType dt, bool interleaved, const RopeAttendVariant& v) {
  const Device dev = c.backend().device();
  const Tensor y = tensor(c.input(dt, {v.b, 1, (v.h + 2 * v.h_kv) * v.d}));
  auto heads = [&](int64_t from, int64_t n) {
    return y.narrow(2, from * v.d, n * v.d).reshape({v.b, 1, n, v.d}).transpose(1, 2);
  };
  const Tensor cos = tensor(c.input(dt, {1, v.d / 2})), sin = tensor(c.input(dt, {1, v.d / 2}));
  nn::KvCache cache(v.b, v.h_kv, v.capacity, v.d, dt, dev);
  cache.append(tensor(c.input(dt, {v.b, v.h_kv, v.capacity, v.d})),
               tensor(c.input(dt, {v.b, v.h_kv, v.capacity, v.d})));
  nn::AttentionOptions o;
  o.window = v.window;
  if (v.padding) {
    const Tensor x = tensor(c.input(dt, {v.b, 1, 1, v.length}));
    o.mask = x.lt(-2).where_cond(Tensor::scalar(-std::numeric_limits<double>::infinity(), dt, dev), x.zeros_like());
  }
  const Tensor at = Tensor::from_vector(std::vector<int64_t>{v.at}, {1}, dev);
  const Tensor out = cache.rope_write_attention(heads(0, v.h), heads(v.h, v.h_kv), heads(v.h + v.h_kv, v.h_kv), cos,
                                                sin, interleaved, at, v.length, o);
  auto flat = [](const Tensor& x) { return x.contiguous().reshape({x.numel()}); };
  return result(cat({flat(out), flat(cache.keys()), flat(cache.values())}, 0));
}

void add_rope_attend(std::vector<Case>& cases, DType dt) {
  for (const RopeAttendVariant& v : rope_attend_variants())
    for (bool interleaved : {false, true}) {
      std::string extra =
          "kv " + std::to_string(v.h_kv) + "x" + std::to_string(v.length) + ", capacity " + std::to_string(v.capacity);
      if (v.window) extra += " window " + std::to_string(v.window);
      if (v.padding) extra += " mask padding";
      cases.push_back({OpKey(NnOp::RopeWriteAt).name(),
                       label(dt),
                       shape_label({v.b, v.h, 1, v.d}, extra),
                       "attention." + v.name + (interleaved ? ".interleaved" : ""),
                       NnOp::RopeWriteAt,
                       {dt},
                       Compare::Float,
                       v.name == "past_capacity",
                       [=](Ctx& c) { return run_rope_attend(c, dt, interleaved, v); }});
    }
}

// ---- attention ----------------------------------------------------------------------------------

enum class Mask {
  None,
  Full,     // (b, h, t_q, t_kv), values only
  Square,   // (t_q, t_kv) broadcast over b and h, about a sixth -inf, and query row 0 all -inf
  Padding,  // (b, 1, 1, t_kv), about a sixth of the keys -inf
};

// How q, k and v are laid out: as made (Form), or (b, t, h, d) tensors transposed to (b, h, t, d).
enum class AttnLayout { Contiguous, Bthd, Narrow, Stride2, Transposed, KvBroadcast };

struct AttnVariant {
  std::string name;
  int64_t b, h, h_kv, t_q, t_kv, d;
  bool causal = false;
  int64_t window = 0;
  Mask mask = Mask::None;
  AttnLayout layout = AttnLayout::Contiguous;
  Values values = Values::Normal;
  double scale = 0;  // 0: the default 1 / sqrt(d)
};

std::vector<AttnVariant> attention_variants() {
  using L = AttnLayout;
  std::vector<AttnVariant> v = {
      {"contiguous", 2, 4, 4, 9, 9, 16},
      {"contiguous", 2, 4, 4, 9, 9, 16, true},
      {"bthd", 2, 4, 2, 13, 13, 32, true, 0, Mask::None, L::Bthd},
      {"bthd", 2, 4, 4, 6, 11, 8, false, 0, Mask::None, L::Bthd},
      {"narrow", 2, 4, 2, 7, 10, 12, true, 0, Mask::None, L::Narrow},
      {"stride2", 1, 3, 1, 8, 8, 10, false, 0, Mask::None, L::Stride2},
      {"transposed", 2, 2, 2, 5, 9, 6, true, 0, Mask::None, L::Transposed},  // d at a stride of t
      {"kv_broadcast", 3, 4, 2, 5, 7, 8, false, 0, Mask::None, L::KvBroadcast},
      {"mask", 2, 4, 2, 9, 12, 16, false, 0, Mask::Full},
      {"mask", 2, 4, 2, 9, 12, 16, true, 0, Mask::Square, L::Bthd},
      {"mask", 2, 4, 4, 10, 10, 16, false, 0, Mask::Square},
      {"mask", 3, 2, 1, 6, 70, 16, false, 0, Mask::Padding, L::Narrow},
      {"window", 1, 4, 2, 20, 20, 8, true, 4},
      {"window", 1, 2, 2, 9, 30, 8, false, 5},
      {"window", 2, 4, 1, 70, 140, 16, true, 33, Mask::Square},
      {"gqa4", 2, 8, 2, 9, 15, 16, true},
      {"gqa8", 1, 8, 1, 11, 11, 16, false},
      {"gqa8", 2, 8, 1, 1, 40, 32, true, 0, Mask::None, L::Bthd},
      {"decode", 2, 4, 2, 1, 700, 64, true},
      {"decode", 1, 8, 1, 1, 700, 32, false, 0, Mask::Padding},
      {"decode", 1, 4, 4, 1, 300, 16, true, 100},
      {"decode", 1, 8, 2, 1, 2000, 128, true, 0, Mask::None, L::Narrow},  // a cache's filled part
      {"decode", 2, 8, 8, 3, 1500, 64, true},                             // three tokens at once
      {"prefill", 1, 4, 2, 300, 300, 128, true, 0, Mask::None, L::Bthd},
      {"prefill", 1, 4, 1, 200, 260, 64, false, 0, Mask::Full},
      {"prefill", 2, 8, 2, 160, 400, 64, true},  // causal, fewer queries than keys
      {"t_q<t_kv", 1, 4, 2, 5, 23, 16, true},
      {"t_q>t_kv", 2, 2, 1, 7, 3, 8, true},  // rows 0..3 see no key
      {"t_q>t_kv", 1, 2, 2, 7, 3, 8, false},
      {"tiles", 1, 2, 1, 130, 130, 32, true, 0, Mask::None, L::Bthd},
      {"tiles", 1, 4, 2, 67, 129, 8, false},
      {"wide_values", 2, 2, 1, 9, 9, 16, false, 0, Mask::None, L::Contiguous, Values::Wide},
      {"wide_values", 1, 2, 2, 9, 17, 16, true, 0, Mask::None, L::Contiguous, Values::Wide},
      {"scale", 1, 2, 1, 6, 8, 8, true, 0, Mask::None, L::Contiguous, Values::Normal, 0.3},
      {"empty", 0, 4, 2, 5, 5, 8},
      {"empty", 1, 4, 2, 0, 5, 8, true},
      {"empty", 1, 4, 2, 5, 0, 8, true},
      {"empty", 1, 4, 2, 5, 5, 0},
      {"empty", 1, 0, 2, 5, 5, 8},
  };
  for (int64_t d : {64, 80, 96, 128, 256})
    v.push_back({"head_dim", 1, 2, 1, 17, 70, d, true, 0, Mask::None, d == 80 ? L::Bthd : L::Contiguous});
  return v;
}

// A (b, h, t, d) operand of the variant's layout.
Tensor attention_operand(Ctx& c, DType dt, const AttnVariant& v, int64_t heads, int64_t t) {
  const Shape shape = {v.b, heads, t, v.d};
  // f16 holds no value beyond 65504: its large values are the f32 ones clamped.
  if (v.values == Values::Wide && dt == DType::F16)
    return tensor(c.input(DType::F32, shape, Form::Contiguous, Values::Wide)).clamp(-6e4, 6e4).to_dtype(dt);
  switch (v.layout) {
    case AttnLayout::Bthd: return tensor(c.input(dt, {v.b, t, heads, v.d}, Form::Contiguous, v.values)).transpose(1, 2);
    case AttnLayout::Narrow: return tensor(c.input(dt, shape, Form::Narrow, v.values));
    case AttnLayout::Stride2: return tensor(c.input(dt, shape, Form::Stride2, v.values));
    case AttnLayout::Transposed: return tensor(c.input(dt, shape, Form::Transposed, v.values));
    case AttnLayout::KvBroadcast:
      if (heads != v.h) return tensor(c.input(dt, {1, heads, t, v.d}, Form::Contiguous, v.values)).broadcast_as(shape);
      break;
    case AttnLayout::Contiguous: break;
  }
  return tensor(c.input(dt, shape, Form::Contiguous, v.values));
}

Tensor attention_mask(Ctx& c, DType dt, const AttnVariant& v) {
  const Device dev = c.backend().device();
  const Tensor inf = Tensor::scalar(-std::numeric_limits<double>::infinity(), dt, dev);
  switch (v.mask) {
    case Mask::None: return {};
    case Mask::Full: return tensor(c.input(dt, {v.b, v.h, v.t_q, v.t_kv}));
    case Mask::Square: {
      const Tensor x = tensor(c.input(dt, {v.t_q, v.t_kv}));
      const Tensor first_row = Tensor::arange(v.t_q, DType::I64, dev).eq(0).reshape({v.t_q, 1});
      return x.lt(-2).maximum(first_row).where_cond(inf, x);
    }
    case Mask::Padding: {
      const Tensor x = tensor(c.input(dt, {v.b, 1, 1, v.t_kv}));
      return x.lt(-2).where_cond(inf, x.zeros_like());
    }
  }
  return {};
}

// A GPU backend runs each attention case through each of its paths: the vendor library where it
// serves (else wick's kernels), wick's kernels ("own": the matrix units where the device has
// them) and wick's kernels without the matrix units ("rows").
void add_attention(std::vector<Case>& cases, DType dt) {
  for (const AttnVariant& v : attention_variants())
    for (const char* path : {"library", "own", "rows"}) {
      std::string extra = "kv " + std::to_string(v.h_kv) + "x" + std::to_string(v.t_kv);
      if (v.causal) extra += " causal";
      if (v.window) extra += " window " + std::to_string(v.window);
      if (v.mask != Mask::None)
        extra += v.mask == Mask::Full ? " mask" : v.mask == Mask::Square ? " mask (t_q, t_kv) -inf" : " mask padding";
      std::string layout = v.layout == AttnLayout::Bthd ? v.name + ".bthd" : v.name;
      if (std::string_view(path) != "library") layout += std::string(".") + path;
      cases.push_back({OpKey(NnOp::Attention).name(),
                       label(dt),
                       shape_label({v.b, v.h, v.t_q, v.d}, extra),
                       layout,
                       NnOp::Attention,
                       {dt},
                       Compare::Float,
                       false,
                       [=](Ctx& c) {
                         BackendOption guard(c.backend(), "attention", path);
                         const Tensor q = attention_operand(c, dt, v, v.h, v.t_q);
                         const Tensor k = attention_operand(c, dt, v, v.h_kv, v.t_kv);
                         const Tensor val = attention_operand(c, dt, v, v.h_kv, v.t_kv);
                         nn::AttentionOptions o;
                         o.causal = v.causal;
                         o.window = v.window;
                         o.mask = attention_mask(c, dt, v);
                         if (v.scale > 0) o.scale = v.scale;
                         return result(nn::scaled_dot_product_attention(q, k, val, o));
                       }});
    }
}

}  // namespace

void add_fused_cases(std::vector<Case>& cases) {
  for (DType dt : kNnDTypes) {
    add_softmax(cases, dt, NnOp::Softmax);
    add_softmax(cases, dt, NnOp::LogSoftmax);
    add_norm(cases, dt, NnOp::RmsNorm);
    add_add_rms_norm(cases, dt);
    add_norm(cases, dt, NnOp::LayerNorm);
    for (NnOp op : {NnOp::Rope, NnOp::RopeI, NnOp::RopeThd}) add_rope(cases, dt, op);
    add_rope_write(cases, dt);
    add_rope_attend(cases, dt);
    add_attention(cases, dt);
    add_silu_mul(cases, dt);
  }
}

}  // namespace wick::parity
