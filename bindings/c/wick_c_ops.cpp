// The C API's ops (include/wick/wick_c.h): each a call of the C++ op of the same name.
#include <vector>

#include "wick/wick.h"
#include "wick_c_internal.h"

using namespace wick;
using namespace wick::capi;

namespace {

template <typename F>
wick_status map2(const char* op, Arg a, Arg b, wick_tensor** out, F&& f) {
  return guard([&] {
    out_ptr(out, op);
    give(out, f(in(a.t, op, a.name), in(b.t, op, b.name)));
  });
}

template <typename F>
wick_status map3(const char* op, Arg a, Arg b, Arg c, wick_tensor** out, F&& f) {
  return guard([&] {
    out_ptr(out, op);
    give(out, f(in(a.t, op, a.name), in(b.t, op, b.name), in(c.t, op, c.name)));
  });
}

Tensor unary(int32_t op, const Tensor& x) {
  switch (op) {
    case WICK_EXP: return x.exp();
    case WICK_LOG: return x.log();
    case WICK_SIN: return x.sin();
    case WICK_COS: return x.cos();
    case WICK_TANH: return x.tanh();
    case WICK_ABS: return x.abs();
    case WICK_NEG: return x.neg();
    case WICK_RECIP: return x.recip();
    case WICK_SQR: return x.sqr();
    case WICK_SQRT: return x.sqrt();
    case WICK_GELU: return x.gelu();
    case WICK_GELU_ERF: return x.gelu_erf();
    case WICK_ERF: return x.erf();
    case WICK_RELU: return x.relu();
    case WICK_SILU: return x.silu();
    case WICK_SIGMOID: return x.sigmoid();
    case WICK_FLOOR: return x.floor();
    case WICK_CEIL: return x.ceil();
    case WICK_ROUND: return x.round();
    case WICK_SIGN: return x.sign();
  }
  throw ArgumentError(detail::str_cat("unary: unknown wick_unary_op ", static_cast<int>(op)));
}

// b is a Tensor or a Scalar: the C++ API has both forms of every binary op.
template <typename B>
Tensor binary(int32_t op, const Tensor& a, const B& b) {
  switch (op) {
    case WICK_ADD: return a.add(b);
    case WICK_SUB: return a.sub(b);
    case WICK_MUL: return a.mul(b);
    case WICK_DIV: return a.div(b);
    case WICK_MAXIMUM: return a.maximum(b);
    case WICK_MINIMUM: return a.minimum(b);
    case WICK_EQ: return a.eq(b);
    case WICK_NE: return a.ne(b);
    case WICK_LT: return a.lt(b);
    case WICK_LE: return a.le(b);
    case WICK_GT: return a.gt(b);
    case WICK_GE: return a.ge(b);
  }
  throw ArgumentError(detail::str_cat("binary: unknown wick_binary_op ", static_cast<int>(op)));
}

Conv1dOptions conv1d_options(const wick_conv_options* o) {
  Conv1dOptions r;
  if (o) r = {o->padding[0], o->stride[0], o->dilation[0], o->output_padding[0], o->groups};
  return r;
}

Conv2dOptions conv2d_options(const wick_conv_options* o) {
  Conv2dOptions r;
  if (o) {
    r.padding = {o->padding[0], o->padding[1]};
    r.stride = {o->stride[0], o->stride[1]};
    r.dilation = {o->dilation[0], o->dilation[1]};
    r.output_padding = {o->output_padding[0], o->output_padding[1]};
    r.groups = o->groups;
  }
  return r;
}

std::vector<Tensor> tensors_in(const wick_tensor* const* tensors, size_t count, const char* op) {
  if (count > 0 && !tensors) throw ArgumentError(detail::str_cat(op, ": the tensor array is null"));
  std::vector<Tensor> v;
  for (size_t i = 0; i < count; ++i) {
    std::optional<Tensor> x;
    if (tensors[i]) x = tensor_handles().get(handle_word(tensors[i]));
    if (!x) refuse_handle(tensors[i], op, detail::str_cat("tensors[", i, "]"), "tensor");
    v.push_back(std::move(*x));
  }
  return v;
}

HandleTable<quant::QTensor>& qtensor_handles() {
  static HandleTable<quant::QTensor>& table = *new HandleTable<quant::QTensor>(2);
  return table;
}

quant::QTensor qin(const wick_qtensor* q, const char* op, const char* arg = "w") {
  std::optional<quant::QTensor> x;
  if (q) x = qtensor_handles().get(handle_word(q));
  if (!x) refuse_handle(q, op, arg, "qtensor");
  return std::move(*x);
}

quant::QType qtype_in(int32_t qtype, const char* op) {
  const std::optional<quant::QType> q = quant::from_ggml_type(qtype);
  if (!q) throw ArgumentError(detail::str_cat(op, ": ", qtype, " is not a ggml block type wick has"));
  return *q;
}

void give_q(wick_qtensor** out, quant::QTensor q) {
  *out = handle_of<wick_qtensor>(qtensor_handles().add(std::move(q)));
}

}  // namespace

