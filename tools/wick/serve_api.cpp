// The OpenAI API's requests and answers for `wick serve` (tools/wick/serve_api.h).
#include "serve_api.h"

#include <random>
#include <set>

#include "wick/models/generate.h"

namespace wick::serve {

namespace {

// JSON nested deeper than this is refused before it is walked (a body of a few megabytes of "["
// would otherwise recurse once a level in nlohmann's destructor and dump).
constexpr int kMaxDepth = 64;

std::string type_name(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

[[noreturn]] void wrong_type(const std::string& param, const Json& v, const char* wanted) {
  bad_request(param, "'" + param + "' must be " + wanted + ", not " + type_name(v));
}

double number(const Json& body, const std::string& param, double lo, double hi) {
  const Json& v = body[param];
  if (!v.is_number()) wrong_type(param, v, "a number");
  const double x = v.get<double>();
  if (!(x >= lo && x <= hi))
    bad_request(param,
                "'" + param + "' is " + v.dump() + ", outside [" + Json(lo).dump() + ", " + Json(hi).dump() + "]");
  return x;
}

int64_t integer(const Json& body, const std::string& param, int64_t lo, int64_t hi) {
  const Json& v = body[param];
  // 3.0 is an integer to JavaScript clients.
  if (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>())) &&
      v.get<double>() >= -9.2e18 && v.get<double>() <= 9.2e18)
    return integer(Json{{param, static_cast<int64_t>(v.get<double>())}}, param, lo, hi);
  if (!v.is_number_integer()) wrong_type(param, v, "an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
    bad_request(param, "'" + param + "' is " + v.dump() + ", above its limit of " + std::to_string(hi));
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi)
    bad_request(
        param, "'" + param + "' is " + v.dump() + ", outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

bool boolean(const Json& body, const std::string& param) {
  const Json& v = body[param];
  if (!v.is_boolean()) wrong_type(param, v, "a boolean");
  return v.get<bool>();
}

bool present(const Json& body, const char* param) { return body.contains(param) && !body[param].is_null(); }

// A message's content: a string, or a list of text parts joined.
std::string content_text(const Json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (content.is_null()) return "";
  if (!content.is_array()) wrong_type(param, content, "a string or an array of content parts");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string where = param + "[" + std::to_string(i) + "]";
    if (!part.is_object()) wrong_type(where, part, "an object");
    const auto type = part.find("type");
    if (type == part.end() || !type->is_string()) bad_request(where + ".type", "'" + where + ".type' must be a string");
    if (*type != "text")
      bad_request(where + ".type",
                  "content parts of type '" + type->get<std::string>() + "' are not supported (only 'text')");
    const auto t = part.find("text");
    if (t == part.end() || !t->is_string()) bad_request(where + ".text", "'" + where + ".text' must be a string");
    text += t->get<std::string>();
  }
  return text;
}

// The conversation for the template: each message's role and text (developer is the newer name of
// system), in the API's order.
Json chat_messages(const Json& body) {
  if (!body.contains("messages")) bad_request("messages", "'messages' is required");
  const Json& list = body["messages"];
  if (!list.is_array()) wrong_type("messages", list, "an array");
  if (list.empty()) bad_request("messages", "'messages' is empty");
  Json out = Json::array();
  for (size_t i = 0; i < list.size(); ++i) {
    const Json& m = list[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) wrong_type(where, m, "an object");
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string()) bad_request(where + ".role", "'" + where + ".role' must be a string");
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";
    if (r != "system" && r != "user" && r != "assistant")
      bad_request(where + ".role", "'" + where + ".role' is '" + role->get<std::string>() +
                                       "': wick serves the roles system (or developer), user and assistant");
    if (m.contains("tool_calls") && !m["tool_calls"].is_null())
      bad_request(where + ".tool_calls", "tool calls are not supported");
    const auto content = m.find("content");
    if (content == m.end() || (content->is_null() && r != "assistant"))
      bad_request(where + ".content", "'" + where + ".content' is required");
    Json msg = {{"role", r}, {"content", content_text(*content, where + ".content")}};
    if (m.contains("name")) {
      if (!m["name"].is_string()) wrong_type(where + ".name", m["name"], "a string");
      msg["name"] = m["name"];
    }
    out.push_back(std::move(msg));
  }
  return out;
}

// A completions prompt: text, token ids, or a list of one of either.
void completion_prompt(const Json& body, const ServedModel& model, Job& job) {
  if (!body.contains("prompt")) bad_request("prompt", "'prompt' is required");
  Json p = body["prompt"];
  if (p.is_array() && p.size() == 1 && (p[0].is_string() || p[0].is_array())) p = Json(p[0]);
  if (p.is_array() && !p.empty() && (p[0].is_string() || p[0].is_array()))
    bad_request("prompt", "one prompt per request (this 'prompt' holds " + std::to_string(p.size()) + ")");
  if (p.is_string()) {
    if (model.tokenizer == nullptr) bad_request("prompt", "this model has no tokenizer: send token ids");
    job.prompt_text = p.get<std::string>();
    // As llama.cpp's server: BOS added, the text of control tokens counts (a prompt that a chat
    // template made by hand reads as the template's would).
    job.request.prompt = model.tokenizer->encode(job.prompt_text, true, true);
    return;
  }
  if (!p.is_array()) wrong_type("prompt", p, "a string or an array of token ids");
  for (size_t i = 0; i < p.size(); ++i) {
    if (!p[i].is_number_integer()) wrong_type("prompt[" + std::to_string(i) + "]", p[i], "a token id");
    const int64_t id = p[i].get<int64_t>();
    if (id < 0 || id >= model.vocab)
      bad_request("prompt",
                  "token id " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(model.vocab));
    job.request.prompt.push_back(static_cast<int32_t>(id));
  }
  if (model.tokenizer != nullptr) job.prompt_text = model.tokenizer->decode(job.request.prompt);
}

const std::set<std::string>& known(Endpoint e) {
  static const std::set<std::string> common = {"model",
                                               "max_tokens",
                                               "temperature",
                                               "top_p",
                                               "min_p",
                                               "top_k",
                                               "repeat_penalty",
                                               "presence_penalty",
                                               "frequency_penalty",
                                               "seed",
                                               "stop",
                                               "n",
                                               "stream",
                                               "stream_options",
                                               "user",
                                               "logprobs",
                                               "logit_bias",
                                               "ignore_eos"};
  static const std::set<std::string> chat = [] {
    std::set<std::string> s = common;
    s.insert({"messages", "max_completion_tokens", "top_logprobs", "response_format", "tools", "tool_choice",
              "parallel_tool_calls"});
    return s;
  }();
  static const std::set<std::string> completions = [] {
    std::set<std::string> s = common;
    s.insert({"prompt", "echo", "suffix", "best_of"});
    return s;
  }();
  return e == Endpoint::Chat ? chat : completions;
}

}  // namespace

