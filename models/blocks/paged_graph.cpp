// The engine's decode steps recorded per batch size (include/wick/models/llama.h's
// PagedDecodeGraph), the Llama decoder's paged_steps() on a GPU.
#include <algorithm>

#include "wick/models/llama.h"
#include "wick/ops.h"

namespace wick::models {

std::unique_ptr<PagedSteps> LlamaModel::paged_steps(PagedKvCache& cache, int64_t max_batch) const {
  // A mixture of experts whose experts are not stacked reads its groups on the host: no recorded
  // steps (decode_steps).
  if (device_.is_gpu() && cache.scratch >= 0 && steps_recordable())
    return std::make_unique<PagedDecodeGraph>(*this, cache, max_batch);
  return nullptr;
}

PagedDecodeGraph::PagedDecodeGraph(const LlamaModel& model, PagedKvCache& cache, int64_t max_batch)
    : model_(model), cache_(cache) {
  const LlamaConfig& c = model.config_;
  if (max_batch < 1 || cache.scratch < 0 || cache.scratch >= cache.blocks || cache.block_size < 1 ||
      static_cast<int64_t>(cache.keys.size()) != c.layers)
    throw ShapeError(detail::str_cat("llama: PagedDecodeGraph: ", max_batch, " sequences over a cache of ",
                                     cache.keys.size(), " layers of ", cache.blocks, " blocks, scratch block ",
                                     cache.scratch, " (at least 1 sequence, a scratch block in the pool, ", c.layers,
                                     " layers)"));
  const int64_t context = std::max<int64_t>(c.context, 1);
  max_blocks_ = (context + cache.block_size - 1) / cache.block_size;
  rope_ = model.rope_tables(0, context);
  max_batch_ = max_batch;
}

namespace {

// The smallest power of two at least n, at most `most`.
int64_t size_for(int64_t n, int64_t most) {
  int64_t s = 1;
  while (s < n) s *= 2;
  return std::min(s, most);
}

}  // namespace

void PagedDecodeGraph::run(Size& k) {
  const LlamaModel& m = model_;
  const int64_t b = k.batch, w = k.width;
  const Tensor tokens = k.inputs.narrow(0, 0, b), positions = k.inputs.narrow(0, b, b);
  const Tensor slots = k.inputs.narrow(0, 2 * b, b), seqs = k.inputs.narrow(0, 3 * b, b).to_dtype(DType::I32);
  const Tensor tables = k.inputs.narrow(0, 4 * b, b * w).reshape({b, w}).to_dtype(DType::I32);
  k.logits.copy_from(m.run_paged(tokens, rope_.select(positions), slots, tables, seqs, positions.to_dtype(DType::I32),
                                 cache_, Tensor()));
}

Tensor PagedDecodeGraph::step(const PagedBatch& batch) {
  const LlamaModel& m = model_;
  const auto n = static_cast<int64_t>(batch.tokens.size());
  bool fits = n >= 1 && n <= max_batch_ && batch.seqs.size() == batch.tokens.size() &&
              batch.positions.size() == batch.tokens.size() && batch.slots.size() == batch.tokens.size() &&
              batch.logits_of.size() == batch.tokens.size() && batch.max_blocks >= 1 &&
              batch.max_blocks <= max_blocks_ && batch.tables.size() == static_cast<size_t>(n * batch.max_blocks);
  for (int64_t i = 0; fits && i < n; ++i) {
    const auto u = static_cast<size_t>(i);
    fits = batch.seqs[u] == i && batch.logits_of[u] == i && batch.positions[u] >= 0 &&
           batch.positions[u] < batch.max_blocks * cache_.block_size;
  }
  if (!fits)
    throw ShapeError(detail::str_cat("llama: PagedDecodeGraph::step: a batch of ", n,
                                     " tokens that is not one new token for each of at most ", max_batch_,
                                     " sequences within the context, all logits wanted"));
  m.check_tokens(Tensor::from_vector(batch.tokens, {n}), "PagedDecodeGraph::step");
  const int64_t b = size_for(n, max_batch_), w = size_for(batch.max_blocks, max_blocks_);
  Size& k = sizes_[{b, w}];
  k.batch = b;
  k.width = w;
  // The inputs in one copy: rows past n read and write the scratch block at position 0.
  const int64_t scratch = cache_.scratch;
  std::vector<int64_t> in(static_cast<size_t>(4 * b + b * w), scratch);
  for (int64_t i = 0; i < b; ++i) {
    const auto u = static_cast<size_t>(i);
    in[u] = i < n ? batch.tokens[u] : 0;
    in[static_cast<size_t>(b) + u] = i < n ? batch.positions[u] : 0;
    in[static_cast<size_t>(2 * b) + u] = i < n ? batch.slots[u] : scratch * cache_.block_size;
    in[static_cast<size_t>(3 * b) + u] = i;
    if (i < n)
      for (int64_t j = 0; j < batch.max_blocks; ++j)
        in[static_cast<size_t>(4 * b + i * w + j)] = batch.tables[static_cast<size_t>(i * batch.max_blocks + j)];
  }
  if (!k.inputs.defined()) {
    k.inputs = Tensor::zeros({static_cast<int64_t>(in.size())}, DType::I64, m.device_);
    k.logits = Tensor::zeros({b, m.config_.vocab}, DType::F32, m.device_);
  }
  k.inputs.copy_from(Tensor::from_vector(in, {static_cast<int64_t>(in.size())}, m.device_));
  if (k.graph.defined()) {
    k.graph.replay();
  } else {
    run(k);  // this step, run: it also makes what the ops make on first use
    if (recording_error_.empty()) {
      try {
        k.graph = Graph::record(m.device_, [this, &k] { run(k); });
      } catch (const Error& e) {
        recording_error_ = e.what();  // from now on every step runs op by op
      }
    }
  }
  return k.logits.narrow(0, 0, n);
}

}  // namespace wick::models
