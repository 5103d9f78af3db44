// `wick serve`: the engine behind OpenAI's HTTP API (cpp-httplib), with the model's chat template,
// /health, /metrics and a chat page. The HTTP layer only: requests are read and checked by
// serve_api.cpp, answered by models::Engine. docs/serving.md describes the server.
#include "serve.h"

#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "args.h"
#include "bench_serve.h"
#include "generate.h"
#include "serve_api.h"
#include "serve_metrics.h"
#include "serve_pool.h"
#include "wick/dist.h"
#include "wick/models/tensor_parallel.h"

namespace wick::cli {

namespace {

using Clock = std::chrono::steady_clock;

// The signal that asked the server to stop (0: none yet); set by the handler.
volatile std::sig_atomic_t g_stop_signal = 0;
using serve::ApiError;
using serve::Json;

struct ServeOptions {
  std::string model_path, shape, host = "127.0.0.1", api_key, alias, chat_template_file;
  std::optional<quant::QType> qtype;
  int port = 8080;
  Device device = available_devices().back();
  std::vector<Device> devices;
  std::optional<DType> dtype;
  models::EngineOptions engine;
  int64_t ctx = 0;         // positions a request may use; 0: the model's context
  int64_t max_tokens = 0;  // new tokens a request may ask for; 0: ctx
  int64_t max_queue = 0;   // requests waiting beyond the running batch; 0: 4 x --parallel
  int64_t max_body = 8 << 20;
  int64_t threads = 0;          // HTTP threads; 0: --parallel + --max-queue + 8
  int64_t max_connections = 0;  // connections open at once; 0: 2 x threads
  double grace = 5;     // seconds a stop waits for running requests before cancelling them
};

// Everything the handlers share.
struct Server {
  ServeOptions opt;
  httplib::Server http;
  std::atomic<bool> ready{false}, stopping{false};
  std::shared_ptr<const models::Model> model;
  std::unique_ptr<models::Engine> engine;
  std::optional<models::ChatTemplate> chat;
  serve::ServedModel served;
  serve::Metrics metrics;
  std::mutex mu;
  std::set<int64_t> active;  // engine requests whose HTTP answer is still being written
  std::atomic<int64_t> next_id{0};
  std::atomic<bool> listening_ended{false};
  std::atomic<int64_t> connections{0};  // being answered or waiting for an HTTP thread

