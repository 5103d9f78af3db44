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

}  // namespace

void add_fused_cases(std::vector<Case>& cases) {
  for (DType dt : kNnDTypes) {
    add_softmax(cases, dt, NnOp::Softmax);
    add_softmax(cases, dt, NnOp::LogSoftmax);
    add_norm(cases, dt, NnOp::RmsNorm);
    add_norm(cases, dt, NnOp::LayerNorm);
  }
}

}  // namespace wick::parity
