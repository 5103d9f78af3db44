// Sampling and generation (include/wick/models/generate.h).
#include "wick/models/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

namespace wick::models {

// ---- sampling -----------------------------------------------------------------------------------

namespace {

constexpr size_t kDraws = 256;  // uniform draws made at a time

void require(bool ok, const char* what, double value) {
  if (!ok) throw Error(detail::str_cat("sampler: ", what, ", got ", value));
}

constexpr float kNone = -std::numeric_limits<float>::infinity();

// The largest logit, each NaN first replaced by -inf. kLanes running maxima, so that the loop is
// not one chain of dependent compares (which took 0.3 ms over 128k logits) and vectorises.
float clean_max(std::vector<float>& l) {
  constexpr size_t kLanes = 16;
  float lanes[kLanes];
  std::fill(lanes, lanes + kLanes, kNone);
  size_t i = 0;
  for (; i + kLanes <= l.size(); i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) {
      const float v = std::isnan(l[i + j]) ? kNone : l[i + j];
      l[i + j] = v;
      lanes[j] = v > lanes[j] ? v : lanes[j];
    }
  }
  for (; i < l.size(); ++i) {
    if (std::isnan(l[i])) l[i] = kNone;
    lanes[0] = l[i] > lanes[0] ? l[i] : lanes[0];
  }
  return *std::max_element(lanes, lanes + kLanes);
}

}  // namespace

Sampler::Sampler(const SamplingOptions& o, bool seed_now) : o_(o) {
  check(o);
  if (seed_now) manual_seed(o.seed, Device::cpu());
}

void Sampler::check(const SamplingOptions& o) {
  require(std::isfinite(o.temperature) && o.temperature >= 0, "temperature must be finite and at least 0",
          o.temperature);
  require(o.top_k >= 0, "top_k must be at least 0", static_cast<double>(o.top_k));
  require(o.top_p > 0 && o.top_p <= 1, "top_p must be in (0, 1]", o.top_p);
  require(o.min_p >= 0 && o.min_p <= 1, "min_p must be in [0, 1]", o.min_p);
  require(std::isfinite(o.repetition_penalty) && o.repetition_penalty > 0,
          "repetition_penalty must be finite and positive", o.repetition_penalty);
  require(o.penalty_last_n >= 0, "penalty_last_n must be at least 0", static_cast<double>(o.penalty_last_n));
  require(o.presence_penalty >= -2 && o.presence_penalty <= 2, "presence_penalty must be in [-2, 2]",
          o.presence_penalty);
  require(o.frequency_penalty >= -2 && o.frequency_penalty <= 2, "frequency_penalty must be in [-2, 2]",
          o.frequency_penalty);
}

