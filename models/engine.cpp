// The engine (include/wick/models/engine.h): requests queued by submit(), one scheduler thread
// that owns the pool (KvBlocks and the PagedKvCache) and the sequences, and per request either a
// callback or a queue of pieces. Each step: every running sequence's pending tokens (decode steps
// first, then prompt chunks) within the step's token budget, blocks reserved for them (preempting
// the newest sequences where the pool runs out), then waiting requests admitted while blocks and
// budget last; one forward_paged over the batch; the sequences whose known tokens are all computed
// sample their next one.
#include "wick/models/engine.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <span>
#include <thread>

#include "wick/models/kv_blocks.h"
#include "wick/ops.h"

namespace wick::models {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The bytes of s that are whole UTF-8 characters: an incomplete one at the end is held back.
size_t complete_utf8(std::string_view s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? n - back : n;
  }
  return n;
}

}  // namespace

const char* finish_name(Finish f) {
  switch (f) {
    case Finish::Length: return "length";
    case Finish::Stop: return "stop";
    case Finish::Cancelled: return "cancelled";
    case Finish::Error: return "error";
    case Finish::None: break;
  }
  return "";
}

struct Engine::State {
  struct Seq {
    int64_t id = 0;
    Request request;
    std::function<void(const Piece&)> on_piece;
    std::optional<Sampler> sampler;
    std::vector<int32_t> all;  // the prompt, then the tokens made
    int64_t prompt = 0;
    int64_t limit = 0;       // positions at most: the prompt and max_tokens, within the context
    int64_t committed = 0;   // positions whose keys and values the pool holds
    bool in_blocks = false;  // known to KvBlocks
    bool counted = false;    // its prompt counted in the stats
    int64_t made = 0;
    std::string text;  // the text of the tokens made (cut at a stop string)
    size_t sent = 0;   // bytes of it sent in pieces
    float logprob = 0;  // the last token's, where the request asks (Request::logprobs)
    std::vector<std::pair<int32_t, float>> top_logprobs;
    Clock::time_point submitted, last_token;
  };

  std::shared_ptr<const Model> model;
  EngineOptions options;
  const Tokenizer* tokenizer = nullptr;
  int64_t pickable = 0;  // the logits a sampler may pick: the tokenizer's tokens where it has fewer
  PagedKvCache cache;
  std::optional<KvBlocks> blocks;
  std::unique_ptr<PagedSteps> steps;  // the model's recorded decode steps, where it has them

  mutable std::mutex mu;
  std::condition_variable wake, pieces;
  std::deque<std::unique_ptr<Seq>> incoming;
  std::vector<int64_t> cancels;
  std::map<int64_t, std::deque<Piece>> queues;
  std::set<int64_t> live;
  int64_t next_id = 1;
  bool stop = false;
  EngineStats stats;

  // The scheduler's own.
  std::deque<std::unique_ptr<Seq>> waiting;
  std::vector<std::unique_ptr<Seq>> running;
  std::thread thread;

  void loop();
  void step();
  void send(Seq& s, Piece piece);
  void finish(Seq& s, Finish f, int32_t token = -1, const std::string& error = {});
  void release(Seq& s);
  void preempt(size_t index);
  // Samples sequence s's next token (appended to s.all) from its logits, or takes `chosen` where it
  // is one (a greedy pick made on the device), and sends its piece, unless the token ends the
  // request: then returns how, and the caller finishes it.
  Finish take_token(Seq& s, const float* logits, int32_t chosen);
  // The log-softmax of `logits` at `token` and the likeliest tokens', into s (a NaN logit counts as
  // -inf, as the sampler's).
  static void log_probabilities(Seq& s, std::span<const float> logits, int32_t token);
  // Takes sequence s out of `running`.
  std::unique_ptr<Seq> detach(const Seq* s);
  void publish();
};

void Engine::State::send(Seq& s, Piece piece) {
  piece.request = s.id;
  if (s.on_piece) {
    try {
      s.on_piece(piece);
    } catch (...) {  // a callback that throws ends its request, not the engine
    }
    return;
  }
  std::lock_guard lock(mu);
  queues[s.id].push_back(std::move(piece));
  pieces.notify_all();
}

void Engine::State::release(Seq& s) {
  if (s.in_blocks) blocks->remove(s.id);
  s.in_blocks = false;
  s.committed = 0;
}

