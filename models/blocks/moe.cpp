// The mixture of experts of Mixtral and Qwen3-MoE (LlamaConfig::experts): a router scores each token
// over the experts, the largest scores' softmax picks and weights the experts that run on it, and
// each chosen expert's SwiGLU MLP runs once over all the tokens that chose it, gathered into rows
// of one product (so a decode step reads only the chosen experts' weights, and a prompt reads each
// expert's once). A layer reads the router's scores on the host once and sends the routing back
// in two copies; the rest is queued without waiting.
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
  const int64_t n = x.numel() / c.dim, k = c.experts_used;
  if (n == 0) return Tensor::zeros(x.shape(), dtype_, device_);
  const Tensor flat = x.reshape({n, c.dim});
  const std::vector<float> scores = l.router(flat).to_dtype(DType::F32).to_device(Device::cpu()).to_vector<float>();
  const std::vector<Chosen> chosen = route(scores, n, c.experts, k, c.norm_topk);
  // The n * k (token, expert) pairs in the experts' order: each pair's token (the rows to gather),
  // then where its output goes, slot j * n + i for token i's j-th expert (in the experts' order),
  // and the weights by slot; one copy to the device for the indices and one for the weights.
  const int64_t pairs = n * k;
  std::vector<int64_t> index(static_cast<size_t>(2 * pairs));
  std::vector<float> weights(static_cast<size_t>(pairs));
  std::vector<int64_t> taken(static_cast<size_t>(n), 0);
  int64_t at = 0;
  for (const Chosen& e : chosen)
    for (size_t j = 0; j < e.tokens.size(); ++j, ++at) {
      const int64_t i = e.tokens[j], slot = taken[static_cast<size_t>(i)]++ * n + i;
      index[static_cast<size_t>(at)] = i;
      index[static_cast<size_t>(pairs + slot)] = at;
      weights[static_cast<size_t>(slot)] = e.weights[j];
    }
  const Tensor indices = Tensor::from_vector(index, {2 * pairs}, device_);
  const Tensor gathered = flat.index_select(indices.narrow(0, 0, pairs), 0);
  std::vector<Tensor> outputs;  // each chosen expert's, over its rows of `gathered`
  int64_t from = 0;
  for (size_t e = 0; e < chosen.size(); ++e) {
    const auto m = static_cast<int64_t>(chosen[e].tokens.size());
    if (m == 0) continue;
    const std::vector<Tensor> gate_up = l.experts[e].gate_up(gathered.narrow(0, from, m));
    outputs.push_back(l.experts[e].down(nn::silu_mul(gate_up[0], gate_up[1])));
    from += m;
  }
  const Tensor by_slot = (outputs.size() == 1 ? outputs[0] : cat(outputs, 0))
                             .index_select(indices.narrow(0, pairs, pairs), 0)
                             .reshape({k, n, c.dim}) *
                         Tensor::from_vector(weights, {k, n, 1}, device_).to_dtype(dtype_);
  // Each token's sum in the experts' order, one add at a time: the same bits whatever the batch.
  Tensor out = by_slot.narrow(0, 0, 1);
  for (int64_t j = 1; j < k; ++j) out = out + by_slot.narrow(0, j, 1);
  return out.reshape(x.shape());
}

}  // namespace wick::models