bool SamplingOptions::penalized() const {
  return repetition_penalty != 1 || presence_penalty != 0 || frequency_penalty != 0;
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  const auto vocab = static_cast<int32_t>(logits.size());
  if (vocab == 0) throw ShapeError("sampler: no logits");
  std::vector<float> l(logits.begin(), logits.end());
  if (o_.penalized() && o_.penalty_last_n > 0) {
    const size_t n = std::min(history.size(), static_cast<size_t>(o_.penalty_last_n));
    std::vector<int32_t> seen(history.end() - static_cast<std::ptrdiff_t>(n), history.end());
    std::sort(seen.begin(), seen.end());
    const auto p = static_cast<float>(o_.repetition_penalty);
    for (size_t i = 0; i < seen.size();) {
      const int32_t id = seen[i];
      size_t count = 1;
      while (i + count < seen.size() && seen[i + count] == id) ++count;
      i += count;
      if (id < 0 || id >= vocab) continue;
      float& v = l[static_cast<size_t>(id)];
      if (p != 1) v = v > 0 ? v / p : v * p;
      v -= static_cast<float>(o_.presence_penalty + o_.frequency_penalty * static_cast<double>(count));
    }
  }
  // A NaN logit counts as -inf: never picked, never drawn. Logits with nothing above -inf are an
  // error (the model's output is broken).
  const float top = clean_max(l);
  if (top == kNone) throw Error(detail::str_cat("sampler: all ", vocab, " logits are -inf or NaN"));
  if (o_.temperature == 0) return static_cast<int32_t>(std::find(l.begin(), l.end(), top) - l.begin());

  // Weights exp((l - top) / temperature), in double (1 for the largest, also where it is +inf); a
  // candidate's probability is its weight over the candidates' total.
  const auto weight = [&](int32_t id) {
    const float v = l[static_cast<size_t>(id)];
    return v == top ? 1.0 : std::exp((v - top) / o_.temperature);
  };
  const auto likelier = [&](int32_t a, int32_t b) {
    return l[static_cast<size_t>(a)] != l[static_cast<size_t>(b)] ? l[static_cast<size_t>(a)] > l[static_cast<size_t>(b)] : a < b;
  };
  // The candidates likeliest first (ties: the lower id): the top k where asked, sorted at once;
  // else every token, ranked only as far as the walks below reach (a full sort of a vocabulary of
  // 128k tokens took about 20 ms, more than a GPU's decode step), band by band of weights: [1e-4, 1],
  // then [1e-8, 1e-4), and so on down to 0. Every weight of a band is above every weight of the
  // next, and the weight grows with the logit, so the bands in turn, each sorted, are the order
  // of a full sort.
  std::vector<int32_t> ranked;
  std::vector<double> weights;  // of every token, in id order (top_k = 0)
  double total = 0;
  double band_lo = 1e-4, band_hi = std::numeric_limits<double>::infinity();
  bool all_ranked = false;
  if (o_.top_k > 0 && o_.top_k < vocab) {
    ranked.resize(static_cast<size_t>(vocab));
    std::iota(ranked.begin(), ranked.end(), 0);
    std::partial_sort(ranked.begin(), ranked.begin() + o_.top_k, ranked.end(), likelier);
    ranked.resize(static_cast<size_t>(o_.top_k));
    for (int32_t id : ranked) total += weight(id);
    all_ranked = true;
  } else {
    weights.resize(static_cast<size_t>(vocab));
    for (int32_t id = 0; id < vocab; ++id) total += weights[static_cast<size_t>(id)] = weight(id);
  }
  const auto p = [&](size_t i) {
    const int32_t id = ranked[i];
    return (weights.empty() ? weight(id) : weights[static_cast<size_t>(id)]) / total;
  };
  // Whether candidate i exists, ranking the next bands as needed.
  const auto rank = [&](size_t i) {
    while (ranked.size() <= i && !all_ranked) {
      const size_t first = ranked.size();
      for (int32_t id = 0; id < vocab; ++id) {
        const double w = weights[static_cast<size_t>(id)];
        if (w >= band_lo && w < band_hi) ranked.push_back(id);
      }
      std::sort(ranked.begin() + static_cast<std::ptrdiff_t>(first), ranked.end(), likelier);
      all_ranked = band_lo == 0;
      band_hi = band_lo;
      band_lo = band_lo > 1e-300 ? band_lo * 1e-4 : 0;
    }
    return ranked.size() > i;
  };
  // The candidates kept: all, then the likeliest whose probabilities reach top_p, then those at
  // least min_p times as likely as the first. `kept` is their count where a cut was made.
  std::optional<size_t> kept;
  double mass = 1;  // of the kept candidates
  if (o_.top_p < 1) {
    double cumulative = 0;
    for (size_t i = 0; rank(i); ++i) {
      cumulative += p(i);
      if (cumulative >= o_.top_p) {
        kept = i + 1;
        break;
      }
    }
  }
  if (o_.min_p > 0) {
    rank(0);
    const double floor = o_.min_p * p(0);
    size_t i = 1;
    while ((!kept || i < *kept) && rank(i) && p(i) >= floor) ++i;
    kept = i;
  }
  if (kept) {
    mass = 0;
    for (size_t i = 0; i < *kept; ++i) mass += p(i);
  }
  if (next_draw_ == draws_.size()) {
    // Stream batches_ of the seed: the generator seeded, then one empty draw per stream before it.
    manual_seed(o_.seed, Device::cpu());
    for (uint64_t i = 0; i < batches_; ++i) (void)Tensor::rand_uniform({0}, 0.0, 1.0, DType::F64);
    draws_ = Tensor::rand_uniform({static_cast<int64_t>(kDraws)}, 0.0, 1.0, DType::F64).to_vector<double>();
    ++batches_;
    next_draw_ = 0;
  }
  const double u = draws_[next_draw_++] * mass;
  double cumulative = 0;
  size_t i = 0;
  for (; (!kept || i < *kept) && rank(i); ++i) {
    cumulative += p(i);
    if (u < cumulative) return ranked[i];
  }
  return ranked[i - 1];  // u at the very top of the mass, past the rounded sums
}