void Engine::State::finish(Seq& s, Finish f, int32_t token, const std::string& error) {
  release(s);
  Piece p;
  p.token = token;
  if (token >= 0 && s.request.logprobs >= 0) {
    p.logprob = s.logprob;
    p.top_logprobs = std::move(s.top_logprobs);
  }
  const size_t end = f == Finish::Error || f == Finish::Cancelled ? s.sent : complete_utf8(s.text);
  if (end > s.sent) p.text = s.text.substr(s.sent, end - s.sent);
  s.sent = std::max(s.sent, end);
  p.finish = f;
  p.error = error;
  {
    std::lock_guard lock(mu);
    live.erase(s.id);
    ++stats.finished;
  }
  // The counters a caller reads after the last piece already count this request out.
  publish();
  send(s, std::move(p));
}

void Engine::State::preempt(size_t index) {
  std::unique_ptr<Seq> s = std::move(running[index]);
  running.erase(running.begin() + static_cast<std::ptrdiff_t>(index));
  release(*s);
  {
    std::lock_guard lock(mu);
    ++stats.preemptions;
  }
  waiting.push_front(std::move(s));
}

std::unique_ptr<Engine::State::Seq> Engine::State::detach(const Seq* s) {
  const auto at = std::find_if(running.begin(), running.end(), [&](const auto& x) { return x.get() == s; });
  std::unique_ptr<Seq> owned = std::move(*at);
  running.erase(at);
  return owned;
}

void Engine::State::log_probabilities(Seq& s, std::span<const float> logits, int32_t token) {
  const auto value = [&](size_t i) {
    const float v = logits[i];
    return std::isnan(v) ? -std::numeric_limits<double>::infinity() : static_cast<double>(v);
  };
  double top = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) top = std::max(top, value(i));
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) sum += std::exp(value(i) - top);
  const double lse = top + std::log(sum);
  const auto logprob = [&](size_t i) { return static_cast<float>(value(i) - lse); };
  s.logprob = token >= 0 && static_cast<size_t>(token) < logits.size() ? logprob(static_cast<size_t>(token))
                                                                       : -std::numeric_limits<float>::infinity();
  s.top_logprobs.clear();
  const auto k = static_cast<size_t>(std::min<int64_t>(s.request.logprobs, static_cast<int64_t>(logits.size())));
  if (k == 0) return;
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(), [&](int32_t a, int32_t b) {
    const double va = value(static_cast<size_t>(a)), vb = value(static_cast<size_t>(b));
    return va != vb ? va > vb : a < b;
  });
  for (size_t i = 0; i < k; ++i) s.top_logprobs.emplace_back(ids[i], logprob(static_cast<size_t>(ids[i])));
}

Finish Engine::State::take_token(Seq& s, const float* logits, int32_t chosen) {
  const int32_t token = chosen >= 0 ? chosen : s.sampler->sample({logits, static_cast<size_t>(pickable)}, s.all);
  if (s.request.logprobs >= 0 && logits != nullptr)
    log_probabilities(s, {logits, static_cast<size_t>(pickable)}, token);
  s.all.push_back(token);
  ++s.made;
  const auto now = Clock::now();
  {
    std::lock_guard lock(mu);
    ++stats.generated_tokens;
    if (s.made == 1) {
      stats.first_token_seconds += seconds_between(s.submitted, now);
      ++stats.first_tokens;
    } else {
      stats.between_tokens_seconds += seconds_between(s.last_token, now);
      ++stats.token_gaps;
    }
  }
  s.last_token = now;
  const Request& r = s.request;
  Finish f = Finish::None;
  if ((r.stop_at_end && tokenizer != nullptr && tokenizer->is_end(token)) ||
      std::find(r.stop_tokens.begin(), r.stop_tokens.end(), token) != r.stop_tokens.end())
    f = Finish::Stop;
  size_t hold = 0;  // bytes that may begin a stop string
  if (tokenizer != nullptr) {
    const size_t before = s.text.size();
    // The new tokens as they continue the prompt (a first word keeps its space), so that the
    // prompt's text and this are the whole.
    s.text = tokenizer->decode(std::span<const int32_t>(s.all).subspan(static_cast<size_t>(s.prompt)), false, true);
    for (const std::string& stop : r.stop_strings) {
      if (stop.empty()) continue;
      hold = std::max(hold, stop.size() - 1);
      const size_t from = before >= stop.size() ? before - stop.size() + 1 : 0;
      const size_t at = s.text.find(stop, std::min(from, s.text.size()));
      if (at != std::string::npos) {
        s.text.resize(at);
        f = Finish::Stop;
      }
    }
  }
  if (f == Finish::None && (s.made >= r.max_tokens || static_cast<int64_t>(s.all.size()) >= s.limit))
    f = Finish::Length;
  if (f != Finish::None) return f;
  Piece p;
  p.token = token;
  if (s.request.logprobs >= 0) {
    p.logprob = s.logprob;
    p.top_logprobs = std::move(s.top_logprobs);
  }
  const size_t complete = complete_utf8(s.text);
  const size_t end = complete > s.sent + hold ? complete - hold : s.sent;
  // Never end inside a character: the held-back bytes may have cut one.
  const size_t cut = complete_utf8(std::string_view(s.text).substr(0, end));
  if (cut > s.sent) p.text = s.text.substr(s.sent, cut - s.sent);
  s.sent = std::max(s.sent, cut);
  send(s, std::move(p));
  return Finish::None;
}

