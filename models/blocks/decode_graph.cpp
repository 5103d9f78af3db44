// Decode steps recorded as a graph (include/wick/models/llama.h's DecodeGraph), the Llama decoder's
// decode_steps() on a GPU.
#include <algorithm>
#include <limits>

#include "wick/models/llama.h"
#include "wick/ops.h"

namespace wick::models {

std::unique_ptr<DecodeSteps> LlamaModel::decode_steps(std::vector<nn::KvCache>& cache) const {
  // A mixture of experts whose experts are not stacked reads its groups on the host in every layer,
  // which a recorded step cannot: its steps run op by op. A split model's collectives are recorded
  // with the rest.
  if (device_.is_gpu() && steps_recordable()) return std::make_unique<DecodeGraph>(*this, cache);
  return Model::decode_steps(cache);
}

bool DecodeGraph::recorded() const { return recording_error_.empty(); }

DecodeGraph::DecodeGraph(const LlamaModel& model, std::vector<nn::KvCache>& cache) : model_(model), cache_(cache) {
  const LlamaConfig& c = model.config_;
  if (static_cast<int64_t>(cache.size()) != c.layers)
    throw ShapeError(detail::str_cat("llama: DecodeGraph: ", cache.size(), " caches for ", c.layers, " layers"));
  batch_ = cache[0].keys().shape()[0];
  capacity_ = cache[0].capacity();
  const Device d = model.device_;
  inputs_ = Tensor::zeros({batch_ + 1}, DType::I64, d);
  for (int64_t i = 0; i < c.layers; ++i)
    if (!masks_.contains(c.window_of(i))) masks_[c.window_of(i)] = Tensor::zeros({batch_, capacity_}, model.dtype_, d);
  rope_ = model.rope_tables(0, capacity_);
  logits_ = Tensor::zeros({batch_, 1, c.vocab}, DType::F32, d);
}

void DecodeGraph::run_step(int64_t length) {
  const LlamaModel& m = model_;
  const Tensor ids = inputs_.narrow(0, 0, batch_).reshape({batch_, 1});
  const Tensor at = inputs_.narrow(0, batch_, 1);
  const LlamaConfig& c = m.config_;
  const Tensor x = m.embed(ids).reshape({batch_, 1, c.dim});
  const LlamaModel::Rope rope = rope_.select(at);
  logits_.copy_from(m.run(
      x,
      [&](size_t i, const Tensor& q, const Tensor& k, const Tensor& v) {
        const auto layer = static_cast<int64_t>(i);
        nn::AttentionOptions attention = m.attention_options(layer);
        attention.window = 0;  // t_q = 1: the layer's mask alone hides keys, the window's too
        attention.mask = masks_.at(c.window_of(layer)).narrow(1, 0, length).unsqueeze(1).unsqueeze(1);
        const bool local = c.local_rope(layer);
        return cache_[i].rope_write_attention(q, k, v, rope.cos_of(local), rope.sin_of(local), c.interleaved_rope, at,
                                              length, attention);
      },
      true));
}

Tensor DecodeGraph::step(const Tensor& tokens, const Tensor& key_mask) {
  const LlamaModel& m = model_;
  const int64_t pos = cache_[0].size();
  // (A cache of another batch is refused by write_at, which checks k against it.)
  for (const nn::KvCache& c : cache_)
    if (c.size() != pos || c.capacity() != capacity_)
      throw ShapeError("llama: DecodeGraph::step: the caches changed shape or no longer hold one number of positions");
  if (tokens.shape() != Shape({batch_, 1}))
    throw ShapeError(detail::str_cat("llama: DecodeGraph::step: tokens of shape ", tokens.shape(), ", not ", Shape({batch_, 1})));
  // Ids on a device are checked by the gather at the next sync; a split model checks them on the host
  // either way (forward's reason).
  if (tokens.device().is_cpu() || m.ranks_ > 1) m.check_tokens(tokens, "DecodeGraph::step");
  if (pos >= capacity_)
    throw ShapeError(detail::str_cat("llama: DecodeGraph::step: the caches are full (", capacity_, " positions)"));
  if (key_mask.defined() && key_mask.shape() != Shape({batch_, pos + 1}))
    throw ShapeError(detail::str_cat("llama: DecodeGraph::step: key mask of shape ", key_mask.shape(), ", not ",
                                     Shape({batch_, pos + 1})));
  // The inputs: ids and position in one copy from the host where the ids are there.
  if (tokens.device().is_cpu()) {
    std::vector<int64_t> in = tokens.to_dtype(DType::I64).reshape({batch_}).to_vector<int64_t>();
    in.push_back(pos);
    inputs_.copy_from(Tensor::from_vector(in, {batch_ + 1}, m.device_));
  } else {
    inputs_.narrow(0, 0, batch_).copy_from(tokens.to_device(m.device_).to_dtype(DType::I64).reshape({batch_}));
    inputs_.narrow(0, batch_, 1).copy_from(Tensor::from_vector(std::vector<int64_t>{pos}, {1}, m.device_));
  }
  // The span's mask: the key mask (or 0) up to the position, -inf past it, and before the window.
  const int64_t length = std::min(capacity_, (pos / kSpan + 1) * kSpan);
  const double hidden = -std::numeric_limits<double>::infinity();
  const Tensor keys = key_mask.defined() ? key_mask.to_device(m.device_).to_dtype(m.dtype_) : Tensor();
  for (auto& [w, mask] : masks_) {
    if (keys.defined())
      mask.narrow(1, 0, pos + 1).copy_from(keys);
    else
      mask.narrow(1, 0, pos + 1).zero();
    if (length > pos + 1) mask.narrow(1, pos + 1, length - pos - 1).fill(hidden);
    if (w > 0 && pos >= w) mask.narrow(1, 0, pos - w + 1).fill(hidden);
  }

  if (!graph_.defined() || length != length_) {
    graph_ = Graph();  // the last span's recording and its memory go first
    run_step(length);  // this step, run: it also makes what the ops make on first use
    if (recording_error_.empty()) {
      try {
        graph_ = Graph::record(m.device_, [this, length] { run_step(length); });
        length_ = length;
      } catch (const Error& e) {
        recording_error_ = e.what();  // from now on every step runs op by op
      }
    }
  } else {
    graph_.replay();
  }
  for (nn::KvCache& c : cache_) c.set_size(pos + 1);
  return logits_;
}

}  // namespace wick::models