// ---- generation ---------------------------------------------------------------------------------

int64_t GenerateResult::generated_tokens() const {
  int64_t n = 0;
  for (const auto& t : tokens) n += static_cast<int64_t>(t.size());
  return n;
}

GenerateResult generate(const Model& model, std::span<const std::vector<int32_t>> prompts, const GenerateOptions& options,
                        const std::function<bool(int64_t, int32_t)>& on_token, const Tokenizer* given) {
  const Tokenizer* tokenizer = given != nullptr ? given : model.tokenizer();
  using Clock = std::chrono::steady_clock;
  const auto b = static_cast<int64_t>(prompts.size());
  if (b == 0) throw ShapeError("generate: no prompts");
  if (options.max_tokens < 0) throw ShapeError(detail::str_cat("generate: max_tokens ", options.max_tokens, " is negative"));
  size_t longest = 0;
  GenerateResult r;
  r.tokens.resize(static_cast<size_t>(b));
  const int64_t vocab = model.vocab();
  for (size_t s = 0; s < prompts.size(); ++s) {
    const auto& p = prompts[s];
    if (p.empty()) throw ShapeError("generate: an empty prompt (start it with BOS)");
    for (size_t i = 0; i < p.size(); ++i)
      if (p[i] < 0 || p[i] >= vocab)
        throw IndexError(detail::str_cat("generate: token ", p[i], " (prompt ", s, ", position ", i,
                                         ") is outside the model's vocabulary of ", vocab));
    longest = std::max(longest, p.size());
    r.prompt_tokens += static_cast<int64_t>(p.size());
  }
  // The tokens drawn are those the tokenizer can spell: a checkpoint's logits may pass its
  // tokenizer's size (rows padded to a round number), never fall short of it.
  int64_t pickable = vocab;
  if (tokenizer != nullptr) {
    if (tokenizer->size() > vocab)
      throw ShapeError(detail::str_cat("generate: a tokenizer of ", tokenizer->size(), " tokens beside a model of ",
                                       vocab, " logits"));
    pickable = tokenizer->size();
  }
  const auto t0 = static_cast<int64_t>(longest);
  // Generation stops where the sequences fill the model's context, as llama.cpp stops at its
  // context size: the cache never holds more positions than the model was trained for.
  const int64_t context = model.context();
  if (context > 0 && t0 >= context)
    throw ShapeError(detail::str_cat("generate: a prompt of ", t0, " tokens leaves no room in the model's context of ",
                                     context, " positions"));
  const int64_t max_tokens = context > 0 ? std::min(options.max_tokens, context - t0) : options.max_tokens;
  const int64_t capacity = t0 + max_tokens;
  // A model split over ranks: rank 0 picks the tokens and says which sequences end, and the other
  // ranks take its word (their draws and callbacks could differ), so that all run the same steps.
  const dist::Communicator& comm = model.communicator();
  const bool follower = comm.defined() && comm.rank() > 0, split = comm.defined() && comm.size() > 1;
  std::optional<Sampler> sampler;
  if (!follower) sampler.emplace(options.sampling);

  // Left padding: sequence s starts at column pad[s]; its keys before it are hidden.
  std::vector<int64_t> ids(static_cast<size_t>(b * t0), 0);
  std::vector<int64_t> pad(static_cast<size_t>(b));
  std::vector<std::vector<int32_t>> history(prompts.begin(), prompts.end());
  for (int64_t s = 0; s < b; ++s) {
    const auto& p = prompts[static_cast<size_t>(s)];
    pad[static_cast<size_t>(s)] = t0 - static_cast<int64_t>(p.size());
    for (size_t i = 0; i < p.size(); ++i) ids[static_cast<size_t>(s * t0 + pad[static_cast<size_t>(s)]) + i] = p[i];
  }
  const bool padded = std::any_of(pad.begin(), pad.end(), [](int64_t x) { return x > 0; });
  auto mask = [&](int64_t t_kv) -> Tensor {
    if (!padded) return {};
    std::vector<float> m(static_cast<size_t>(b * t_kv), 0.f);
    for (int64_t s = 0; s < b; ++s)
      for (int64_t j = 0; j < pad[static_cast<size_t>(s)]; ++j) m[static_cast<size_t>(s * t_kv + j)] = -std::numeric_limits<float>::infinity();
    return Tensor::from_vector(m, {b, t_kv});
  };
  auto stops = [&](int32_t id) {
    return (options.stop_at_end && tokenizer != nullptr && tokenizer->is_end(id)) ||
           std::find(options.stop_tokens.begin(), options.stop_tokens.end(), id) != options.stop_tokens.end();
  };

  auto cache = model.make_cache(b, std::max<int64_t>(capacity, 1));
  const auto start = Clock::now();
  std::vector<float> host = model.forward(Tensor::from_vector(ids, {b, t0}), cache, mask(t0), true).to_vector<float>();
  r.prompt_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const auto decode_start = Clock::now();
  // The model's decode steps (a recorded graph on a GPU, a split model's collectives in it), or
  // forward() a position at a time.
  const std::unique_ptr<DecodeSteps> graph = options.graph ? model.decode_steps(cache) : nullptr;
  std::vector<bool> done(static_cast<size_t>(b), max_tokens == 0);
  for (int64_t step = 0; step < max_tokens; ++step) {
    std::vector<int64_t> next(static_cast<size_t>(b), 0);
    bool any = false;
    std::vector<int64_t> word(static_cast<size_t>(2 * b), 0);  // rank 0's: the tokens, then 1 for each sequence ending
    if (!follower) {
      for (int64_t s = 0; s < b; ++s) {
        if (done[static_cast<size_t>(s)]) continue;
        const int32_t id =
            sampler->sample({host.data() + s * vocab, static_cast<size_t>(pickable)}, history[static_cast<size_t>(s)]);
        const bool go_on = on_token ? on_token(s, id) : true;
        word[static_cast<size_t>(s)] = id;
        word[static_cast<size_t>(b + s)] =
            !go_on || stops(id) || static_cast<int64_t>(r.tokens[static_cast<size_t>(s)].size()) + 1 == max_tokens;
      }
    }
    if (split) word = comm.broadcast(Tensor::from_vector(word, {2 * b}, model.device()), 0).to_vector<int64_t>();
    for (int64_t s = 0; s < b; ++s) {
      if (done[static_cast<size_t>(s)]) continue;
      const auto id = static_cast<int32_t>(word[static_cast<size_t>(s)]);
      history[static_cast<size_t>(s)].push_back(id);
      r.tokens[static_cast<size_t>(s)].push_back(id);
      next[static_cast<size_t>(s)] = id;
      if (follower && on_token) on_token(s, id);
      done[static_cast<size_t>(s)] = word[static_cast<size_t>(b + s)] != 0;
      any = any || !done[static_cast<size_t>(s)];
    }
    if (!any) break;
    // Finished sequences run along (their tokens are ignored) so that the batch keeps one position.
    const Tensor tokens = Tensor::from_vector(next, {b, 1});
    host = (graph ? graph->step(tokens, mask(t0 + step + 1)) : model.forward(tokens, cache, mask(t0 + step + 1), true))
               .to_vector<float>();
  }
  r.generate_seconds = std::chrono::duration<double>(Clock::now() - decode_start).count();
  return r;
}

}  // namespace wick::models
