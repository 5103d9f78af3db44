// Prometheus text for `wick serve` (tools/wick/serve_metrics.h).
#include "serve_metrics.h"

#include <cstdio>
#include <sstream>

namespace wick::serve {

void Metrics::Histogram::add(double x) {
  size_t i = 0;
  while (i < kBounds.size() && x > kBounds[i]) ++i;
  ++counts[i];
  sum += x;
  ++count;
}

void Metrics::request(const std::string& endpoint, int status) {
  std::lock_guard lock(mu_);
  ++requests_[{endpoint, status}];
}

void Metrics::first_token(double seconds) {
  std::lock_guard lock(mu_);
  first_token_.add(seconds);
}

void Metrics::between_tokens(double seconds) {
  std::lock_guard lock(mu_);
  between_tokens_.add(seconds);
}

namespace {

void metric(std::ostringstream& out, const char* name, const char* type, const char* help, double value) {
  out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n" << name << " " << value << "\n";
}

std::string bound(double b) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", b);
  return text;
}

}  // namespace

std::string Metrics::text(const models::EngineStats* e, int64_t connections) const {
  std::ostringstream out;
  metric(out, "wick_http_connections", "gauge", "HTTP connections being answered or waiting for a thread.",
         static_cast<double>(connections));
  if (e != nullptr) {
    metric(out, "wick_requests_running", "gauge", "Requests in the running batch.", static_cast<double>(e->running));
    metric(out, "wick_requests_waiting", "gauge", "Requests waiting for a place in the batch.",
           static_cast<double>(e->waiting));
    metric(out, "wick_kv_blocks_used", "gauge", "KV-cache blocks held by sequences.",
           static_cast<double>(e->blocks_used));
    metric(out, "wick_kv_blocks_cached", "gauge", "KV-cache blocks kept only by the prefix cache.",
           static_cast<double>(e->blocks_cached));
    metric(out, "wick_kv_blocks_free", "gauge", "KV-cache blocks free.", static_cast<double>(e->blocks_free));
    metric(out, "wick_kv_blocks", "gauge", "KV-cache blocks in the pool.", static_cast<double>(e->blocks));
    metric(out, "wick_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.",
           static_cast<double>(e->prompt_tokens));
    metric(out, "wick_prefix_cache_hit_tokens_total", "counter", "Prompt tokens found in the prefix cache.",
           static_cast<double>(e->prefix_hit_tokens));
    metric(out, "wick_generated_tokens_total", "counter", "Tokens generated.",
           static_cast<double>(e->generated_tokens));
    metric(out, "wick_computed_tokens_total", "counter", "Tokens run through the model (recomputations included).",
           static_cast<double>(e->computed_tokens));
    metric(out, "wick_engine_steps_total", "counter", "Steps of the engine.", static_cast<double>(e->steps));
    metric(out, "wick_preemptions_total", "counter", "Sequences preempted when the pool ran out.",
           static_cast<double>(e->preemptions));
    metric(out, "wick_requests_finished_total", "counter", "Requests the engine finished.",
           static_cast<double>(e->finished));
  }
  std::lock_guard lock(mu_);
  out << "# HELP wick_http_requests_total HTTP requests answered, by endpoint and status.\n"
      << "# TYPE wick_http_requests_total counter\n";
  for (const auto& [key, n] : requests_)
    out << "wick_http_requests_total{endpoint=\"" << key.first << "\",status=\"" << key.second << "\"} " << n << "\n";
  const auto histogram = [&](const char* name, const char* help, const Histogram& h) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
    int64_t cumulative = 0;
    for (size_t i = 0; i < kBounds.size(); ++i) {
      cumulative += h.counts[i];
      out << name << "_bucket{le=\"" << bound(kBounds[i]) << "\"} " << cumulative << "\n";
    }
    out << name << "_bucket{le=\"+Inf\"} " << h.count << "\n"
        << name << "_sum " << h.sum << "\n"
        << name << "_count " << h.count << "\n";
  };
  histogram("wick_time_to_first_token_seconds", "From a request's arrival to its first token.", first_token_);
  histogram("wick_time_between_tokens_seconds", "Between two tokens of a request.", between_tokens_);
  return out.str();
}

}  // namespace wick::serve
