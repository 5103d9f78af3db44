// The engine: many requests served at once by one model. Requests are submitted from any thread;
// one scheduler thread runs the model a step at a time over every running sequence (continuous
// batching): each step takes the next token of every decoding sequence and chunks of the prompts
// being read, under a budget of tokens per step, so that a long prompt never stalls the others.
// Keys and values live in one pool of blocks (PagedKvCache) whose bookkeeping is KvBlocks: blocks
// are taken as sequences grow and given back as they end, full blocks of prompts are kept in a
// prefix cache that later prompts beginning the same way reuse, and when the pool runs out the
// newest sequences are preempted (their blocks given back, their tokens computed again later)
// instead of failing. docs/serving.md explains the scheduling.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "wick/models/generate.h"
#include "wick/models/model.h"

namespace wick::models {

struct EngineOptions {
  int64_t block_size = 16;  // positions per block of the pool
  // The pool: `blocks` blocks where given, else as many as kv_memory bytes hold, else kv_fraction
  // of the device's free memory when the engine is made (wick::device_memory; (0, 1)), else (all
  // 0) a quarter of a GPU's free memory or 1 GiB on the CPU, capped where max_running sequences of
  // the model's whole context fit.
  int64_t blocks = 0;
  int64_t kv_memory = 0;
  double kv_fraction = 0;
  // Keys and values in the model's dtype, or as Q8_0 rows: a bit over half of bf16's bytes, so
  // nearly twice the positions in one budget, for a small error in attention (docs/serving.md).
  KvType kv_type = KvType::Model;
  int64_t step_tokens = 512;  // tokens of one step at most (decode tokens first, then prompt chunks)
  int64_t max_running = 64;   // sequences in the running batch at most
  bool prefix_cache = true;
  // Decode steps (every running sequence's one token, nothing else) replayed from a recording per
  // batch size where the model has them (Model::paged_steps: a GPU).
  bool graphs = true;
  // Batch-invariant kernels (wick::set_batch_invariant) for every step: a request's tokens and
  // logits are the same bits alone or beside any others, wherever it sits in the batch, however its
  // prompt is chunked and whatever the prefix cache held (on one device and build). Slower:
  // docs/serving.md measures it.
  bool deterministic = false;
};

struct Request {
  std::vector<int32_t> prompt;  // token ids; empty: `text`, encoded by the model's tokenizer
  std::string text;
  int64_t max_tokens = 128;  // new tokens at most (fewer where the model's context ends first)
  SamplingOptions sampling;
  bool stop_at_end = true;                // the tokenizer's end tokens stop the request (and are kept)
  std::vector<int32_t> stop_tokens;       // more tokens that stop it (kept)
  std::vector<std::string> stop_strings;  // text that stops it (cut off, with what follows)
  // -1: none; 0: each new token's log-probability in its piece; k (at most 20): also the k likeliest
  // tokens' at that step. From the model's logits (before penalties and temperature), over the
  // tokens a sampler may pick. A request that asks for them takes its logits to the host.
  int64_t logprobs = -1;
};

enum class Finish { None, Length, Stop, Cancelled, Error };
const char* finish_name(Finish f);  // "length", "stop", "cancelled", "error"; "" for None

// What a request made since its last piece: a new token (-1 in a last piece that has none) and
// the text that became certain with it (a character split over tokens waits for its last byte,
// text that may begin a stop string for the tokens after it). The last piece has `finish` set.
struct Piece {
  int64_t request = 0;
  int32_t token = -1;
  std::string text;
  Finish finish = Finish::None;
  std::string error;  // Finish::Error's message
  // Where the request asked for them (Request::logprobs) and `token` is a new token: its
  // log-probability, and the likeliest tokens' with theirs, likeliest first.
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top_logprobs;
};

struct EngineStats {
  int64_t running = 0, waiting = 0, finished = 0;
  int64_t blocks = 0, blocks_used = 0, blocks_cached = 0, blocks_free = 0;
  int64_t prompt_tokens = 0;      // prompt tokens of admitted requests
  int64_t prefix_hit_tokens = 0;  // of them, found in the prefix cache
  int64_t computed_tokens = 0;    // tokens run through the model (recomputations included)
  int64_t generated_tokens = 0;
  int64_t steps = 0, preemptions = 0;
  double first_token_seconds = 0;  // summed over requests: submit to first token
  int64_t first_tokens = 0;
  double between_tokens_seconds = 0;  // summed over the gaps between a request's tokens
  int64_t token_gaps = 0;
};

class Engine {
 public:
  // An engine over `model` (one device, with the tokenizer the model came with for text prompts
  // and pieces' text); starts its scheduler thread. ShapeError for options out of range or a pool
  // of no block.
  explicit Engine(std::shared_ptr<const Model> model, const EngineOptions& options = {});
  // Cancels what is left and stops the thread.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request and returns its id. Its pieces go to on_piece where given (called on the
  // scheduler's thread: it must not block), else to a queue that next() reads. Errors, with
  // nothing queued: an empty prompt or one that leaves no room in the model's context, token ids
  // outside the vocabulary (IndexError), sampling options out of range, max_tokens < 1, text
  // without a tokenizer, and a request whose prompt and new tokens could never fit the pool.
  int64_t submit(Request request, std::function<void(const Piece&)> on_piece = {});
  // Stops a request at any moment: its blocks go back, its last piece says Finish::Cancelled.
  // false for an id unknown or already finished.
  bool cancel(int64_t id);
  // The next piece of a request that has no callback, waiting up to `wait`; false where none came
  // (or the id is unknown). After its last piece, a request is forgotten.
  bool next(int64_t id, Piece& piece, std::chrono::milliseconds wait = std::chrono::milliseconds::max());

  // Every piece of a request, to its last (a test's and a simple caller's way): its tokens and
  // text, and how it finished.
  struct Result {
    std::vector<int32_t> tokens;
    std::string text;
    Finish finish = Finish::None;
    std::string error;
  };
  Result wait(int64_t id);

  EngineStats stats() const;
  const Model& model() const;
  int64_t blocks() const;  // the pool's

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace wick::models
