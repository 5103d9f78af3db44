// A model split over a tensor-parallel group, run as one (include/wick/models/tensor_parallel.h).
#include "wick/models/tensor_parallel.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <functional>
#include <iterator>
#include <mutex>
#include <thread>

#include "wick/device.h"
#include "wick/dist.h"
#include "wick/error.h"

namespace wick::models {

// Ranks 1 .. n-1, each on a thread that waits for the next job: a job is one call of every rank.
class TensorParallelModel::Threads {
 public:
  explicit Threads(int n) : errors_(static_cast<size_t>(n)) {
    for (int r = 1; r < n; ++r) threads_.emplace_back([this, r] { serve(r); });
  }
  ~Threads() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  void run(const std::function<void(int)>& f) {
    // One job at a time: two callers would interleave their ranks' collectives.
    std::lock_guard one(job_mu_);
    {
      std::lock_guard lock(mu_);
      job_ = &f;
      invariant_ = batch_invariant();
      pending_ = static_cast<int>(threads_.size());
      for (std::exception_ptr& e : errors_) e = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    call(0, f);
    {
      std::unique_lock lock(mu_);
      done_.wait(lock, [&] { return pending_ == 0; });
      job_ = nullptr;
    }
    for (const std::exception_ptr& e : errors_)
      if (e) std::rethrow_exception(e);
  }

 private:
  void call(int rank, const std::function<void(int)>& f) {
    try {
      f(rank);
    } catch (...) {
      errors_[static_cast<size_t>(rank)] = std::current_exception();
    }
  }

  void serve(int rank) {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int)>* job = nullptr;
      bool invariant = false;
      {
        std::unique_lock lock(mu_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        job = job_;
        invariant = invariant_;
      }
      set_batch_invariant(invariant);
      call(rank, *job);
      {
        std::lock_guard lock(mu_);
        if (--pending_ == 0) done_.notify_one();
      }
    }
  }

  std::mutex job_mu_, mu_;
  std::condition_variable wake_, done_;
  const std::function<void(int)>* job_ = nullptr;
  bool invariant_ = false, stop_ = false;
  int pending_ = 0;
  uint64_t generation_ = 0;
  std::vector<std::exception_ptr> errors_;
  std::vector<std::thread> threads_;
};

TensorParallelModel::TensorParallelModel(std::vector<std::shared_ptr<const Model>> parts) : parts_(std::move(parts)) {
  const auto n = static_cast<int>(parts_.size());
  auto refuse = [&](const std::string& why) {
    throw ShapeError(detail::str_cat("TensorParallelModel: ", n, " parts: ", why));
  };
  if (n < 2) refuse("a group has at least 2 ranks");
  for (int r = 0; r < n; ++r) {
    const Model* p = parts_[static_cast<size_t>(r)].get();
    if (p == nullptr) refuse(detail::str_cat("part ", r, " is null"));
    const dist::Communicator& c = p->communicator();
    if (!c.defined() || c.size() != n || c.rank() != r)
      refuse(detail::str_cat("part ", r, " is not rank ", r, " of a group of ", n,
                             c.defined() ? detail::str_cat(" (it is rank ", c.rank(), " of ", c.size(), ")")
                                         : std::string(" (it is not split)")));
    const Model& a = *parts_[0];
    if (p->architecture() != a.architecture() || p->vocab() != a.vocab() || p->context() != a.context() ||
        p->dtype() != a.dtype())
      refuse(detail::str_cat("part ", r, " (", p->architecture(), ", vocabulary ", p->vocab(), ", context ",
                             p->context(), ", ", dtype_name(p->dtype()), ") is not a part of the model of part 0 (",
                             a.architecture(), ", vocabulary ", a.vocab(), ", context ", a.context(), ", ",
                             dtype_name(a.dtype()), ")"));
  }
  if (const Tokenizer* t = parts_[0]->tokenizer()) set_tokenizer(*t);
  threads_ = std::make_unique<Threads>(n);
}

TensorParallelModel::~TensorParallelModel() = default;

std::shared_ptr<const TensorParallelModel> TensorParallelModel::load(const ModelFile& file,
                                                                     const std::vector<Device>& devices,
                                                                     const LoadOptions& options) {
  if (devices.size() < 2)
    throw ShapeError(detail::str_cat("TensorParallelModel::load: ", devices.size(), " devices for ", file.path(),
                                     " (a group has at least 2 devices)"));
  const std::vector<dist::Communicator> comms = dist::Communicator::local(devices);
  std::vector<std::shared_ptr<const Model>> parts(devices.size());
  // Each part loads on its own rank's thread: a split model's loading may meet its peers.
  dist::on_threads(static_cast<int>(devices.size()), [&](int r) {
    LoadOptions o = options;
    o.device = devices[static_cast<size_t>(r)];
    o.comm = comms[static_cast<size_t>(r)];
    parts[static_cast<size_t>(r)] = file.load(o);
  });
  return std::make_shared<const TensorParallelModel>(std::move(parts));
}

int64_t TensorParallelModel::weight_bytes() const {
  int64_t bytes = 0;
  for (const auto& p : parts_) bytes += p->weight_bytes();
  return bytes;
}

void TensorParallelModel::on_ranks(const std::function<void(int)>& f) const { threads_->run(f); }

size_t TensorParallelModel::layers_of(size_t total) const {
  if (total % parts_.size() != 0)
    throw ShapeError(detail::str_cat("TensorParallelModel: a cache of ", total, " layers is not one of this group's ",
                                     parts_.size(), " ranks' (", parts_.size(), " times the model's layers)"));
  return total / parts_.size();
}

std::vector<nn::KvCache> TensorParallelModel::make_cache(int64_t batch, int64_t capacity) const {
  std::vector<nn::KvCache> all;
  for (const auto& p : parts_) {
    std::vector<nn::KvCache> mine = p->make_cache(batch, capacity);
    all.insert(all.end(), std::make_move_iterator(mine.begin()), std::make_move_iterator(mine.end()));
  }
  return all;
}

namespace {

// Each rank's layers of a group's cache moved into `mine` (rank r's into mine[r]) for a call, and
// back when it ends, whatever happened; `mine` keeps its vectors, which decode steps refer to.
class Lent {
 public:
  Lent(std::vector<nn::KvCache>& all, std::vector<std::vector<nn::KvCache>>& mine) : all_(all), mine_(mine) {
    const size_t layers = all.size() / mine.size();
    for (size_t r = 0; r < mine.size(); ++r) {
      auto from = all.begin() + static_cast<std::ptrdiff_t>(r * layers);
      mine[r].assign(std::make_move_iterator(from),
                     std::make_move_iterator(from + static_cast<std::ptrdiff_t>(layers)));
    }
  }
  ~Lent() {
    const size_t layers = all_.size() / mine_.size();
    for (size_t r = 0; r < mine_.size(); ++r)
      std::move(mine_[r].begin(), mine_[r].end(), all_.begin() + static_cast<std::ptrdiff_t>(r * layers));
  }
  Lent(const Lent&) = delete;
  Lent& operator=(const Lent&) = delete;