void Engine::State::publish() {
  std::lock_guard lock(mu);
  stats.running = static_cast<int64_t>(running.size());
  stats.waiting = static_cast<int64_t>(waiting.size() + incoming.size());
  stats.blocks = blocks->blocks();
  stats.blocks_used = blocks->used_blocks();
  stats.blocks_cached = blocks->cached_blocks();
  stats.blocks_free = blocks->free_blocks();
  stats.prefix_hit_tokens = blocks->stats().hit_tokens;
}

void Engine::State::step() {
  int64_t budget = options.step_tokens;
  struct Item {
    Seq* seq;
    int64_t chunk;
  };
  std::vector<Item> batch;
  // Running sequences: decode steps (one pending token) before prompt chunks, so that reading a
  // long prompt never holds back the tokens of the others.
  std::stable_sort(running.begin(), running.end(), [](const auto& a, const auto& b) {
    return (static_cast<int64_t>(a->all.size()) - a->committed == 1) >
           (static_cast<int64_t>(b->all.size()) - b->committed == 1);
  });
  for (size_t i = 0; i < running.size() && budget > 0;) {
    Seq& s = *running[i];
    const int64_t chunk = std::min<int64_t>(static_cast<int64_t>(s.all.size()) - s.committed, budget);
    if (!blocks->reserve(s.id, s.committed + chunk)) {
      // The pool is out of blocks: the newest other sequence gives its back, or this one.
      const size_t victim = running.size() - 1;
      preempt(victim);
      if (victim == i) break;
      continue;
    }
    batch.push_back({&s, chunk});
    budget -= chunk;
    ++i;
  }
  // Admission: waiting requests, oldest first, while the budget, the batch and the pool allow.
  while (budget > 0 && !waiting.empty() && static_cast<int64_t>(running.size()) < options.max_running) {
    Seq& s = *waiting.front();
    if (!s.in_blocks) {
      s.committed = blocks->add(s.id, s.all);
      s.in_blocks = true;
    }
    const int64_t chunk = std::min<int64_t>(static_cast<int64_t>(s.all.size()) - s.committed, budget);
    if (!blocks->reserve(s.id, s.committed + chunk)) {
      release(s);
      break;
    }
    if (!s.counted) {
      s.counted = true;
      std::lock_guard lock(mu);
      stats.prompt_tokens += s.prompt;
    }
    running.push_back(std::move(waiting.front()));
    waiting.pop_front();
    batch.push_back({&s, chunk});
    budget -= chunk;
  }
  if (batch.empty()) return;

  PagedBatch b;
  for (const Item& it : batch)
    b.max_blocks = std::max<int64_t>(b.max_blocks, static_cast<int64_t>(blocks->table(it.seq->id).size()));
  b.tables.assign(batch.size() * static_cast<size_t>(b.max_blocks), -1);
  const int64_t bs = options.block_size;
  std::vector<Seq*> sampled;
  for (size_t r = 0; r < batch.size(); ++r) {
    Seq& s = *batch[r].seq;
    const std::vector<int32_t>& table = blocks->table(s.id);
    std::copy(table.begin(), table.end(),
              b.tables.begin() + static_cast<std::ptrdiff_t>(r * static_cast<size_t>(b.max_blocks)));
    for (int64_t j = 0; j < batch[r].chunk; ++j) {
      const int64_t p = s.committed + j;
      b.tokens.push_back(s.all[static_cast<size_t>(p)]);
      b.seqs.push_back(static_cast<int32_t>(r));
      b.positions.push_back(static_cast<int32_t>(p));
      b.slots.push_back(int64_t{table[static_cast<size_t>(p / bs)]} * bs + p % bs);
    }
    if (s.committed + batch[r].chunk == static_cast<int64_t>(s.all.size())) {
      b.logits_of.push_back(static_cast<int64_t>(b.tokens.size()) - 1);
      sampled.push_back(&s);
    }
  }
  // Greedy requests without a penalty take the largest logit, found where the logits lie: only
  // their ids and maxima come to the host (a row whose maximum is NaN goes to the sampler, which
  // names it). The others' rows come whole, for their samplers.
  std::vector<int32_t> chosen(sampled.size(), -1);
  std::vector<int64_t> rows;  // of the logits, to the host
  std::vector<float> logits;
  try {
    cache.copy_blocks(blocks->take_copies());
    // A step of decode tokens alone (each sequence's one, all sampled) replays a recorded step.
    const bool decode = steps && sampled.size() == batch.size() &&
                        std::all_of(batch.begin(), batch.end(), [](const Item& it) { return it.chunk == 1; });
    const Tensor all = decode ? steps->step(b) : model->forward_paged(b, cache);
    std::vector<int64_t> greedy;
    for (size_t k = 0; k < sampled.size(); ++k) {
      const SamplingOptions& o = sampled[k]->request.sampling;
      (o.temperature == 0 && !o.penalized() && sampled[k]->request.logprobs < 0 ? greedy : rows)
          .push_back(static_cast<int64_t>(k));
    }
    if (!greedy.empty()) {
      // Each row's id and maximum in one download (ids below 2^24 are exact in f32); every row of
      // the step, in order, needs no gather.
      const auto n = static_cast<int64_t>(greedy.size());
      const bool every_row = n == all.shape()[0];
      const Tensor g = (every_row ? all : all.index_select(Tensor::from_vector(greedy, {n}, all.device()), 0))
                           .narrow(1, 0, pickable);
      std::vector<int64_t> ids(greedy.size());
      std::vector<float> top(greedy.size());
      if (pickable <= (int64_t{1} << 24)) {
        const std::vector<float> both =
            cat({g.argmax(-1).to_dtype(DType::F32).unsqueeze(1), g.max(-1).to_dtype(DType::F32).unsqueeze(1)}, 1)
                .to_vector<float>();
        for (size_t j = 0; j < greedy.size(); ++j) ids[j] = static_cast<int64_t>(both[2 * j]), top[j] = both[2 * j + 1];
      } else {  // ids past 2^24 are not all f32s: apart
        ids = g.argmax(-1).to_dtype(DType::I64).to_vector<int64_t>();
        top = g.max(-1).to_dtype(DType::F32).to_vector<float>();
      }
      for (size_t j = 0; j < greedy.size(); ++j) {
        if (std::isnan(top[j]))
          rows.push_back(greedy[j]);
        else
          chosen[static_cast<size_t>(greedy[j])] = static_cast<int32_t>(ids[j]);
      }
    }
    if (!rows.empty()) {
      std::sort(rows.begin(), rows.end());
      const auto n = static_cast<int64_t>(rows.size());
      logits = all.index_select(Tensor::from_vector(rows, {n}, all.device()), 0).to_vector<float>();
    }
  } catch (const std::exception& e) {
    // A failed step fails the requests in it, not the engine.
    const std::string message = e.what();
    for (const Item& it : batch) {
      std::unique_ptr<Seq> owned = detach(it.seq);
      finish(*owned, Finish::Error, -1, message);
    }
    return;
  }
  {
    std::lock_guard lock(mu);
    ++stats.steps;
    stats.computed_tokens += static_cast<int64_t>(b.tokens.size());
  }
  for (const Item& it : batch) {
    Seq& s = *it.seq;
    blocks->commit(
        s.id, std::span<const int32_t>(s.all).subspan(static_cast<size_t>(s.committed), static_cast<size_t>(it.chunk)));
    s.committed += it.chunk;
  }
  const int64_t vocab = model->vocab();
  for (size_t k = 0; k < sampled.size(); ++k) {
    Seq* s = sampled[k];
    const float* row = nullptr;
    if (chosen[k] < 0) {
      const auto at = std::lower_bound(rows.begin(), rows.end(), static_cast<int64_t>(k)) - rows.begin();
      row = logits.data() + at * vocab;
    }
    const Finish f = take_token(*s, row, chosen[k]);
    if (f != Finish::None) {
      std::unique_ptr<Seq> owned = detach(s);
      finish(*owned, f, owned->all.back());
    }
  }
}

