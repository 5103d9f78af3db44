// Cases for matmul, the convolutions, pooling and upsampling.
#include <sstream>

#include "parity/cases.h"

namespace wick::parity {

namespace {

// An input of `shape`, made with `stored` dims and then broadcast (stride 0 where stored has 1).
Arg broadcast_input(Ctx& c, DType dt, const Shape& stored, const Shape& shape, Form form = Form::Contiguous) {
  Arg a = c.input(dt, stored, form);
  a.layout = a.layout.broadcast_as(shape);
  return a;
}

struct MatmulCase {
  const char* name;
  Shape a, b;                // as the backend sees them (batch dims equal)
  Shape a_stored, b_stored;  // when broadcast: the stored shapes
  Form fa = Form::Contiguous, fb = Form::Contiguous;
};

void add_matmul(std::vector<Case>& cases, DType dt) {
  const MatmulCase list[] = {
      {"contiguous", {5, 7}, {7, 3}, {}, {}},
      {"transposed_a", {5, 7}, {7, 3}, {}, {}, Form::Transposed},
      {"transposed_b", {5, 7}, {7, 3}, {}, {}, Form::Contiguous, Form::Transposed},
      {"transposed_both", {5, 7}, {7, 3}, {}, {}, Form::Transposed, Form::Transposed},
      {"narrow", {5, 7}, {7, 3}, {}, {}, Form::Narrow, Form::Narrow},
      {"stride2", {5, 7}, {7, 3}, {}, {}, Form::Stride2, Form::Stride2},
      {"batched", {2, 3, 5, 7}, {2, 3, 7, 4}, {}, {}},
      {"broadcast_batch", {2, 3, 5, 7}, {2, 3, 7, 4}, {2, 1, 5, 7}, {1, 3, 7, 4}},
      {"batched_rank5", {2, 3, 2, 5, 7}, {2, 3, 2, 7, 4}, {}, {}},
      {"batched_rank5_transposed", {2, 3, 2, 5, 7}, {2, 3, 2, 7, 4}, {}, {}, Form::Transposed, Form::Transposed},
      {"broadcast_batches", {2, 4, 3, 5, 7}, {2, 4, 3, 7, 6}, {2, 1, 3, 5, 7}, {1, 4, 1, 7, 6}},
      {"broadcast_batches_transposed",
       {2, 4, 3, 5, 7},
       {2, 4, 3, 7, 6},
       {2, 1, 3, 5, 7},
       {1, 4, 1, 7, 6},
       Form::Transposed,
       Form::Transposed},
      {"broadcast_rows", {5, 7}, {7, 4}, {}, {1, 4}},
      {"vector", {1, 7}, {7, 1}, {}, {}},
      {"empty_m", {0, 7}, {7, 3}, {}, {}},
      {"empty_k", {5, 0}, {0, 3}, {}, {}},
      {"empty_n", {5, 7}, {7, 0}, {}, {}},
      {"empty_batch", {2, 0, 5, 7}, {2, 0, 7, 4}, {}, {}},
      {"broadcast_empty_batch", {2, 0, 5, 7}, {2, 0, 7, 4}, {2, 1, 5, 7}, {1, 0, 7, 4}},
      {"prime", {37, 41}, {41, 29}, {}, {}},
      {"large", {64, 128}, {128, 96}, {}, {}},
      {"many_small", {64, 8, 8}, {64, 8, 8}, {}, {}, Form::Transposed},
      // A few rows times a weight stored as rows (b transposed): one row, a wide weight split
      // over threads by columns with k past whole vectors, and the first row count past them.
      {"linear_one_row", {1, 1024}, {1024, 97}, {}, {}, Form::Contiguous, Form::Transposed},
      {"linear_few_rows", {3, 300}, {300, 257}, {}, {}, Form::Contiguous, Form::Transposed},
      {"linear_few_rows_strided", {8, 300}, {300, 257}, {}, {}, Form::Stride2, Form::Transposed},
      {"linear_many_rows", {9, 300}, {300, 64}, {}, {}, Form::Contiguous, Form::Transposed},
      // k a whole number of 16-byte words: rows of a batch over one broadcast weight, and 8 rows
      // times an odd count of weight rows (the GPU's kernel for a few rows).
      {"linear_batch_rows", {2, 3, 256}, {2, 256, 40}, {}, {1, 256, 40}, Form::Contiguous, Form::Transposed},
      {"linear_eight_rows", {8, 512}, {512, 33}, {}, {}, Form::Contiguous, Form::Transposed},
      // A weight of 1203 rows (more blocks of wick's few-row GPU kernel, which takes f32 and, on
      // ROCm, halves, than the device holds at once; k past whole passes of its groups of lanes)
      // times 1 to 8 rows.
      {"linear_wide_weight", {1, 2056}, {2056, 1203}, {}, {}, Form::Contiguous, Form::Transposed},
      {"linear_wide_weight_rows", {5, 2056}, {2056, 1203}, {}, {}, Form::Contiguous, Form::Transposed},
      {"linear_wide_weight_eight", {8, 2056}, {2056, 1203}, {}, {}, Form::Contiguous, Form::Transposed},
      {"linear_wide_weight_batch",
       {2, 3, 2056},
       {2, 2056, 1203},
       {},
       {1, 2056, 1203},
       Form::Contiguous,
       Form::Transposed},
  };
  for (const MatmulCase& m : list) {
    std::ostringstream label;
    label << m.a << " x " << m.b;
    cases.push_back(
        {"matmul", parity::label(dt), label.str(), m.name, OpCode::Matmul, {dt}, Compare::Float, false, [=](Ctx& c) {
           Arg a = m.a_stored.empty() ? c.input(dt, m.a, m.fa) : broadcast_input(c, dt, m.a_stored, m.a, m.fa);
           Arg b = m.b_stored.empty() ? c.input(dt, m.b, m.fb) : broadcast_input(c, dt, m.b_stored, m.b, m.fb);
           return out(c.backend().matmul(a.view(), b.view()), dt);
         }});
  }
}

struct ConvCase {
  const char* name;
  int64_t cin, cout;
  int64_t k[2];
  ConvParams p;
};

ConvParams params(std::initializer_list<int64_t> stride, std::initializer_list<int64_t> padding,
                  std::initializer_list<int64_t> dilation, int64_t groups = 1,
                  std::initializer_list<int64_t> output_padding = {0, 0}) {
  ConvParams p;
  auto set = [](int64_t* dst, std::initializer_list<int64_t> v) {
    int i = 0;
    for (int64_t x : v) dst[i++] = x;
  };
  set(p.stride, stride);
  set(p.padding, padding);
  set(p.dilation, dilation);
  set(p.output_padding, output_padding);
  p.groups = groups;
  return p;
}

void add_conv(std::vector<Case>& cases, DType dt, int spatial, bool transposed) {
  const OpCode code = spatial == 1 ? (transposed ? OpCode::ConvTranspose1d : OpCode::Conv1d)
                                   : (transposed ? OpCode::ConvTranspose2d : OpCode::Conv2d);
  std::vector<ConvCase> list = {
      {"basic", 4, 6, {3, 3}, params({1, 1}, {0, 0}, {1, 1})},
      {"strided_padded", 4, 6, {3, 3}, params({2, 2}, {1, 1}, {1, 1})},
      {"dilated", 4, 6, {3, 3}, params({1, 1}, {2, 2}, {2, 2})},
      {"groups", 4, 6, {3, 3}, params({1, 1}, {1, 1}, {1, 1}, 2)},
      {"depthwise", 4, 4, {3, 3}, params({1, 1}, {1, 1}, {1, 1}, 4)},
      {"pointwise", 4, 6, {1, 1}, params({1, 1}, {0, 0}, {1, 1})},
      {"large", 16, 32, {3, 3}, params({1, 1}, {1, 1}, {1, 1})},
  };
  if (spatial == 2) list.push_back({"asymmetric", 4, 6, {3, 2}, params({2, 1}, {0, 1}, {1, 2})});
  if (transposed) list.push_back({"output_padding", 4, 6, {3, 3}, params({2, 2}, {1, 1}, {1, 1}, 1, {1, 1})});
  struct Layouts {
    const char* name;
    Form x, k;
    int64_t n;
  };
  const Layouts layouts[] = {{"contiguous", Form::Contiguous, Form::Contiguous, 2},
                             {"transposed", Form::Transposed, Form::Contiguous, 2},
                             {"stride2", Form::Stride2, Form::Contiguous, 2},
                             {"narrow", Form::Narrow, Form::Narrow, 2},
                             {"kernel_transposed", Form::Contiguous, Form::Transposed, 2},
                             {"empty", Form::Contiguous, Form::Contiguous, 0}};
  for (const ConvCase& cc : list) {
    for (const Layouts& l : layouts)
      for (const char* path : {"library", "gemm"}) {
        if (std::string(cc.name) == "large" && std::string(l.name) != "contiguous") continue;
        const int64_t hw = std::string(cc.name) == "large" ? 20 : 7;
        Shape x_shape = spatial == 1 ? Shape{l.n, cc.cin, 11} : Shape{l.n, cc.cin, hw, hw + 2};
        Shape k_shape = transposed ? Shape{cc.cin, cc.cout / cc.p.groups} : Shape{cc.cout, cc.cin / cc.p.groups};
        for (int a = 0; a < spatial; ++a) k_shape.push_back(cc.k[spatial == 1 ? 0 : a]);
        ConvParams p = cc.p;
        std::ostringstream label;
        label << x_shape << " * " << k_shape;
        // A GPU backend runs each case through its convolution library and through wick's own path.
        const std::string variant = std::string(cc.name) + "." + l.name + (std::string(path) == "gemm" ? ".gemm" : "");
        cases.push_back({std::string(op_name(code)),
                         parity::label(dt),
                         label.str(),
                         variant,
                         code,
                         {dt},
                         Compare::Float,
                         false,
                         [=](Ctx& c) {
                           BackendOption guard(c.backend(), "conv", path);
                           Arg x = c.input(dt, x_shape, l.x);
                           Arg k = c.input(dt, k_shape, l.k);
                           Backend& b = c.backend();
                           StoragePtr s = spatial == 1 ? (transposed ? b.conv_transpose1d(x.view(), k.view(), p)
                                                                     : b.conv1d(x.view(), k.view(), p))
                                                       : (transposed ? b.conv_transpose2d(x.view(), k.view(), p)
                                                                     : b.conv2d(x.view(), k.view(), p));
                           return out(std::move(s), dt);
                         }});
      }
  }
}

struct Spatial {
  const char* name;
  Form form;
  int64_t n;
  Values values;
};

std::vector<Spatial> spatial_variants(DType dt) {
  std::vector<Spatial> v = {{"contiguous", Form::Contiguous, 2, Values::Normal},
                            {"transposed", Form::Transposed, 2, Values::Normal},
                            {"stride2", Form::Stride2, 2, Values::Normal},
                            {"narrow", Form::Narrow, 2, Values::Normal},
                            {"empty", Form::Contiguous, 0, Values::Normal}};
  if (is_float(dt)) v.push_back({"special", Form::Contiguous, 2, Values::Special});
  return v;
}

void add_pool(std::vector<Case>& cases, DType dt, bool max) {
  const OpCode code = max ? OpCode::MaxPool2d : OpCode::AvgPool2d;
  if (!op_defined(code, std::vector<DType>{dt})) return;
  struct P {
    const char* name;
    PoolParams p;
  };
  const P list[] = {{"k2s2", {{2, 2}, {2, 2}}},
                    {"k3s1", {{3, 3}, {1, 1}}},
                    {"k2x3s1x2", {{2, 3}, {1, 2}}},
                    {"global", {{7, 8}, {7, 8}}}};
  for (const P& pp : list) {
    for (const Spatial& v : spatial_variants(dt)) {
      Shape shape{v.n, 3, 7, 8};
      cases.push_back({std::string(op_name(code)),
                       label(dt),
                       shape_label(shape),
                       std::string(pp.name) + "." + v.name,
                       code,
                       {dt},
                       max ? Compare::Exact : Compare::Float,
                       false,
                       [=](Ctx& c) {
                         Arg x = c.input(dt, shape, v.form, v.values);
                         return out(
                             max ? c.backend().max_pool2d(x.view(), pp.p) : c.backend().avg_pool2d(x.view(), pp.p), dt);
                       }});
    }
  }
}

void add_upsample(std::vector<Case>& cases, DType dt) {
  for (const Spatial& v : spatial_variants(dt)) {
    for (int64_t size : {11, 3, 5}) {
      Shape shape{v.n, 3, 5};
      cases.push_back({"upsample_nearest1d",
                       label(dt),
                       shape_label(shape, "to " + std::to_string(size)),
                       v.name,
                       OpCode::UpsampleNearest1d,
                       {dt},
                       Compare::Exact,
                       false,
                       [=](Ctx& c) {
                         Arg x = c.input(dt, shape, v.form, v.values);
                         return out(c.backend().upsample_nearest1d(x.view(), size), dt);
                       }});
    }
    for (auto [h, w] : {std::pair<int64_t, int64_t>{9, 7}, {3, 2}, {5, 4}}) {
      Shape shape{v.n, 3, 5, 4};
      std::string to = "to " + std::to_string(h) + "x" + std::to_string(w);
      cases.push_back({"upsample_nearest2d",
                       label(dt),
                       shape_label(shape, to),
                       v.name,
                       OpCode::UpsampleNearest2d,
                       {dt},
                       Compare::Exact,
                       false,
                       [=](Ctx& c) {
                         Arg x = c.input(dt, shape, v.form, v.values);
                         return out(c.backend().upsample_nearest2d(x.view(), h, w), dt);
                       }});
      if (!is_float(dt)) continue;
      for (bool align : {false, true}) {
        BilinearParams p;
        p.out_h = h, p.out_w = w, p.align_corners = align;
        cases.push_back({"upsample_bilinear2d",
                         label(dt),
                         shape_label(shape, to + (align ? " aligned" : "")),
                         v.name,
                         OpCode::UpsampleBilinear2d,
                         {dt},
                         Compare::Float,
                         false,
                         [=](Ctx& c) {
                           Arg x = c.input(dt, shape, v.form, v.values);
                           return out(c.backend().upsample_bilinear2d(x.view(), p), dt);
                         }});
      }
    }
    if (!is_float(dt)) continue;
    // Scale factors given (their own step, not in/out; with align_corners they only set the
    // output size), and an output of one pixel.
    BilinearParams scaled;
    scaled.out_h = 8, scaled.out_w = 9, scaled.scale_h = 1.7, scaled.scale_w = 2.3;
    BilinearParams scaled_aligned = scaled;
    scaled_aligned.align_corners = true;
    BilinearParams one;
    one.out_h = 1, one.out_w = 1, one.align_corners = true;
    for (auto [name, p] : {std::pair<const char*, BilinearParams>{"scaled 1.7x2.3", scaled},
                           {"scaled 1.7x2.3 aligned", scaled_aligned},
                           {"to 1x1 aligned", one}}) {
      Shape shape{v.n, 3, 5, 4};
      cases.push_back({"upsample_bilinear2d",
                       label(dt),
                       shape_label(shape, name),
                       v.name,
                       OpCode::UpsampleBilinear2d,
                       {dt},
                       Compare::Float,
                       false,
                       [=](Ctx& c) {
                         Arg x = c.input(dt, shape, v.form, v.values);
                         return out(c.backend().upsample_bilinear2d(x.view(), p), dt);
                       }});
    }
  }
}

}  // namespace

void add_nn_cases(std::vector<Case>& cases) {
  for (DType dt : kAllDTypes) {
    if (!is_float(dt)) continue;
    add_matmul(cases, dt);
    for (int spatial : {1, 2})
      for (bool transposed : {false, true}) add_conv(cases, dt, spatial, transposed);
  }
  for (DType dt : kAllDTypes) {
    add_pool(cases, dt, false);
    add_pool(cases, dt, true);
    add_upsample(cases, dt);
  }
}

}  // namespace wick::parity
