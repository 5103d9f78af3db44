// Text generation with a Llama-family model: the prompts run through the model at once (prefill),
// then one token per step from the KV cache (decode), each next token picked by a Sampler.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "wick/models/model.h"
#include "wick/models/tokenizer.h"

namespace wick::models {

struct SamplingOptions {
  double temperature = 0;          // 0: greedy (the largest logit, the lowest id on a tie)
  int64_t top_k = 0;               // keep the k likeliest tokens; 0: all
  double top_p = 1;                // then the likeliest whose probabilities sum to top_p (nucleus)
  double min_p = 0;                // then those at least min_p times as likely as the likeliest
  double repetition_penalty = 1;   // > 1: logits of tokens among the last penalty_last_n divided
  int64_t penalty_last_n = 64;     //   (positive) or multiplied (negative) by it, as llama.cpp does
  uint64_t seed = 0;               // of the draws, from wick's Philox generator on the CPU
  // OpenAI's penalties over the same last penalty_last_n tokens, after the repetition penalty: a
  // token's logit less presence_penalty where it occurs there, and frequency_penalty times the
  // number of times it does (each in [-2, 2]; 0: none).
  double presence_penalty = 0;
  double frequency_penalty = 0;

  // Whether any penalty changes the logits (a greedy pick then needs them on the host).
  bool penalized() const;
};

// Picks next tokens from logits: the repetition penalty, the presence and frequency penalties, then greedy or top-k,
// softmax at the temperature, top-p and min-p, and a draw. An Error naming the option for one out of range (temperature
// < 0, top_p outside (0, 1], min_p outside [0, 1], a penalty <= 0). A NaN logit counts as -inf (never picked nor
// drawn), +inf logits share all the probability, and logits with nothing above -inf are an Error. Its draws are streams
// 0, 1, ... of options.seed from the CPU generator (manual_seed), taken in batches: each batch seeds the generator
// anew, so that samplers of different seeds may take turns (the engine's requests) and each draws what it would alone.
// Constructing a Sampler seeds the CPU generator (manual_seed(options.seed)) unless `seed_now` is
// false.
class Sampler {
 public:
  explicit Sampler(const SamplingOptions& options, bool seed_now = true);
  // The Error the constructor raises for options out of range, without making a Sampler.
  static void check(const SamplingOptions& options);
  // The next token after `history` (the sequence so far), from its logits over the vocabulary.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

 private:
  SamplingOptions o_;
  std::vector<double> draws_;  // uniform draws in [0, 1), made in batches
  size_t next_draw_ = 0;
  uint64_t batches_ = 0;  // batches drawn: the next is stream batches_ of the seed
};

struct GenerateOptions {
  int64_t max_tokens = 128;  // new tokens per sequence, at most (fewer where they would fill
                             // the model's context, config().context)
  SamplingOptions sampling;
  bool stop_at_end = true;          // stop a sequence at its tokenizer's end tokens (kept in it)
  std::vector<int32_t> stop_tokens; // more tokens that stop a sequence
  bool graph = true;                // decode through the model's decode_steps() (a recorded step on a GPU)
};

struct GenerateResult {
  std::vector<std::vector<int32_t>> tokens;  // the new tokens of each sequence
  int64_t prompt_tokens = 0;                 // in all prompts, padding left out
  double prompt_seconds = 0;                 // the prefill, up to the first tokens' logits on the host
  double generate_seconds = 0;               // the decode steps
  int64_t generated_tokens() const;
};

// Generates after each prompt (token ids; the prompts decoded together as one batch, each with
// its own length: shorter ones padded on the left and the padding masked out, so that each
// sequence gets the tokens it would get alone). on_token(sequence, token), where given, is called
// for each new token as it is picked; returning false stops that sequence. The tokenizer (the one
// given, else the model's) supplies the end tokens for stop_at_end, and only its tokens are drawn
// (a checkpoint's logits may number more, padded; a tokenizer larger than the vocabulary is a
// ShapeError). A prompt token outside the model's vocabulary is an IndexError naming it.
// Generation stops where the sequences fill the model's context (context() positions); a prompt
// that fills it is a ShapeError. The decode steps are the model's decode_steps() (with
// GenerateOptions::graph), else forward() one position at a time. A model split over ranks
// (LlamaModel's tensor parallelism) runs generate() on every rank at once: rank 0 samples, and its choices and its
// callback's answers reach the others, which get the same tokens (their callbacks are told them).
GenerateResult generate(const Model& model, std::span<const std::vector<int32_t>> prompts, const GenerateOptions& options,
                        const std::function<bool(int64_t, int32_t)>& on_token = {}, const Tokenizer* tokenizer = nullptr);

}  // namespace wick::models
