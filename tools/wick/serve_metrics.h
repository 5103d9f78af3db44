// `wick serve`'s /metrics: the engine's counters and the server's own (requests by endpoint and
// status, time to first token and between tokens as histograms) in Prometheus' text format.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "wick/models/engine.h"

namespace wick::serve {

class Metrics {
 public:
  // A request answered: its endpoint ("chat", "completions", "models", ...) and HTTP status.
  void request(const std::string& endpoint, int status);
  // A request's first token `seconds` after it arrived, and a gap between two of its tokens.
  void first_token(double seconds);
  void between_tokens(double seconds);
  // The text of /metrics, with the engine's counters as they are now (none before it exists) and
  // the HTTP connections open (being answered or waiting for a thread).
  std::string text(const models::EngineStats* engine, int64_t connections) const;

 private:
  // Upper bounds of the histograms' buckets, in seconds (+Inf last).
  static constexpr std::array<double, 14> kBounds = {0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25,
                                                     0.5,   1,    2.5,   5,    10,    30,  60};
  struct Histogram {
    std::array<int64_t, kBounds.size() + 1> counts{};
    double sum = 0;
    int64_t count = 0;
    void add(double x);
  };
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> requests_;
  Histogram first_token_, between_tokens_;
};

}  // namespace wick::serve
