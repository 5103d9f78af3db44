// The mixture of experts of Mixtral and Qwen3-MoE (LlamaConfig::experts): a router scores each token
// over the experts, the largest scores' softmax picks and weights the experts that run on it, and
// each chosen expert's SwiGLU MLP runs once over all the tokens that chose it, gathered into rows
// of one product (so a decode step reads only the chosen experts' weights, and a prompt reads each
// expert's once).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "wick/models/llama.h"
#include "wick/ops.h"

namespace wick::models {

namespace {

// The tokens that chose one expert, and the weight of its output in each one's sum.
struct Chosen {
  std::vector<int64_t> tokens;
  std::vector<float> weights;
};

// Each token's experts from the router's scores (n, experts), f32 on the host: the softmax of its
// scores (in double), its `used` most probable experts (the lower index first among equal ones; a
// NaN score counts as the least), their probabilities as weights, over the chosen ones' sum where
// `renormalize`. Returned per expert, tokens in order.
std::vector<Chosen> route(const std::vector<float>& scores, int64_t n, int64_t experts, int64_t used,
                          bool renormalize) {
  std::vector<Chosen> chosen(static_cast<size_t>(experts));
  std::vector<double> p(static_cast<size_t>(experts));
  std::vector<int64_t> order(static_cast<size_t>(experts));
  for (int64_t i = 0; i < n; ++i) {
    const float* s = scores.data() + i * experts;
    float top = -INFINITY;
    for (int64_t e = 0; e < experts; ++e)
      if (!std::isnan(s[e])) top = std::max(top, s[e]);
    double sum = 0;
    for (int64_t e = 0; e < experts; ++e) {
      const double x = std::isnan(s[e]) || std::isinf(top) ? 0.0 : std::exp(static_cast<double>(s[e]) - top);
      p[static_cast<size_t>(e)] = x;
      sum += x;
    }
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + used, order.end(), [&](int64_t a, int64_t b) {
      const double pa = p[static_cast<size_t>(a)], pb = p[static_cast<size_t>(b)];
      return pa > pb || (pa == pb && a < b);
    });
    double picked = 0;
    for (int64_t j = 0; j < used; ++j) picked += p[static_cast<size_t>(order[static_cast<size_t>(j)])];
    const double total = renormalize ? picked : sum;
    for (int64_t j = 0; j < used; ++j) {
      const int64_t e = order[static_cast<size_t>(j)];
      Chosen& c = chosen[static_cast<size_t>(e)];
      c.tokens.push_back(i);
      c.weights.push_back(total > 0 ? static_cast<float>(p[static_cast<size_t>(e)] / total) : 0.f);
    }
  }
  return chosen;
}

}  // namespace

Tensor LlamaModel::mixture(const Layer& l, const Tensor& x) const {
  const LlamaConfig& c = config_;
  const int64_t n = x.numel() / c.dim;
  const Tensor flat = x.reshape({n, c.dim});
  const std::vector<float> scores = l.router(flat).to_dtype(DType::F32).to_device(Device::cpu()).to_vector<float>();
  const std::vector<Chosen> chosen = route(scores, n, c.experts, c.experts_used, c.norm_topk);
  // Each token's sum gathers its experts' outputs in the experts' order, whatever the batch.
  Tensor out = Tensor::zeros({n, c.dim}, dtype_, device_);
  for (size_t e = 0; e < chosen.size(); ++e) {
    const Chosen& k = chosen[e];
    if (k.tokens.empty()) continue;
    const auto m = static_cast<int64_t>(k.tokens.size());
    const Tensor rows = Tensor::from_vector(k.tokens, {m}, device_);
    const Expert& expert = l.experts[e];
    const std::vector<Tensor> gate_up = expert.gate_up(flat.index_select(rows, 0));
    const Tensor weights = Tensor::from_vector(k.weights, {m, 1}, device_).to_dtype(dtype_);
    const Tensor y = expert.down(nn::silu_mul(gate_up[0], gate_up[1])) * weights;
    out.scatter_add_set(rows.reshape({m, 1}).broadcast_as(y.shape()), y, 0);
  }
  return out.reshape(x.shape());
}

}  // namespace wick::models