void Engine::State::loop() {
  set_batch_invariant(options.deterministic);  // this thread runs every step
  for (;;) {
    std::vector<int64_t> cancel_ids;
    {
      std::unique_lock lock(mu);
      wake.wait(lock,
                [&] { return stop || !incoming.empty() || !cancels.empty() || !running.empty() || !waiting.empty(); });
      if (stop) break;
      for (auto& s : incoming) waiting.push_back(std::move(s));
      incoming.clear();
      cancel_ids.swap(cancels);
    }
    auto cancel_in = [&](auto& list, int64_t id) {
      const auto at = std::find_if(list.begin(), list.end(), [&](const auto& s) { return s->id == id; });
      if (at == list.end()) return;
      std::unique_ptr<Seq> s = std::move(*at);
      list.erase(at);
      finish(*s, Finish::Cancelled);
    };
    for (int64_t id : cancel_ids) {
      cancel_in(running, id);
      cancel_in(waiting, id);
    }
    step();
    publish();
  }
  // Stopping: what is left ends as cancelled.
  {
    std::lock_guard lock(mu);
    for (auto& s : incoming) waiting.push_back(std::move(s));
    incoming.clear();
  }
  for (auto& s : running) finish(*s, Finish::Cancelled);
  for (auto& s : waiting) finish(*s, Finish::Cancelled);
  running.clear();
  waiting.clear();
}

