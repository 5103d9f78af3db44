// Cases for the nn wing (include/wick/nn.h), run through the public functions as users call them:
// on a backend with a fused kernel they test the kernel, elsewhere the composition; the reference
// backend has no kernels, so its side is always the composition (the ops' oracle).
#include "parity/cases.h"
#include "wick/nn.h"

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
      cases.push_back({OpKey(op).name(), label(dt), shape_label(v.shape, "dim " + std::to_string(dim)), v.name, op,
                       {dt}, Compare::Float, false, [=](Ctx& c) {
                         const Tensor x = tensor(c.input(dt, v.shape, v.form(0, 1), v.values));
                         return result(log ? nn::log_softmax(x, dim) : nn::softmax(x, dim));
                       }});
    }
  }
}

void add_norm(std::vector<Case>& cases, DType dt, NnOp op) {
  for (const Variant& v : nn_variants(dt)) {
    // weight and bias: contiguous; stride 2 in the stride2 variant; a broadcast scalar (stride 0)
    // in the broadcast variant.
    for (bool with_bias : {true, false}) {
      if (op == NnOp::RmsNorm && !with_bias) continue;
      const std::string extra = op == NnOp::RmsNorm ? "" : with_bias ? "bias" : "no bias";
      cases.push_back({OpKey(op).name(), label(dt), shape_label(v.shape, extra), v.name, op, {dt}, Compare::Float,
                       false, [=](Ctx& c) {
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
                         const Tensor w = param(1);
                         if (op == NnOp::RmsNorm) return result(nn::rms_norm(x, w, 1e-5));
                         return result(with_bias ? nn::layer_norm(x, w, param(2), 1e-5) : nn::layer_norm(x, w, 1e-5));
                       }});
    }
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
    cases.push_back({OpKey(op).name(), label(dt), shape_label(v.shape), v.name, op, {dt}, Compare::Float, false,
                     [=](Ctx& c) { return run_rope(c, dt, op, v); }});
  }
}

}  // namespace

void add_fused_cases(std::vector<Case>& cases) {
  for (DType dt : kNnDTypes) {
    add_softmax(cases, dt, NnOp::Softmax);
    add_softmax(cases, dt, NnOp::LogSoftmax);
    add_norm(cases, dt, NnOp::RmsNorm);
    add_norm(cases, dt, NnOp::LayerNorm);
    for (NnOp op : {NnOp::Rope, NnOp::RopeI, NnOp::RopeThd}) add_rope(cases, dt, op);
  }
}

}  // namespace wick::parity
