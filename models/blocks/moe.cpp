// The mixture of experts of Mixtral and Qwen3-MoE (LlamaConfig::experts): a router scores each token
// over the experts, nn::moe_route picks and weights each token's experts and lays the (token,
// expert) pairs out expert by expert, each chosen expert's SwiGLU MLP runs once over the rows of all
// the tokens that chose it (so a decode step reads only the chosen experts' weights, and a prompt
// reads each expert's once), and nn::moe_combine adds each token's outputs, weighted. With the
// experts stacked (block formats, held in memory) every expert's product is one call of
// quant::qmatmul_grouped: one launch with no wait for the host on a GPU, one parallel region on the
// CPU; dense experts on a GPU, of nn::matmul_grouped, one launch as well; otherwise the groups are
// read on the host once per layer and each expert multiplies its rows.
#include "wick/models/llama.h"
#include "wick/ops.h"

namespace wick::models {

void LlamaModel::stack_experts(Layer& l, bool copy) {
  if (l.experts.empty()) return;
  const Expert& first = l.experts[0];
  // Dense experts on a GPU, every gate and up one weight and every down one, all of one shape and
  // dtype, with no bias (a CPU's grouped product is each expert's matmul, which needs no stack).
  auto dense = [](const Linear& w) { return w.dense.defined() && !w.bias.defined() && !w.quantized.defined(); };
  if (first.gate_up.weights.size() == 1 && dense(first.gate_up.weights[0]) && dense(first.down) &&
      first.down.dense.device().is_gpu()) {
    const Tensor& a0 = first.gate_up.weights[0].dense;
    const Tensor& b0 = first.down.dense;
    std::vector<Tensor> gate_up, down;
    for (const Expert& x : l.experts) {
      if (x.gate_up.weights.size() != 1 || !dense(x.gate_up.weights[0]) || !dense(x.down)) return;
      const Tensor& a = x.gate_up.weights[0].dense;
      const Tensor& b = x.down.dense;
      if (a.shape() != a0.shape() || a.dtype() != a0.dtype() || b.shape() != b0.shape() || b.dtype() != b0.dtype())
        return;
      gate_up.push_back(a);
      down.push_back(b);
    }
    l.dense_gate_up = cat(gate_up, 0);
    l.dense_down = cat(down, 0);
    l.experts.clear();
    return;
  }
  auto blocks = [](const Linear& w) { return w.quantized.defined() && !w.bias.defined() && !w.quantized.arranged(); };
  if (first.gate_up.weights.size() != 1 || !blocks(first.gate_up.weights[0]) || !blocks(first.down) ||
      !(copy || first.down.quantized.device().is_gpu()))
    return;
  const quant::QTensor& gu = first.gate_up.weights[0].quantized;
  const quant::QTensor& dn = first.down.quantized;
  std::vector<Tensor> gate_up, down;
  for (const Expert& x : l.experts) {
    if (x.gate_up.weights.size() != 1 || !blocks(x.gate_up.weights[0]) || !blocks(x.down)) return;
    const quant::QTensor& a = x.gate_up.weights[0].quantized;
    const quant::QTensor& b = x.down.quantized;
    if (a.qtype() != gu.qtype() || a.rows() != gu.rows() || a.cols() != gu.cols() || b.qtype() != dn.qtype() ||
        b.rows() != dn.rows() || b.cols() != dn.cols())
      return;
    gate_up.push_back(a.bytes());
    down.push_back(b.bytes());
  }
  const auto n = static_cast<int64_t>(l.experts.size());
  l.stacked_gate_up = quant::QTensor(gu.qtype(), n * gu.rows(), gu.cols(), cat(gate_up, 0));
  l.stacked_down = quant::QTensor(dn.qtype(), n * dn.rows(), dn.cols(), cat(down, 0));
  l.experts.clear();
}

bool LlamaModel::steps_recordable() const {
  if (config_.experts == 0) return true;
  for (const Layer& l : layers_)
    if (!l.stacked_down.defined() && !l.dense_down.defined()) return false;
  return true;
}

Tensor LlamaModel::mixture(const Layer& l, const Tensor& x) const {
  const LlamaConfig& c = config_;
  const int64_t n = x.numel() / c.dim, k = c.experts_used;
  if (n == 0) return Tensor::zeros(x.shape(), dtype_, device_);
  const Tensor flat = x.reshape({n, c.dim});
  const nn::MoeRouting r = nn::moe_route(l.router(flat), k, c.norm_topk);
  // The pairs' rows, expert by expert; a single token's row stands for all its pairs, unread until
  // the products read it in place (a block format's) or copy it.
  const Tensor rows = n == 1 ? flat.broadcast_as({k, c.dim}) : flat.index_select(r.tokens, 0);
  Tensor y;
  if (l.stacked_down.defined() || l.dense_down.defined()) {
    // A token chooses an expert once: at most n rows a group.
    auto product = [&](const Tensor& in, const quant::QTensor& blocks, const Tensor& dense) {
      return blocks.defined() ? quant::qmatmul_grouped(in, blocks, c.experts, r.groups, n)
                              : nn::matmul_grouped(in, dense, c.experts, r.groups, n);
    };
    const Tensor gate_up = product(rows, l.stacked_gate_up, l.dense_gate_up);
    const int64_t width = gate_up.dim(1) / 2;
    y = product(nn::silu_mul(gate_up.narrow(1, 0, width), gate_up.narrow(1, width, width)), l.stacked_down,
                l.dense_down);
  } else {
    // The groups cover the rows in order, expert by expert.
    const std::vector<int64_t> groups = r.groups.to_device(Device::cpu()).to_vector<int64_t>();
    std::vector<Tensor> outputs;
    for (size_t g = 0; g < groups.size(); g += 3) {
      const int64_t e = groups[g], from = groups[g + 1], m = groups[g + 2] - from;
      if (m == 0) continue;
      const std::vector<Tensor> gate_up = l.experts[static_cast<size_t>(e)].gate_up(rows.narrow(0, from, m));
      outputs.push_back(l.experts[static_cast<size_t>(e)].down(nn::silu_mul(gate_up[0], gate_up[1])));
    }
    y = outputs.size() == 1 ? outputs[0] : cat(outputs, 0);
  }
  return nn::moe_combine(y, r).reshape(x.shape());
}

}  // namespace wick::models