extern "C" {

// ---- elementwise -----------------------------------------------------------------------------

wick_status wick_unary(int32_t op, const wick_tensor* x, wick_tensor** out) {
  return map("unary", {x, "x"}, out, [&](const Tensor& t) { return unary(op, t); });
}

wick_status wick_binary(int32_t op, const wick_tensor* a, const wick_tensor* b, wick_tensor** out) {
  return map2("binary", {a, "a"}, {b, "b"}, out, [&](const Tensor& x, const Tensor& y) { return binary(op, x, y); });
}

wick_status wick_binary_scalar(int32_t op, const wick_tensor* a, double b, wick_tensor** out) {
  return map("binary_scalar", {a, "a"}, out, [&](const Tensor& x) { return binary(op, x, scalar_in(b)); });
}

wick_status wick_affine(const wick_tensor* x, double mul, double add, wick_tensor** out) {
  return map("affine", {x, "x"}, out, [&](const Tensor& t) { return t.affine(mul, add); });
}

wick_status wick_powf(const wick_tensor* x, double exponent, wick_tensor** out) {
  return map("powf", {x, "x"}, out, [&](const Tensor& t) { return t.powf(exponent); });
}

wick_status wick_elu(const wick_tensor* x, double alpha, wick_tensor** out) {
  return map("elu", {x, "x"}, out, [&](const Tensor& t) { return t.elu(alpha); });
}

wick_status wick_clamp(const wick_tensor* x, double lo, double hi, wick_tensor** out) {
  return map("clamp", {x, "x"}, out, [&](const Tensor& t) { return t.clamp(scalar_in(lo), scalar_in(hi)); });
}

wick_status wick_where_cond(const wick_tensor* cond, const wick_tensor* on_true, const wick_tensor* on_false,
                            wick_tensor** out) {
  return guard([&] {
    out_ptr(out, "where_cond");
    give(out, where_cond(in(cond, "where_cond", "cond"), in(on_true, "where_cond", "on_true"),
                         in(on_false, "where_cond", "on_false")));
  });
}

// ---- reductions and sorting ------------------------------------------------------------------

wick_status wick_reduce(int32_t op, const wick_tensor* x, const int64_t* dims, int ndims, int keepdim,
                        wick_tensor** out) {
  return map("reduce", {x, "x"}, out, [&](const Tensor& t) {
    const bool all = ndims == 0;
    const Dims d = shape_in(dims, ndims, "reduce", "dims");
    switch (op) {
      case WICK_SUM: return all ? t.sum() : t.sum(d, keepdim != 0);
      case WICK_MEAN: return all ? t.mean() : t.mean(d, keepdim != 0);
      case WICK_MAX: return all ? t.max() : t.max(d, keepdim != 0);
      case WICK_MIN: return all ? t.min() : t.min(d, keepdim != 0);
      case WICK_VAR: return t.var(d, keepdim != 0);
    }
    throw ArgumentError(detail::str_cat("reduce: unknown wick_reduce_op ", static_cast<int>(op)));
  });
}

wick_status wick_argmax(const wick_tensor* x, int64_t dim, int keepdim, wick_tensor** out) {
  return map("argmax", {x, "x"}, out, [&](const Tensor& t) { return t.argmax(dim, keepdim != 0); });
}

wick_status wick_argmin(const wick_tensor* x, int64_t dim, int keepdim, wick_tensor** out) {
  return map("argmin", {x, "x"}, out, [&](const Tensor& t) { return t.argmin(dim, keepdim != 0); });
}

wick_status wick_cumsum(const wick_tensor* x, int64_t dim, wick_tensor** out) {
  return map("cumsum", {x, "x"}, out, [&](const Tensor& t) { return t.cumsum(dim); });
}

wick_status wick_argsort(const wick_tensor* x, int ascending, wick_tensor** out) {
  return map("argsort", {x, "x"}, out, [&](const Tensor& t) { return t.argsort(ascending != 0); });
}

wick_status wick_sort(const wick_tensor* x, int ascending, wick_tensor** values, wick_tensor** indices) {
  return guard([&] {
    out_ptr(values, "sort", "values");
    out_ptr(indices, "sort", "indices");
    auto [v, i] = in(x, "sort").sort(ascending != 0);
    give(values, std::move(v));
    give(indices, std::move(i));
  });
}

// ---- products, convolution, pooling, upsampling ----------------------------------------------

wick_status wick_matmul(const wick_tensor* a, const wick_tensor* b, wick_tensor** out) {
  return map2("matmul", {a, "a"}, {b, "b"}, out, [](const Tensor& x, const Tensor& y) { return x.matmul(y); });
}

wick_status wick_dot(const wick_tensor* a, const wick_tensor* b, wick_tensor** out) {
  return map2("dot", {a, "a"}, {b, "b"}, out, [](const Tensor& x, const Tensor& y) { return x.dot(y); });
}

wick_status wick_mv(const wick_tensor* m, const wick_tensor* v, wick_tensor** out) {
  return map2("mv", {m, "m"}, {v, "v"}, out, [](const Tensor& x, const Tensor& y) { return x.mv(y); });
}

wick_status wick_conv1d(const wick_tensor* x, const wick_tensor* kernel, const wick_conv_options* options,
                        wick_tensor** out) {
  return map2("conv1d", {x, "x"}, {kernel, "kernel"}, out,
              [&](const Tensor& a, const Tensor& k) { return a.conv1d(k, conv1d_options(options)); });
}

wick_status wick_conv_transpose1d(const wick_tensor* x, const wick_tensor* kernel, const wick_conv_options* options,
                                  wick_tensor** out) {
  return map2("conv_transpose1d", {x, "x"}, {kernel, "kernel"}, out,
              [&](const Tensor& a, const Tensor& k) { return a.conv_transpose1d(k, conv1d_options(options)); });
}

wick_status wick_conv2d(const wick_tensor* x, const wick_tensor* kernel, const wick_conv_options* options,
                        wick_tensor** out) {
  return map2("conv2d", {x, "x"}, {kernel, "kernel"}, out,
              [&](const Tensor& a, const Tensor& k) { return a.conv2d(k, conv2d_options(options)); });
}

wick_status wick_conv_transpose2d(const wick_tensor* x, const wick_tensor* kernel, const wick_conv_options* options,
                                  wick_tensor** out) {
  return map2("conv_transpose2d", {x, "x"}, {kernel, "kernel"}, out,
              [&](const Tensor& a, const Tensor& k) { return a.conv_transpose2d(k, conv2d_options(options)); });
}

wick_status wick_avg_pool2d(const wick_tensor* x, int64_t kernel_h, int64_t kernel_w, int64_t stride_h,
                            int64_t stride_w, wick_tensor** out) {
  return map("avg_pool2d", {x, "x"}, out, [&](const Tensor& t) {
    return t.avg_pool2d({kernel_h, kernel_w}, {stride_h, stride_w});
  });
}

wick_status wick_max_pool2d(const wick_tensor* x, int64_t kernel_h, int64_t kernel_w, int64_t stride_h,
                            int64_t stride_w, wick_tensor** out) {
  return map("max_pool2d", {x, "x"}, out, [&](const Tensor& t) {
    return t.max_pool2d({kernel_h, kernel_w}, {stride_h, stride_w});
  });
}

wick_status wick_upsample_nearest1d(const wick_tensor* x, int64_t size, wick_tensor** out) {
  return map("upsample_nearest1d", {x, "x"}, out, [&](const Tensor& t) { return t.upsample_nearest1d(size); });
}

wick_status wick_upsample_nearest2d(const wick_tensor* x, int64_t height, int64_t width, wick_tensor** out) {
  return map("upsample_nearest2d", {x, "x"}, out, [&](const Tensor& t) { return t.upsample_nearest2d(height, width); });
}

wick_status wick_upsample_bilinear2d(const wick_tensor* x, int64_t height, int64_t width, int align_corners,
                                     wick_tensor** out) {
  return map("upsample_bilinear2d", {x, "x"}, out,
             [&](const Tensor& t) { return t.upsample_bilinear2d(height, width, align_corners != 0); });
}

// ---- indexing, joining -----------------------------------------------------------------------

wick_status wick_index_select(const wick_tensor* x, const wick_tensor* ids, int64_t dim, wick_tensor** out) {
  return map2("index_select", {x, "x"}, {ids, "ids"}, out,
              [&](const Tensor& t, const Tensor& i) { return t.index_select(i, dim); });
}

wick_status wick_gather(const wick_tensor* x, const wick_tensor* ids, int64_t dim, wick_tensor** out) {
  return map2("gather", {x, "x"}, {ids, "ids"}, out,
              [&](const Tensor& t, const Tensor& i) { return t.gather(i, dim); });
}

wick_status wick_scatter(const wick_tensor* x, const wick_tensor* ids, const wick_tensor* src, int64_t dim,
                         wick_tensor** out) {
  return map3("scatter", {x, "x"}, {ids, "ids"}, {src, "src"}, out,
              [&](const Tensor& t, const Tensor& i, const Tensor& s) { return t.scatter(i, s, dim); });
}

wick_status wick_scatter_add(const wick_tensor* x, const wick_tensor* ids, const wick_tensor* src, int64_t dim,
                             wick_tensor** out) {
  return map3("scatter_add", {x, "x"}, {ids, "ids"}, {src, "src"}, out,
              [&](const Tensor& t, const Tensor& i, const Tensor& s) { return t.scatter_add(i, s, dim); });
}

wick_status wick_index_add(const wick_tensor* x, const wick_tensor* ids, const wick_tensor* src, int64_t dim,
                           wick_tensor** out) {
  return map3("index_add", {x, "x"}, {ids, "ids"}, {src, "src"}, out,
              [&](const Tensor& t, const Tensor& i, const Tensor& s) { return t.index_add(i, s, dim); });
}

wick_status wick_pad_with_zeros(const wick_tensor* x, int64_t dim, int64_t left, int64_t right, wick_tensor** out) {
  return map("pad_with_zeros", {x, "x"}, out, [&](const Tensor& t) { return t.pad_with_zeros(dim, left, right); });
}

wick_status wick_cat(const wick_tensor* const* tensors, size_t count, int64_t dim, wick_tensor** out) {
  return guard([&] {
    out_ptr(out, "cat");
    give(out, cat(tensors_in(tensors, count, "cat"), dim));
  });
}

wick_status wick_stack(const wick_tensor* const* tensors, size_t count, int64_t dim, wick_tensor** out) {
  return guard([&] {
    out_ptr(out, "stack");
    give(out, stack(tensors_in(tensors, count, "stack"), dim));
  });
}

wick_status wick_embedding(const wick_tensor* weight, const wick_tensor* ids, wick_tensor** out) {
  return map2("embedding", {weight, "weight"}, {ids, "ids"}, out,
              [](const Tensor& w, const Tensor& i) { return embedding(w, i); });
}

// ---- in place --------------------------------------------------------------------------------

wick_status wick_fill(wick_tensor* t, double value) {
  return guard([&] { in_mut(t, "fill").fill(scalar_in(value)); });
}

wick_status wick_copy_from(wick_tensor* t, const wick_tensor* src) {
  return guard([&] { in_mut(t, "copy_from").copy_from(in(src, "copy_from", "src")); });
}

wick_status wick_slice_set(wick_tensor* t, const wick_tensor* src, int64_t dim, int64_t start) {
  return guard([&] { in_mut(t, "slice_set").slice_set(in(src, "slice_set", "src"), dim, start); });
}

wick_status wick_scatter_set(wick_tensor* t, const wick_tensor* ids, const wick_tensor* src, int64_t dim) {
  return guard(
      [&] { in_mut(t, "scatter_set").scatter_set(in(ids, "scatter_set", "ids"), in(src, "scatter_set", "src"), dim); });
}

wick_status wick_scatter_add_set(wick_tensor* t, const wick_tensor* ids, const wick_tensor* src, int64_t dim) {
  return guard([&] {
    in_mut(t, "scatter_add_set")
        .scatter_add_set(in(ids, "scatter_add_set", "ids"), in(src, "scatter_add_set", "src"), dim);
  });
}

// ---- transformer ops -------------------------------------------------------------------------

wick_status wick_softmax(const wick_tensor* x, int64_t dim, wick_tensor** out) {
  return map("softmax", {x, "x"}, out, [&](const Tensor& t) { return nn::softmax(t, dim); });
}

wick_status wick_log_softmax(const wick_tensor* x, int64_t dim, wick_tensor** out) {
  return map("log_softmax", {x, "x"}, out, [&](const Tensor& t) { return nn::log_softmax(t, dim); });
}

wick_status wick_rms_norm(const wick_tensor* x, const wick_tensor* weight, double eps, wick_tensor** out) {
  return map2("rms_norm", {x, "x"}, {weight, "weight"}, out,
              [&](const Tensor& t, const Tensor& w) { return nn::rms_norm(t, w, eps); });
}

wick_status wick_add_rms_norm(const wick_tensor* x, const wick_tensor* residual, const wick_tensor* weight, double eps,
                              wick_tensor** sum, wick_tensor** normed) {
  constexpr const char* op = "add_rms_norm";
  return guard([&] {
    out_ptr(sum, op, "sum");
    out_ptr(normed, op, "normed");
    nn::AddRmsNorm r = nn::add_rms_norm(in(x, op), in(residual, op, "residual"), in(weight, op, "weight"), eps);
    give(sum, std::move(r.sum));
    give(normed, std::move(r.normed));
  });
}

wick_status wick_silu_mul(const wick_tensor* gate, const wick_tensor* up, wick_tensor** out) {
  return map2("silu_mul", {gate, "gate"}, {up, "up"}, out,
              [](const Tensor& g, const Tensor& u) { return nn::silu_mul(g, u); });
}

wick_status wick_layer_norm(const wick_tensor* x, const wick_tensor* weight, const wick_tensor* bias, double eps,
                            wick_tensor** out) {
  return map2("layer_norm", {x, "x"}, {weight, "weight"}, out, [&](const Tensor& t, const Tensor& w) {
    return bias ? nn::layer_norm(t, w, in(bias, "layer_norm", "bias"), eps) : nn::layer_norm(t, w, eps);
  });
}

wick_status wick_rope(int32_t kind, const wick_tensor* x, const wick_tensor* cos, const wick_tensor* sin,
                      wick_tensor** out) {
  return map3("rope", {x, "x"}, {cos, "cos"}, {sin, "sin"}, out,
              [&](const Tensor& t, const Tensor& c, const Tensor& s) {
                switch (kind) {
                  case WICK_ROPE: return nn::rope(t, c, s);
                  case WICK_ROPE_I: return nn::rope_i(t, c, s);
                  case WICK_ROPE_THD: return nn::rope_thd(t, c, s);
                }
                throw ArgumentError(detail::str_cat("rope: unknown wick_rope_kind ", static_cast<int>(kind)));
              });
}

wick_status wick_rope_tables(int64_t head_dim, int64_t t, double theta, int64_t offset, int32_t dtype,
                             wick_device device, wick_tensor** cos, wick_tensor** sin) {
  return guard([&] {
    out_ptr(cos, "rope_tables", "cos");
    out_ptr(sin, "rope_tables", "sin");
    nn::RopeTables r =
        nn::rope_tables(head_dim, t, theta, offset, dtype_in(dtype, "rope_tables"), device_in(device, "rope_tables"));
    give(cos, std::move(r.cos));
    give(sin, std::move(r.sin));
  });
}

wick_status wick_scaled_dot_product_attention(const wick_tensor* q, const wick_tensor* k, const wick_tensor* v,
                                              int causal, double scale, const wick_tensor* mask, int64_t window,
                                              wick_tensor** out) {
  constexpr const char* op = "scaled_dot_product_attention";
  return map3(op, {q, "q"}, {k, "k"}, {v, "v"}, out, [&](const Tensor& a, const Tensor& b, const Tensor& c) {
    nn::AttentionOptions o;
    o.causal = causal != 0;
    if (scale > 0) o.scale = scale;
    if (mask) o.mask = in(mask, op, "mask");
    o.window = window;
    return nn::scaled_dot_product_attention(a, b, c, o);
  });
}

// ---- GGUF block formats ----------------------------------------------------------------------

void wick_qtensor_free(wick_qtensor* q) {
  free_handle(qtensor_handles(), q,
              "wick_qtensor_free: not a live wick_qtensor handle (freed already, or never made by wick)");
}

wick_status wick_qtensor_from_blocks(int32_t qtype, int64_t rows, int64_t cols, const void* data, size_t nbytes,
                                     wick_device device, wick_qtensor** out) {
  return guard([&] {
    out_ptr(out, "qtensor_from_blocks");
    give_q(out, quant::QTensor::from_blocks(qtype_in(qtype, "qtensor_from_blocks"), rows, cols, data,
                                            static_cast<int64_t>(nbytes), device_in(device, "qtensor_from_blocks")));
  });
}

wick_status wick_quantize(const wick_tensor* w, int32_t qtype, wick_qtensor** out) {
  return guard([&] {
    out_ptr(out, "quantize");
    give_q(out, quant::quantize(in(w, "quantize", "w"), qtype_in(qtype, "quantize")));
  });
}

wick_status wick_dequantize(const wick_qtensor* w, int32_t dtype, wick_tensor** out) {
  return guard([&] {
    out_ptr(out, "dequantize");
    give(out, quant::dequantize(qin(w, "dequantize"), dtype_in(dtype, "dequantize")));
  });
}

wick_status wick_qmatmul(const wick_tensor* x, const wick_qtensor* w, wick_tensor** out) {
  return guard([&] {
    out_ptr(out, "qmatmul");
    give(out, quant::qmatmul(in(x, "qmatmul"), qin(w, "qmatmul")));
  });
}

wick_status wick_qtensor_to_device(const wick_qtensor* w, wick_device device, wick_qtensor** out) {
  return guard([&] {
    out_ptr(out, "qtensor_to_device");
    give_q(out, qin(w, "qtensor_to_device").to_device(device_in(device, "qtensor_to_device")));
  });
}

wick_status wick_qtensor_bytes(const wick_qtensor* w, wick_tensor** out) {
  return guard([&] {
    out_ptr(out, "qtensor_bytes");
    give(out, qin(w, "qtensor_bytes").plain().bytes());
  });
}

}  // extern "C"
