// The OpenAI API of `wick serve` without the HTTP: a request body read into an engine request (every
// member checked, errors as the API shapes them), and the bodies and stream chunks of the answers.
// tools/wick/serve.cpp puts these behind HTTP.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wick/models/chat_template.h"
#include "wick/models/engine.h"

namespace wick::serve {

using Json = nlohmann::ordered_json;

// An answer that is an error: the HTTP status and OpenAI's body
// {"error": {"message", "type", "param", "code"}}.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;    // the member at fault ("" where none)
  std::string code;     // "" where none
  int retry_after = 0;  // seconds, for 429 and 503 (a Retry-After header)

  std::string body() const;
};

// Throws an ApiError of status 400 naming `param`.
[[noreturn]] void bad_request(std::string param, std::string message, std::string code = "");

// What the server is, for the checks of a request.
struct ServedModel {
  std::string id;                                // the name /v1/models lists
  const models::Tokenizer* tokenizer = nullptr;  // nullptr: token ids only
  const models::ChatTemplate* chat = nullptr;    // nullptr: no chat (chat_error says why)
  std::string chat_error;
  int64_t vocab = 0;
  int64_t context = 0;     // positions a request may use (prompt and new tokens)
  int64_t max_tokens = 0;  // new tokens a request may ask for at most
};

enum class Endpoint { Chat, Completions };

// A request read from its body, ready for Engine::submit.
struct Job {
  Endpoint endpoint = Endpoint::Completions;
  models::Request request;  // prompt ids filled in
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: the prompt's text before the answer
  std::string prompt_text;     // for echo
};

// Parses and checks a body (JSON, at most 64 levels deep) for the endpoint; ApiError for anything
// the API refuses (malformed JSON, members of the wrong type or out of range, unknown roles, a
// model of another name, n other than 1, a prompt past the context, ...).
Job parse_request(Endpoint endpoint, std::string_view body, const ServedModel& model);

// A request's answer, as its pieces come: the text, the tokens, how it ended.
struct Answer {
  std::string text;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  models::Finish finish = models::Finish::None;
  Json logprobs;  // null where the request did not ask for them
};

// OpenAI's finish_reason for an engine's finish ("stop", "length"; null before the end).
Json finish_reason(models::Finish f);
Json usage(const Answer& a);
// The whole answer of a request that was not streamed.
Json whole_answer(const Job& job, const std::string& id, int64_t created, const std::string& model, const Answer& a);
// One stream chunk: new text (and, on the last, the finish); the chat's first chunk carries the
// assistant's role.
Json stream_chunk(const Job& job, const std::string& id, int64_t created, const std::string& model,
                  const std::string& text, models::Finish finish, bool first, const Json& logprobs = nullptr);
// The log-probabilities of one piece's token in the endpoint's shape (chat: {"content": [entry]};
// completions: tokens, token_logprobs, top_logprobs, text_offset of one token each), null where
// the request did not ask or the piece has no token; and one appended to those so far.
Json piece_logprobs(const Job& job, const ServedModel& model, const models::Piece& p, int64_t text_offset);
void append_logprobs(Json& all, const Json& one);
// The usage chunk that ends a stream with stream_options.include_usage.
Json usage_chunk(const Job& job, const std::string& id, int64_t created, const std::string& model, const Answer& a);

// JSON text with invalid UTF-8 replaced (a model's bytes are not always text).
std::string dump(const Json& j);

}  // namespace wick::serve
