// Linear layers over dense or block-format weights (include/wick/models/llama.h's Linear and
// LinearGroup): products, parts for tensor parallelism, and the stacking of q, k and v (gate and up).
#include "wick/models/llama.h"
#include "wick/ops.h"

namespace wick::models {

Tensor Linear::operator()(const Tensor& x) const {
  Tensor y = quantized.defined() ? quant::qmatmul(x, quantized) : x.matmul(dense.t());
  return bias.defined() ? y + bias : y;
}

Linear Linear::slice(int dim, int rank, int size) const {
  const int64_t n = dim == 0 ? out_features() : in_features();
  const int64_t width = n / size;
  Linear l;
  if (quantized.defined()) {
    const quant::QType q = quantized.qtype();
    const Tensor blocks = quantized.plain().bytes();
    if (dim == 0) {
      l.quantized = quant::QTensor(q, width, quantized.cols(), blocks.narrow(0, width * rank, width));
    } else {
      if (width % quant::block_values(q) != 0)
        throw NotSupportedError(detail::str_cat("llama: split of a ", q, " weight of ", n, " columns in ", size,
                                                " parts of ", width, " (not whole blocks of ", quant::block_values(q), ")"));
      const int64_t piece = quant::row_bytes(q, width);
      l.quantized = quant::QTensor(q, quantized.rows(), width, blocks.narrow(1, piece * rank, piece));
    }
  } else {
    l.dense = dense.narrow(dim, width * rank, width).contiguous();
  }
  if (bias.defined()) {
    if (dim != 0) throw NotSupportedError("llama: split of a biased weight by its columns");
    l.bias = bias.narrow(0, width * rank, width).contiguous();
  }
  return l;
}

Linear Linear::arranged() const {
  Linear l = *this;
  if (quantized.defined()) l.quantized = quantized.arrange();
  return l;
}

int64_t Linear::out_features() const { return quantized.defined() ? quantized.rows() : dense.shape()[0]; }
int64_t Linear::in_features() const { return quantized.defined() ? quantized.cols() : dense.shape()[1]; }
int64_t Linear::bytes() const {
  const int64_t b = bias.defined() ? bias.numel() * dtype_size(bias.dtype()) : 0;
  return b + (quantized.defined() ? quantized.nbytes() : dense.numel() * dtype_size(dense.dtype()));
}

LinearGroup LinearGroup::of(std::vector<Linear> linears) {
  LinearGroup g;
  for (const Linear& l : linears) g.widths.push_back(l.out_features());
  const Linear& first = linears.front();
  bool stack = linears.size() > 1;
  for (const Linear& l : linears) {
    stack = stack && l.quantized.defined() == first.quantized.defined() && l.bias.defined() == first.bias.defined() &&
            l.in_features() == first.in_features();
    if (l.quantized.defined() && first.quantized.defined()) stack = stack && l.quantized.qtype() == first.quantized.qtype();
    if (l.dense.defined() && first.dense.defined()) stack = stack && l.dense.dtype() == first.dense.dtype();
  }
  if (!stack) {
    g.weights = std::move(linears);
    return g;
  }
  std::vector<Tensor> rows, biases;
  for (const Linear& l : linears) {
    rows.push_back(l.quantized.defined() ? l.quantized.plain().bytes() : l.dense);
    if (l.bias.defined()) biases.push_back(l.bias);
  }
  Linear joint;
  if (first.quantized.defined()) {
    int64_t n = 0;
    for (int64_t w : g.widths) n += w;
    joint.quantized = quant::QTensor(first.quantized.qtype(), n, first.in_features(), cat(rows, 0));
  } else {
    joint.dense = cat(rows, 0);
  }
  if (!biases.empty()) joint.bias = cat(biases, 0);
  g.weights = {joint};
  return g;
}

std::vector<Tensor> LinearGroup::operator()(const Tensor& x) const {
  std::vector<Tensor> out;
  if (weights.size() == widths.size()) {
    for (const Linear& l : weights) out.push_back(l(x));
    return out;
  }
  const Tensor y = weights.front()(x);
  int64_t from = 0;
  for (int64_t w : widths) {
    out.push_back(y.narrow(-1, from, w));
    from += w;
  }
  return out;
}

LinearGroup LinearGroup::arranged() const {
  LinearGroup g = *this;
  for (Linear& l : g.weights) l = l.arranged();
  return g;
}

int64_t LinearGroup::bytes() const {
  int64_t n = 0;
  for (const Linear& l : weights) n += l.bytes();
  return n;
}

}  // namespace wick::models