std::string ApiError::body() const {
  return dump(Json{{"error",
                    {{"message", message},
                     {"type", type},
                     {"param", param.empty() ? Json(nullptr) : Json(param)},
                     {"code", code.empty() ? Json(nullptr) : Json(code)}}}});
}

void bad_request(std::string param, std::string message, std::string code) {
  ApiError e;
  e.status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = std::move(code);
  throw e;
}

Job parse_request(Endpoint endpoint, std::string_view text, const ServedModel& model) {
  Json body;
  try {
    body = Json::parse(text, [](int depth, Json::parse_event_t, Json&) {
      if (depth > kMaxDepth) throw std::runtime_error("nested deeper than " + std::to_string(kMaxDepth) + " levels");
      return true;
    });
  } catch (const std::exception& e) {
    bad_request("", std::string("the body is not valid JSON: ") + e.what(), "invalid_json");
  }
  if (!body.is_object()) bad_request("", "the body must be a JSON object, not " + type_name(body), "invalid_json");
  for (const auto& [key, value] : body.items())
    if (!known(endpoint).count(key)) bad_request(key, "unrecognized request argument supplied: " + key);

  Job job;
  job.endpoint = endpoint;
  models::Request& r = job.request;
  if (present(body, "model")) {
    if (!body["model"].is_string()) wrong_type("model", body["model"], "a string");
    if (body["model"] != model.id) {
      ApiError e;
      e.status = 404;
      e.type = "invalid_request_error";
      e.param = "model";
      e.code = "model_not_found";
      e.message =
          "The model '" + body["model"].get<std::string>() + "' does not exist; this server serves '" + model.id + "'";
      throw e;
    }
  }
  if (present(body, "n") && integer(body, "n", 1, 1 << 20) != 1)
    bad_request("n", "'n' must be 1: wick serve answers one choice");
  if (present(body, "best_of") && integer(body, "best_of", 1, 1 << 20) != 1)
    bad_request("best_of", "'best_of' must be 1");
  if (present(body, "stream")) job.stream = boolean(body, "stream");
  if (present(body, "stream_options")) {
    const Json& so = body["stream_options"];
    if (!so.is_object()) wrong_type("stream_options", so, "an object");
    if (!job.stream) bad_request("stream_options", "'stream_options' is only allowed with 'stream': true");
    if (so.contains("include_usage") && !so["include_usage"].is_null()) {
      if (!so["include_usage"].is_boolean())
        wrong_type("stream_options.include_usage", so["include_usage"], "a boolean");
      job.include_usage = so["include_usage"].get<bool>();
    }
  }
  // Sampling: OpenAI's defaults (temperature 1, top_p 1), llama.cpp's extensions.
  models::SamplingOptions& s = r.sampling;
  s.temperature = present(body, "temperature") ? number(body, "temperature", 0, 2) : 1.0;
  if (present(body, "top_p")) {
    s.top_p = number(body, "top_p", 0, 1);
    if (s.top_p == 0) bad_request("top_p", "'top_p' must be above 0");
  }
  if (present(body, "min_p")) s.min_p = number(body, "min_p", 0, 1);
  if (present(body, "top_k")) s.top_k = integer(body, "top_k", 0, model.vocab);
  if (present(body, "repeat_penalty")) {
    s.repetition_penalty = number(body, "repeat_penalty", 0, 1e6);
    if (s.repetition_penalty == 0) bad_request("repeat_penalty", "'repeat_penalty' must be above 0");
  } else {
    s.repetition_penalty = 1;
  }
  // OpenAI's penalties, over the last 64 tokens as the repetition penalty (llama.cpp's way).
  if (present(body, "presence_penalty")) s.presence_penalty = number(body, "presence_penalty", -2, 2);
  if (present(body, "frequency_penalty")) s.frequency_penalty = number(body, "frequency_penalty", -2, 2);
  if (present(body, "seed")) {
    const Json& v = body["seed"];
    if (!v.is_number_integer()) wrong_type("seed", v, "an integer");
    s.seed = v.is_number_unsigned() ? v.get<uint64_t>() : static_cast<uint64_t>(v.get<int64_t>());
  } else {
    s.seed = std::random_device{}() * (uint64_t{1} << 32) + std::random_device{}();
  }
  try {
    models::Sampler::check(s);
  } catch (const std::exception& e) {
    bad_request("", e.what());
  }
  // Log-probabilities: chat's logprobs (a boolean) and top_logprobs (0 to 20), completions'
  // logprobs (the count of likeliest tokens, 0 to 20).
  if (endpoint == Endpoint::Chat) {
    const bool on = present(body, "logprobs") && boolean(body, "logprobs");
    const int64_t top = present(body, "top_logprobs") ? integer(body, "top_logprobs", 0, 20) : 0;
    if (present(body, "top_logprobs") && !on) bad_request("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    r.logprobs = on ? top : -1;
  } else if (present(body, "logprobs")) {
    r.logprobs = integer(body, "logprobs", 0, 20);
  }
  if (present(body, "logit_bias") && !(body["logit_bias"].is_object() && body["logit_bias"].empty()))
    bad_request("logit_bias", "'logit_bias' is not supported");
  if (present(body, "tools") && !(body["tools"].is_array() && body["tools"].empty()))
    bad_request("tools", "tools are not supported");
  if (present(body, "suffix") && !(body["suffix"].is_string() && body["suffix"].get<std::string>().empty()))
    bad_request("suffix", "'suffix' is not supported");
  if (present(body, "response_format")) {
    const Json& f = body["response_format"];
    if (!f.is_object() || !f.contains("type") || f["type"] != "text")
      bad_request("response_format", "only a response_format of type 'text' is supported");
  }
  if (present(body, "user") && !body["user"].is_string()) wrong_type("user", body["user"], "a string");
  if (present(body, "echo")) job.echo = boolean(body, "echo");
  // llama.cpp's extension: the model's end tokens do not stop the answer (benchmarks).
  if (present(body, "ignore_eos")) r.stop_at_end = !boolean(body, "ignore_eos");
  if (present(body, "stop")) {
    const Json& v = body["stop"];
    const Json list = v.is_string() ? Json::array({v}) : v;
    if (!list.is_array()) wrong_type("stop", v, "a string or an array of strings");
    if (list.size() > 4) bad_request("stop", "'stop' holds " + std::to_string(list.size()) + " strings; 4 at most");
    for (const Json& x : list) {
      if (!x.is_string()) wrong_type("stop", x, "a string");
      if (!x.get<std::string>().empty()) r.stop_strings.push_back(x.get<std::string>());
    }
  }

  // The prompt.
  if (endpoint == Endpoint::Chat) {
    if (model.chat == nullptr)
      bad_request("messages", "this server has no chat template: " + model.chat_error, "chat_template_unavailable");
    const Json messages = chat_messages(body);
    std::string text;
    try {
      text = model.chat->render_json(messages.dump(), true);
    } catch (const std::exception& e) {
      bad_request("messages", std::string("the model's chat template refused the conversation: ") + e.what());
    }
    r.prompt = model.tokenizer->encode(text, false, true);
  } else {
    completion_prompt(body, model, job);
  }
  const auto prompt_tokens = static_cast<int64_t>(r.prompt.size());
  if (prompt_tokens == 0) bad_request(endpoint == Endpoint::Chat ? "messages" : "prompt", "the prompt has no tokens");
  const std::string length_param = present(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (present(body, length_param.c_str())) {
    const int64_t n = integer(body, length_param, 1, int64_t{1} << 40);
    if (n > model.max_tokens)
      bad_request(length_param, "'" + length_param + "' is " + std::to_string(n) + "; this server allows " +
                                    std::to_string(model.max_tokens) + " at most");
    if (prompt_tokens + n > model.context)
      bad_request(length_param,
                  "This model's maximum context length is " + std::to_string(model.context) +
                      " tokens. However, you requested " + std::to_string(prompt_tokens + n) + " tokens (" +
                      std::to_string(prompt_tokens) + " in the prompt, " + std::to_string(n) + " for the completion).",
                  "context_length_exceeded");
    r.max_tokens = n;
  } else {
    if (prompt_tokens >= model.context)
      bad_request(endpoint == Endpoint::Chat ? "messages" : "prompt",
                  "This model's maximum context length is " + std::to_string(model.context) +
                      " tokens. However, the prompt has " + std::to_string(prompt_tokens) + " tokens.",
                  "context_length_exceeded");
    r.max_tokens = std::min(model.max_tokens, model.context - prompt_tokens);
  }
  return job;
}

Json finish_reason(models::Finish f) {
  switch (f) {
    case models::Finish::Length: return "length";
    case models::Finish::Stop: return "stop";
    default: return nullptr;
  }
}

Json usage(const Answer& a) {
  return {{"prompt_tokens", a.prompt_tokens},
          {"completion_tokens", a.completion_tokens},
          {"total_tokens", a.prompt_tokens + a.completion_tokens}};
}

Json whole_answer(const Job& job, const std::string& id, int64_t created, const std::string& model, const Answer& a) {
  Json choice;
  if (job.endpoint == Endpoint::Chat) {
    choice = {{"index", 0},
              {"message", {{"role", "assistant"}, {"content", a.text}}},
              {"logprobs", a.logprobs},
              {"finish_reason", finish_reason(a.finish)}};
  } else {
    choice = {{"index", 0},
              {"text", job.echo ? job.prompt_text + a.text : a.text},
              {"logprobs", a.logprobs},
              {"finish_reason", finish_reason(a.finish)}};
  }
  return {{"id", id},
          {"object", job.endpoint == Endpoint::Chat ? "chat.completion" : "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", Json::array({choice})},
          {"usage", usage(a)}};
}

Json stream_chunk(const Job& job, const std::string& id, int64_t created, const std::string& model,
                  const std::string& text, models::Finish finish, bool first, const Json& logprobs) {
  Json choice;
  if (job.endpoint == Endpoint::Chat) {
    Json delta = Json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || (first && finish == models::Finish::None)) delta["content"] = text;
    choice = {{"index", 0}, {"delta", delta}, {"logprobs", logprobs}, {"finish_reason", finish_reason(finish)}};
  } else {
    choice = {{"index", 0},
              {"text", first && job.echo ? job.prompt_text + text : text},
              {"logprobs", logprobs},
              {"finish_reason", finish_reason(finish)}};
  }
  Json chunk = {{"id", id},
                {"object", job.endpoint == Endpoint::Chat ? "chat.completion.chunk" : "text_completion"},
                {"created", created},
                {"model", model},
                {"choices", Json::array({choice})}};
  if (job.include_usage) chunk["usage"] = nullptr;
  return chunk;
}

Json usage_chunk(const Job& job, const std::string& id, int64_t created, const std::string& model, const Answer& a) {
  return {{"id", id},
          {"object", job.endpoint == Endpoint::Chat ? "chat.completion.chunk" : "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", Json::array()},
          {"usage", usage(a)}};
}

Json piece_logprobs(const Job& job, const ServedModel& model, const models::Piece& p, int64_t text_offset) {
  if (job.request.logprobs < 0 || p.token < 0) return nullptr;
  const auto text = [&](int32_t id) { return model.tokenizer != nullptr ? model.tokenizer->piece(id) : std::string(); };
  if (job.endpoint == Endpoint::Chat) {
    const auto entry = [&](int32_t id, float logprob) {
      const std::string t = text(id);
      Json bytes = Json::array();
      for (unsigned char c : t) bytes.push_back(static_cast<int>(c));
      return Json{{"token", t}, {"logprob", logprob}, {"bytes", bytes}};
    };
    Json e = entry(p.token, p.logprob);
    e["top_logprobs"] = Json::array();
    for (const auto& [id, lp] : p.top_logprobs) e["top_logprobs"].push_back(entry(id, lp));
    return {{"content", Json::array({e})}, {"refusal", nullptr}};
  }
  Json top = Json::object();
  for (const auto& [id, lp] : p.top_logprobs) top[text(id)] = lp;
  return {{"tokens", Json::array({text(p.token)})},
          {"token_logprobs", Json::array({p.logprob})},
          {"top_logprobs", Json::array({top})},
          {"text_offset", Json::array({text_offset})}};
}

void append_logprobs(Json& all, const Json& one) {
  if (one.is_null()) return;
  if (all.is_null()) {
    all = one;
    return;
  }
  for (const auto& [key, list] : one.items())
    if (list.is_array())
      for (const Json& x : list) all[key].push_back(x);
}

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace wick::serve