 private:
  std::vector<nn::KvCache>& all_;
  std::vector<std::vector<nn::KvCache>>& mine_;
};

// The first rank's reason to run op by op, where one has and none was noted yet.
template <typename Steps>
void note_recording_error(const std::vector<Steps>& steps, std::string& error) {
  for (const auto& s : steps)
    if (error.empty() && !s->recording_error().empty()) error = s->recording_error();
}

}  // namespace

Tensor TensorParallelModel::forward(const Tensor& tokens, std::vector<nn::KvCache>& cache, const Tensor& key_mask,
                                    bool last_only) const {
  (void)layers_of(cache.size());
  std::vector<std::vector<nn::KvCache>> mine(parts_.size());
  std::vector<Tensor> out(parts_.size());
  {
    const Lent lent(cache, mine);
    on_ranks([&](int r) {
      const auto u = static_cast<size_t>(r);
      out[u] = parts_[u]->forward(tokens, mine[u], key_mask, last_only);
    });
  }
  return out[0];
}

// The ranks' decode steps over their layers of the group's cache, lent to them for each step.
class TensorParallelModel::GroupSteps final : public DecodeSteps {
 public:
  GroupSteps(const TensorParallelModel& group, std::vector<nn::KvCache>& cache)
      : group_(group), cache_(cache), mine_(group.parts_.size()), steps_(group.parts_.size()) {
    (void)group.layers_of(cache.size());
    const Lent lent(cache_, mine_);
    group.on_ranks([&](int r) {
      const auto u = static_cast<size_t>(r);
      steps_[u] = group_.parts_[u]->decode_steps(mine_[u]);
    });
  }

  Tensor step(const Tensor& tokens, const Tensor& key_mask) override {
    std::vector<Tensor> out(steps_.size());
    {
      const Lent lent(cache_, mine_);
      group_.on_ranks([&](int r) {
        const auto u = static_cast<size_t>(r);
        out[u] = steps_[u]->step(tokens, key_mask);
      });
    }
    note_recording_error(steps_, error_);
    return out[0];
  }
  const std::string& recording_error() const override { return error_; }
  bool recorded() const override {
    return std::all_of(steps_.begin(), steps_.end(), [](const auto& s) { return s->recorded(); });
  }

