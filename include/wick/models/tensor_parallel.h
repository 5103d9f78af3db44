#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "wick/models/model.h"

namespace wick::models {

// A model split over the ranks of one tensor-parallel group (the parts ModelFile::load makes with
// the communicators of dist::Communicator::local, one per device), run as one Model: the engine and
// generation drive it as they drive a model on one device (the C API's wick_model_open_split and
// Python's Model(path, devices=[...]) make one too).
//
// Each call runs every rank's part at once, rank 0 on the calling thread and each other rank on a
// thread of its own that lives as long as the group (so that a CPU rank keeps one OpenMP team),
// with the caller's batch-invariant setting; the answer is rank 0's (every rank's logits are the
// same bits: the parts gather them). The caches it makes hold every rank's layers, rank 0's first;
// a block of the paged cache takes paged_block_bytes() on each device. Calls from several threads
// run one at a time (the ranks' collectives must not interleave). A rank that fails before its
// peers reach a collective leaves them waiting, as with any collective: the parts check a call's
// inputs alike, so that bad input fails every rank.
class TensorParallelModel : public Model {
 public:
  // ShapeError unless parts are ranks 0 .. n-1 of one communicator of n >= 2 ranks, each with the
  // same architecture, vocabulary, context and dtype.
  explicit TensorParallelModel(std::vector<std::shared_ptr<const Model>> parts);
  ~TensorParallelModel() override;
  TensorParallelModel(const TensorParallelModel&) = delete;
  TensorParallelModel& operator=(const TensorParallelModel&) = delete;

  // The model of `file` split over `devices` (at least 2), options.comm ignored: the group's
  // communicators are made here (dist::Communicator::local).
  static std::shared_ptr<const TensorParallelModel> load(const ModelFile& file, const std::vector<Device>& devices,
                                                         const LoadOptions& options = {});

  int ranks() const { return static_cast<int>(parts_.size()); }
  const Model& part(int rank) const { return *parts_.at(static_cast<size_t>(rank)); }

  const std::string& architecture() const override { return parts_[0]->architecture(); }
  int64_t vocab() const override { return parts_[0]->vocab(); }
  int64_t context() const override { return parts_[0]->context(); }
  int64_t parameters() const override { return parts_[0]->parameters(); }
  int64_t weight_bytes() const override;                          // every rank's
  Device device() const override { return parts_[0]->device(); }  // rank 0's
  DType dtype() const override { return parts_[0]->dtype(); }
  // Undefined: to its caller the group is one model, which no other rank drives.
  const dist::Communicator& communicator() const override { return none_; }

  std::vector<nn::KvCache> make_cache(int64_t batch, int64_t capacity) const override;
  Tensor forward(const Tensor& tokens, std::vector<nn::KvCache>& cache, const Tensor& key_mask = {},
                 bool last_only = false) const override;
  PagedKvCache make_paged_cache(int64_t blocks, int64_t block_size, KvType type) const override;
  int64_t paged_block_bytes(int64_t block_size, KvType type) const override;  // on each device
  Tensor forward_paged(const PagedBatch& batch, PagedKvCache& cache) const override;
  // Every rank's own decode steps (on GPUs, graphs that hold the step's collectives too), stepped
  // together as forward() steps the parts: the answer is rank 0's. paged_steps is nullptr where a
  // part has none (CPU ranks).
  std::unique_ptr<DecodeSteps> decode_steps(std::vector<nn::KvCache>& cache) const override;
  std::unique_ptr<PagedSteps> paged_steps(PagedKvCache& cache, int64_t max_batch) const override;

 private:
  class Threads;
  class GroupSteps;
  class GroupPagedSteps;
  // The ranks' views of a paged cache of the group's: rank r's layers of its pools.
  std::vector<PagedKvCache> rank_views(PagedKvCache& cache, const char* op) const;
  // Runs f(rank) for every rank at once; rethrows the lowest rank's exception.
  void on_ranks(const std::function<void(int)>& f) const;
  // The layers of rank r in a cache of the group's: [r * layers, (r + 1) * layers).
  size_t layers_of(size_t total) const;

  std::vector<std::shared_ptr<const Model>> parts_;
  dist::Communicator none_;
  std::unique_ptr<Threads> threads_;
};

}  // namespace wick::models