Engine::Engine(std::shared_ptr<const Model> model, const EngineOptions& options) : s_(std::make_unique<State>()) {
  State& s = *s_;
  if (!model) throw Error("engine: no model");
  if (options.block_size < 1 || options.step_tokens < 1 || options.max_running < 1 || options.blocks < 0 ||
      options.kv_memory < 0)
    throw ShapeError(detail::str_cat("engine: block_size ", options.block_size, ", step_tokens ", options.step_tokens,
                                     ", max_running ", options.max_running, " must be at least 1, blocks ",
                                     options.blocks, " and kv_memory ", options.kv_memory, " at least 0"));
  if (!(options.kv_fraction >= 0 && options.kv_fraction < 1))
    throw ShapeError(detail::str_cat("engine: kv_fraction ", options.kv_fraction, " must be in [0, 1)"));
  s.model = std::move(model);
  s.options = options;
  s.tokenizer = s.model->tokenizer();
  s.pickable = s.model->vocab();
  if (s.tokenizer != nullptr && s.tokenizer->size() < s.pickable) s.pickable = s.tokenizer->size();
  const int64_t per_block = s.model->paged_block_bytes(options.block_size, options.kv_type);
  int64_t blocks = options.blocks;
  int64_t budget = 0;
  if (blocks == 0) {
    const bool given = options.kv_memory > 0 || options.kv_fraction > 0;
    const Device device = s.model->device();
    if (options.kv_memory > 0)
      budget = options.kv_memory;
    else if (options.kv_fraction > 0)
      budget = static_cast<int64_t>(options.kv_fraction * static_cast<double>(device_memory(device).free));
    else
      budget = device.is_cpu() ? int64_t{1} << 30 : device_memory(device).free / 4;
    blocks = budget / std::max<int64_t>(per_block, 1);
    const int64_t context = std::max<int64_t>(s.model->context(), 1);
    const int64_t most = options.max_running * ((context + options.block_size - 1) / options.block_size) + 1;
    if (!given) blocks = std::min(blocks, most);
  }
  if (blocks < 1)
    throw ShapeError(detail::str_cat("engine: a pool of ", budget, " bytes holds no block of ", options.block_size,
                                     " positions (", per_block, " bytes)"));
  // One block more than KvBlocks hands out: the scratch block of recorded steps' padding rows.
  s.cache = s.model->make_paged_cache(blocks + 1, options.block_size, options.kv_type);
  s.cache.scratch = static_cast<int32_t>(blocks);
  s.blocks.emplace(blocks, options.block_size, options.prefix_cache);
  if (options.graphs) s.steps = s.model->paged_steps(s.cache, options.max_running);
  s.publish();
  // From here on the steps run on the scheduler's thread; this one's CPU team would only make
  // OpenMP count twice the threads and stop the scheduler's from spinning between ops.
  release_host_threads();
  s.thread = std::thread([&s] { s.loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard lock(s_->mu);
    s_->stop = true;
  }
  s_->wake.notify_all();
  s_->thread.join();
}

int64_t Engine::submit(Request request, std::function<void(const Piece&)> on_piece) {
  State& s = *s_;
  const Model& m = *s.model;
  if (request.prompt.empty() && !request.text.empty()) {
    if (s.tokenizer == nullptr) throw Error("engine: submit: a text prompt for a model without a tokenizer");
    request.prompt = s.tokenizer->encode(request.text);
  }
  const auto n = static_cast<int64_t>(request.prompt.size());
  if (n == 0) throw ShapeError("engine: submit: an empty prompt");
  for (size_t i = 0; i < request.prompt.size(); ++i)
    if (request.prompt[i] < 0 || request.prompt[i] >= m.vocab())
      throw IndexError(detail::str_cat("engine: submit: token ", request.prompt[i], " (at ", i,
                                       " of the prompt) is outside the vocabulary of ", m.vocab()));
  const int64_t context = m.context();
  if (context > 0 && n >= context)
    throw ShapeError(detail::str_cat("engine: submit: a prompt of ", n,
                                     " tokens leaves no room in the model's context of ", context, " positions"));
  if (request.max_tokens < 1)
    throw ShapeError(detail::str_cat("engine: submit: max_tokens must be at least 1, got ", request.max_tokens));
  Sampler::check(request.sampling);
  if (request.logprobs < -1 || request.logprobs > 20)
    throw ShapeError(detail::str_cat("engine: submit: logprobs must be in [-1, 20], got ", request.logprobs));
  const int64_t limit = context > 0 ? std::min(context, n + request.max_tokens) : n + request.max_tokens;
  if (s.blocks->blocks_for(limit) > s.blocks->blocks())
    throw ShapeError(detail::str_cat("engine: submit: ", limit, " positions (a prompt of ", n, " and ", limit - n,
                                     " new tokens) could never fit the pool of ", s.blocks->blocks(), " blocks of ",
                                     s.options.block_size));
  auto seq = std::make_unique<State::Seq>();
  seq->request = std::move(request);
  seq->on_piece = std::move(on_piece);
  seq->sampler.emplace(seq->request.sampling, false);
  seq->all = seq->request.prompt;
  seq->prompt = n;
  seq->limit = limit;
  seq->submitted = Clock::now();
  int64_t id;
  {
    std::lock_guard lock(s.mu);
    id = s.next_id++;
    seq->id = id;
    if (!seq->on_piece) s.queues[id];
    s.live.insert(id);
    s.incoming.push_back(std::move(seq));
    ++s.stats.waiting;
  }
  s.wake.notify_all();
  return id;
}

bool Engine::cancel(int64_t id) {
  {
    std::lock_guard lock(s_->mu);
    if (s_->live.count(id) == 0) return false;
    s_->cancels.push_back(id);
  }
  s_->wake.notify_all();
  return true;
}

bool Engine::next(int64_t id, Piece& piece, std::chrono::milliseconds wait) {
  State& s = *s_;
  std::unique_lock lock(s.mu);
  auto ready = [&] {
    const auto q = s.queues.find(id);
    return q == s.queues.end() || !q->second.empty();
  };
  if (wait == std::chrono::milliseconds::max())
    s.pieces.wait(lock, ready);
  else
    s.pieces.wait_for(lock, wait, ready);
  const auto q = s.queues.find(id);
  if (q == s.queues.end() || q->second.empty()) return false;
  piece = std::move(q->second.front());
  q->second.pop_front();
  if (piece.finish != Finish::None) s.queues.erase(q);
  return true;
}

Engine::Result Engine::wait(int64_t id) {
  {
    std::lock_guard lock(s_->mu);
    if (s_->queues.count(id) == 0)
      throw Error(detail::str_cat("engine: wait: request ", id, " is unknown, finished, or has a callback"));
  }
  Result r;
  Piece p;
  while (next(id, p)) {
    if (p.token >= 0) r.tokens.push_back(p.token);
    r.text += p.text;
    if (p.finish != Finish::None) {
      r.finish = p.finish;
      r.error = p.error;
      break;
    }
  }
  return r;
}

EngineStats Engine::stats() const {
  std::lock_guard lock(s_->mu);
  return s_->stats;
}

const Model& Engine::model() const { return *s_->model; }

int64_t Engine::blocks() const { return s_->blocks->blocks(); }

}  // namespace wick::models