 private:
  const TensorParallelModel& group_;
  std::vector<nn::KvCache>& cache_;
  std::vector<std::vector<nn::KvCache>> mine_;
  std::vector<std::unique_ptr<DecodeSteps>> steps_;
  std::string error_;
};

std::unique_ptr<DecodeSteps> TensorParallelModel::decode_steps(std::vector<nn::KvCache>& cache) const {
  return std::make_unique<GroupSteps>(*this, cache);
}

PagedKvCache TensorParallelModel::make_paged_cache(int64_t blocks, int64_t block_size, KvType type) const {
  PagedKvCache all;
  for (const auto& p : parts_) {
    PagedKvCache mine = p->make_paged_cache(blocks, block_size, type);
    all.blocks = mine.blocks;
    all.block_size = mine.block_size;
    all.keys.insert(all.keys.end(), mine.keys.begin(), mine.keys.end());
    all.values.insert(all.values.end(), mine.values.begin(), mine.values.end());
  }
  return all;
}

int64_t TensorParallelModel::paged_block_bytes(int64_t block_size, KvType type) const {
  return parts_[0]->paged_block_bytes(block_size, type);
}

std::vector<PagedKvCache> TensorParallelModel::rank_views(PagedKvCache& cache, const char* op) const {
  const size_t layers = layers_of(cache.keys.size());
  if (cache.values.size() != cache.keys.size())
    throw ShapeError(detail::str_cat("TensorParallelModel::", op, ": a cache of ", cache.keys.size(), " key pools and ",
                                     cache.values.size(), " value pools"));
  // The tensors share the group's storage.
  std::vector<PagedKvCache> mine(parts_.size());
  for (size_t r = 0; r < parts_.size(); ++r) {
    PagedKvCache& m = mine[r];
    m.blocks = cache.blocks;
    m.block_size = cache.block_size;
    m.scratch = cache.scratch;
    const auto from = static_cast<std::ptrdiff_t>(r * layers), to = from + static_cast<std::ptrdiff_t>(layers);
    m.keys.assign(cache.keys.begin() + from, cache.keys.begin() + to);
    m.values.assign(cache.values.begin() + from, cache.values.begin() + to);
  }
  return mine;
}

Tensor TensorParallelModel::forward_paged(const PagedBatch& batch, PagedKvCache& cache) const {
  std::vector<PagedKvCache> mine = rank_views(cache, "forward_paged");
  std::vector<Tensor> out(parts_.size());
  on_ranks([&](int r) {
    const auto u = static_cast<size_t>(r);
    out[u] = parts_[u]->forward_paged(batch, mine[u]);
  });
  return out[0];
}

// The ranks' paged decode steps over their views of the group's pools (which the views share, so
// that blocks the engine copies between steps are the ones the steps see).
class TensorParallelModel::GroupPagedSteps final : public PagedSteps {
 public:
  GroupPagedSteps(const TensorParallelModel& group, std::vector<PagedKvCache> views,
                  std::vector<std::unique_ptr<PagedSteps>> steps)
      : group_(group), views_(std::move(views)), steps_(std::move(steps)) {}

  Tensor step(const PagedBatch& batch) override {
    std::vector<Tensor> out(steps_.size());
    group_.on_ranks([&](int r) {
      const auto u = static_cast<size_t>(r);
      out[u] = steps_[u]->step(batch);
    });
    note_recording_error(steps_, error_);
    return out[0];
  }
  const std::string& recording_error() const override { return error_; }
  bool recorded() const override {
    return std::all_of(steps_.begin(), steps_.end(), [](const auto& s) { return s->recorded(); });
  }

 private:
  const TensorParallelModel& group_;
  std::vector<PagedKvCache> views_;  // the steps refer to these
  std::vector<std::unique_ptr<PagedSteps>> steps_;
  std::string error_;
};

std::unique_ptr<PagedSteps> TensorParallelModel::paged_steps(PagedKvCache& cache, int64_t max_batch) const {
  std::vector<PagedKvCache> views = rank_views(cache, "paged_steps");
  std::vector<std::unique_ptr<PagedSteps>> steps(parts_.size());
  // views is moved into the group's steps below: a vector's elements keep their addresses.
  on_ranks([&](int r) {
    const auto u = static_cast<size_t>(r);
    steps[u] = parts_[u]->paged_steps(views[u], max_batch);
  });
  if (std::any_of(steps.begin(), steps.end(), [](const auto& s) { return s == nullptr; })) return nullptr;
  return std::make_unique<GroupPagedSteps>(*this, std::move(views), std::move(steps));
}

}  // namespace wick::models