  // Ends the listener (which may not have begun to listen yet) once; httplib then waits for the
  // connections being answered.
  void stop_http() {
    while (!listening_ended) {
      if (http.is_running()) {
        http.stop();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
};

// Constant-time comparison of the presented key with the server's.
bool same_key(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < b.size(); ++i) diff |= static_cast<unsigned char>(b[i] ^ (i < a.size() ? a[i] : 0));
  return diff == 0;
}

void send_error(Server& s, httplib::Response& res, const ApiError& e, const char* endpoint) {
  res.status = e.status;
  if (e.retry_after > 0) res.set_header("Retry-After", std::to_string(e.retry_after));
  res.set_content(e.body(), "application/json");
  s.metrics.request(endpoint, e.status);
}

ApiError error_of(int status, std::string message, std::string type, std::string code = "", int retry_after = 0) {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.type = std::move(type);
  e.code = std::move(code);
  e.retry_after = retry_after;
  return e;
}

// The checks before any /v1 work: loaded, not stopping, the key.
bool admit(Server& s, const httplib::Request& req, httplib::Response& res, const char* endpoint) {
  if (!s.opt.api_key.empty()) {
    const std::string auth = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (auth.compare(0, prefix.size(), prefix) != 0 || !same_key(auth.substr(prefix.size()), s.opt.api_key)) {
      send_error(
          s, res,
          error_of(401, auth.empty() ? "no API key: send the header 'Authorization: Bearer KEY'" : "incorrect API key",
                   "authentication_error", "invalid_api_key"),
          endpoint);
      return false;
    }
  }
  if (s.stopping) {
    send_error(s, res, error_of(503, "the server is shutting down", "server_error", "shutting_down", 5), endpoint);
    return false;
  }
  if (!s.ready) {
    send_error(s, res, error_of(503, "the model is loading", "server_error", "loading", 5), endpoint);
    return false;
  }
  return true;
}

// One request's answer as it is written: the engine's pieces, what was said, the clocks.
struct Exchange {
  Server* s = nullptr;
  serve::Job job;
  int64_t id = 0;  // the engine's
  std::string name;
  int64_t created = 0;
  Clock::time_point arrived, last_token;
  serve::Answer answer;
  bool first = true, finished = false;

  // The next piece, waiting up to `wait`; false where none came.
  Json logprobs;  // the last piece's

  bool next(models::Piece& p, std::chrono::milliseconds wait) {
    if (!s->engine->next(id, p, wait)) return false;
    logprobs = serve::piece_logprobs(job, s->served, p, static_cast<int64_t>(answer.text.size()));
    serve::append_logprobs(answer.logprobs, logprobs);
    if (p.token >= 0) {
      const Clock::time_point now = Clock::now();
      if (answer.completion_tokens == 0)
        s->metrics.first_token(std::chrono::duration<double>(now - arrived).count());
      else
        s->metrics.between_tokens(std::chrono::duration<double>(now - last_token).count());
      last_token = now;
      ++answer.completion_tokens;
    }
    answer.text += p.text;
    if (p.finish != models::Finish::None) {
      answer.finish = p.finish;
      finished = true;
    }
    return true;
  }

  // Given back when the answer was written or the client went away: an unfinished request is
  // cancelled (its blocks freed).
  void release() {
    if (!finished) s->engine->cancel(id);
    std::lock_guard lock(s->mu);
    s->active.erase(id);
  }
};

bool write(httplib::DataSink& sink, const std::string& text) { return sink.write(text.data(), text.size()); }

std::string event(const Json& j) { return "data: " + serve::dump(j) + "\n\n"; }

// A last piece that is not an answer (the engine failed, or cancelled it as the server stops), and
// the error body that says so.
bool failed(const models::Piece& p) {
  return p.finish == models::Finish::Error || p.finish == models::Finish::Cancelled;
}
std::string failure(const models::Piece& p) {
  return error_of(500,
                  p.finish == models::Finish::Error ? p.error : "the request was cancelled (the server is stopping)",
                  "server_error")
      .body();
}

// Server-sent events: a chunk per piece that has text, the finish, the usage where asked, [DONE].
// A comment every second keeps the connection checked: a client that is gone fails a write and
// its request is cancelled.
bool stream_step(Exchange& x, httplib::DataSink& sink) {
  models::Piece p;
  if (!x.next(p, std::chrono::milliseconds(1000))) return write(sink, ": keep-alive\n\n");
  if (failed(p)) {
    write(sink, "data: " + failure(p) + "\n\n");
    sink.done();
    return true;
  }
  // A chunk for every token, also one whose text waits for the next (a character split over
  // tokens) or that has none (a model without a tokenizer): clients and benchmarks see each token.
  if (p.token >= 0 || !p.text.empty() || p.finish != models::Finish::None || x.first) {
    const bool ok = write(sink, event(serve::stream_chunk(x.job, x.name, x.created, x.s->served.id, p.text, p.finish,
                                                          x.first, x.logprobs)));
    x.first = false;
    if (!ok) return false;
  }
  if (p.finish != models::Finish::None) {
    if (x.job.include_usage &&
        !write(sink, event(serve::usage_chunk(x.job, x.name, x.created, x.s->served.id, x.answer))))
      return false;
    if (!write(sink, "data: [DONE]\n\n")) return false;
    sink.done();
  }
  return true;
}

// A whole answer: the body once the request has ended; until then a space every two seconds (JSON
// allows leading white space), which finds a client that has gone away.
bool whole_step(Exchange& x, httplib::DataSink& sink) {
  models::Piece p;
  const Clock::time_point until = Clock::now() + std::chrono::seconds(2);
  while (!x.finished) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    if (left.count() <= 0 || !x.next(p, left)) return write(sink, " ");
    if (failed(p)) {
      write(sink, failure(p));
      sink.done();
      return true;
    }
  }
  write(sink, serve::dump(serve::whole_answer(x.job, x.name, x.created, x.s->served.id, x.answer)));
  sink.done();
  return true;
}

void generate(Server& s, serve::Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
  const char* name = endpoint == serve::Endpoint::Chat ? "chat" : "completions";
  const Clock::time_point arrived = Clock::now();
  if (!admit(s, req, res, name)) return;
  auto x = std::make_shared<Exchange>();
  try {
    x->job = serve::parse_request(endpoint, req.body, s.served);
  } catch (const ApiError& e) {
    return send_error(s, res, e, name);
  } catch (const std::exception& e) {
    return send_error(s, res, error_of(400, e.what(), "invalid_request_error"), name);
  }
  if (s.engine->stats().waiting >= s.opt.max_queue)
    return send_error(s, res,
                      error_of(503, "the server is busy: " + std::to_string(s.opt.max_queue) + " requests wait already",
                               "server_error", "server_busy", 1),
                      name);
  x->s = &s;
  x->arrived = arrived;
  x->created = static_cast<int64_t>(std::time(nullptr));
  x->answer.prompt_tokens = static_cast<int64_t>(x->job.request.prompt.size());
  try {
    x->id = s.engine->submit(x->job.request);
  } catch (const std::exception& e) {
    return send_error(s, res, error_of(400, e.what(), "invalid_request_error"), name);
  }
  {
    std::lock_guard lock(s.mu);
    s.active.insert(x->id);
  }
  x->name = std::string(endpoint == serve::Endpoint::Chat ? "chatcmpl-" : "cmpl-") + std::to_string(x->id) + "-" +
            std::to_string(s.next_id++);
  s.metrics.request(name, 200);
  const auto release = [x](bool) { x->release(); };
  if (x->job.stream) {
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream", [x](size_t, httplib::DataSink& sink) { return stream_step(*x, sink); }, release);
  } else {
    res.set_chunked_content_provider(
        "application/json", [x](size_t, httplib::DataSink& sink) { return whole_step(*x, sink); }, release);
  }
}

void routes(Server& s) {
  s.http.Post("/v1/chat/completions", [&s](const httplib::Request& req, httplib::Response& res) {
    generate(s, serve::Endpoint::Chat, req, res);
  });
  s.http.Post("/v1/completions", [&s](const httplib::Request& req, httplib::Response& res) {
    generate(s, serve::Endpoint::Completions, req, res);
  });
  s.http.Get("/v1/models", [&s](const httplib::Request& req, httplib::Response& res) {
    if (!admit(s, req, res, "models")) return;
    const Json model = {{"id", s.served.id}, {"object", "model"}, {"created", 0}, {"owned_by", "wick"}};
    res.set_content(serve::dump(Json{{"object", "list"}, {"data", Json::array({model})}}), "application/json");
    s.metrics.request("models", 200);
  });
  s.http.Get("/health", [&s](const httplib::Request&, httplib::Response& res) {
    const char* status = s.stopping ? "stopping" : s.ready ? "ok" : "loading";
    res.status = s.ready && !s.stopping ? 200 : 503;
    res.set_content(serve::dump(Json{{"status", status}}), "application/json");
  });
  s.http.Get("/metrics", [&s](const httplib::Request& req, httplib::Response& res) {
    if (!s.opt.api_key.empty() && !admit(s, req, res, "metrics")) return;
    models::EngineStats stats;
    if (s.ready) stats = s.engine->stats();
    res.set_content(s.metrics.text(s.ready ? &stats : nullptr, s.connections), "text/plain; version=0.0.4");
  });
  s.http.Get("/", [&s](const httplib::Request&, httplib::Response& res) {
    res.set_content(serve::chat_page(), "text/html; charset=utf-8");
    s.metrics.request("page", 200);
  });
  // Errors httplib answers itself (no route, a body past the limit) in the API's shape.
  s.http.set_error_handler([&s](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string what = res.status == 404   ? "no route " + req.method + " " + req.path
                             : res.status == 413 ? "the body is larger than this server's limit of " +
                                                       std::to_string(s.opt.max_body) + " bytes"
                                                 : "HTTP status " + std::to_string(res.status);
    res.set_content(error_of(res.status, what, res.status == 404 ? "not_found_error" : "invalid_request_error").body(),
                    "application/json");
    s.metrics.request("other", res.status);
  });
  s.http.set_exception_handler([&s](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    res.status = 500;
    res.set_content(error_of(500, what, "server_error").body(), "application/json");
    s.metrics.request("other", 500);
  });
}

ServeOptions parse_options(int argc, char** argv) {
  ServeOptions o;
  o.engine.max_running = 16;
  if (const char* key = std::getenv("WICK_API_KEY")) o.api_key = key;
  for (Options a("serve", argc, argv); a.next();) {
    if (a.is("--model"))
      o.model_path = a.value();
    else if (a.is("--shape"))
      o.shape = a.value();
    else if (a.is("--qtype"))
      o.qtype = a.qtype_value();
    else if (a.is("--host"))
      o.host = a.value();
    else if (a.is("--port")) {
      const int64_t p = a.int_value();
      if (p < 0 || p > 65535) a.fail("must be in [0, 65535]");
      o.port = static_cast<int>(p);
    } else if (a.is("--api-key"))
      o.api_key = a.value();
    else if (a.is("--alias"))
      o.alias = a.value();
    else if (a.is("--chat-template"))
      o.chat_template_file = a.value();
    else if (a.is("--device"))
      o.device = a.device_value();
    else if (a.is("--devices"))
      o.devices = a.device_list_value();
    else if (a.is("--dtype"))
      o.dtype = a.dtype_value();
    else if (a.is("--kv-memory"))
      o.engine.kv_memory = a.int_value() << 20;
    else if (a.is("--kv-type")) {
      if (!models::parse_kv_type(a.value(), o.engine.kv_type)) a.fail("must be model or q8_0");
    } else if (a.is("--parallel"))
      o.engine.max_running = a.int_value();
    else if (a.is("--step-tokens"))
      o.engine.step_tokens = a.int_value();
    else if (a.is("--ctx"))
      o.ctx = a.int_value();
    else if (a.is("--max-tokens"))
      o.max_tokens = a.int_value();
    else if (a.is("--max-queue"))
      o.max_queue = a.int_value();
    else if (a.is("--max-body"))
      o.max_body = a.int_value();
    else if (a.is("--threads"))
      o.threads = a.int_value();
    else if (a.is("--max-connections"))
      o.max_connections = a.int_value();
    else if (a.is("--grace"))
      o.grace = a.float_value();
    else if (a.is("--deterministic"))
      o.engine.deterministic = true;
    else if (a.is("--no-prefix-cache"))
      o.engine.prefix_cache = false;
    else
      a.unknown();
  }
  if (o.engine.max_running < 1) throw std::runtime_error("serve: --parallel must be at least 1");
  if (!o.model_path.empty() && !o.shape.empty())
    throw std::runtime_error("serve: --model and --shape exclude each other");
  if (o.ctx < 0 || o.max_tokens < 0 || o.max_queue < 0 || o.threads < 0 || o.max_connections < 0 || o.max_body < 1 ||
      !(o.grace >= 0))
    throw std::runtime_error(
        "serve: --ctx, --max-tokens, --max-queue, --threads, --max-connections and --grace must not be negative, "
        "--max-body positive");
  if (o.max_queue == 0) o.max_queue = 4 * o.engine.max_running;
  if (o.threads == 0) o.threads = o.engine.max_running + o.max_queue + 8;
  if (o.max_connections == 0) o.max_connections = 2 * o.threads;
  return o;
}

// Loads the model and its engine; the chat template, or why there is none.
void load(Server& s) {
  const ServeOptions& o = s.opt;
  std::string path;
  std::optional<models::ModelFile> file;
  s.model = engine_model(o.model_path, o.shape, o.qtype, o.devices.empty() ? std::vector<Device>{o.device} : o.devices,
                         o.dtype, path, &file);
  s.engine = std::make_unique<models::Engine>(s.model, o.engine);
  try {
    if (!o.chat_template_file.empty()) {
      std::ifstream in(o.chat_template_file, std::ios::binary);
      if (!in) throw std::runtime_error("cannot read " + o.chat_template_file);
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      s.chat = models::ChatTemplate::with_tokenizer(text, s.model->tokenizer(), o.chat_template_file);
    } else if (file) {
      s.chat = models::ChatTemplate::of(*file);
      if (!s.chat) s.served.chat_error = path + " has no chat template (start wick serve with --chat-template FILE)";
    } else {
      s.served.chat_error = "random weights of the shape " + path + " have no tokenizer";
    }
  } catch (const std::exception& e) {
    s.served.chat_error = e.what();
  }
  if (s.chat && s.model->tokenizer() == nullptr) {
    s.chat.reset();
    s.served.chat_error = path + " has no tokenizer for the chat template's text";
  }
  if (!s.served.chat_error.empty())
    std::fprintf(stderr, "serve: chat requests refused: %s\n", s.served.chat_error.c_str());
  s.served.id = !o.alias.empty() ? o.alias : file ? std::filesystem::path(path).filename().string() : o.shape;
  s.served.tokenizer = s.model->tokenizer();
  s.served.chat = s.chat ? &*s.chat : nullptr;
  s.served.vocab = s.model->vocab();
  s.served.context = o.ctx > 0 ? std::min(o.ctx, s.model->context()) : s.model->context();
  s.served.max_tokens = o.max_tokens > 0 ? std::min(o.max_tokens, s.served.context) : s.served.context;
}

}  // namespace

int cmd_serve(int argc, char** argv) {
  Server s;
  s.opt = parse_options(argc, argv);
  // SIGINT and SIGTERM set a flag that a thread below watches: a handler, not a blocked mask and
  // sigwait, because threads made before this point (a GPU runtime's) would not have the mask.
  struct sigaction on_stop {};
  on_stop.sa_handler = [](int sig) { g_stop_signal = sig; };
  sigemptyset(&on_stop.sa_mask);
  on_stop.sa_flags = SA_RESTART;
  sigaction(SIGINT, &on_stop, nullptr);
  sigaction(SIGTERM, &on_stop, nullptr);
  // A client gone mid-write must not end the process.
  signal(SIGPIPE, SIG_IGN);

  s.http.new_task_queue = [&s] {
    return new serve::ConnectionPool(static_cast<size_t>(s.opt.threads), static_cast<size_t>(s.opt.max_connections),
                                     s.stopping, s.connections);
  };
  s.http.set_payload_max_length(static_cast<size_t>(s.opt.max_body));
  s.http.set_read_timeout(30, 0);
  s.http.set_write_timeout(10, 0);
  routes(s);
  int port = s.opt.port;
  const bool bound =
      port == 0 ? (port = s.http.bind_to_any_port(s.opt.host)) > 0 : s.http.bind_to_port(s.opt.host, port);
  if (!bound) throw std::runtime_error("serve: cannot listen on " + s.opt.host + ":" + std::to_string(s.opt.port));
  std::fprintf(stderr, "serve: listening on http://%s:%d (loading the model)\n", s.opt.host.c_str(), port);
  std::thread listener([&s] {
    s.http.listen_after_bind();
    s.listening_ended = true;
  });

  // Stops on a signal: no new requests, those running get `grace` seconds, then are cancelled.
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done) {
      const int sig = g_stop_signal;
      if (sig == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      std::fprintf(stderr, "serve: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
      s.stopping = true;
      const Clock::time_point until =
          Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s.opt.grace));
      while (Clock::now() < until) {
        {
          std::lock_guard lock(s.mu);
          if (s.active.empty()) break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (s.engine) {
        std::set<int64_t> left;
        {
          std::lock_guard lock(s.mu);
          left = s.active;
        }
        for (int64_t id : left) s.engine->cancel(id);
      }
      s.stop_http();
      return;
    }
  });

  int status = 0;
  try {
    load(s);
    s.ready = true;
    std::fprintf(stderr, "serve: ready: %s on %s, %lld positions a request, %lld requests at once; http://%s:%d/\n",
                 s.served.id.c_str(), s.model->device().to_string().c_str(), static_cast<long long>(s.served.context),
                 static_cast<long long>(s.opt.engine.max_running), s.opt.host.c_str(), port);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wick: serve: %s\n", e.what());
    status = 1;
    s.stopping = true;
    s.stop_http();
  }
  listener.join();
  done = true;
  watcher.join();
  s.engine.reset();
  std::fprintf(stderr, "serve: stopped\n");
  return status;
}

}  // namespace wick::cli
