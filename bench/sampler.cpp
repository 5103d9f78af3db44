// The host's sampler (models::Sampler) on a vocabulary of Llama 3's size (128256) with random
// logits: milliseconds per token for the settings people run. A decode step on a GPU takes a few
// ms, so the sampler's own time shows next to it.
//   bench_sampler [tokens]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "wick/models/generate.h"

int main(int argc, char** argv) {
  const int tokens = argc > 1 ? std::atoi(argv[1]) : 50;
  std::mt19937 gen(1);
  std::normal_distribution<float> dist(0.f, 3.f);
  std::vector<float> logits(128256);
  for (float& v : logits) v = dist(gen);
  struct Setting {
    const char* name;
    double temperature;
    int64_t top_k;
    double top_p;
    double min_p;
  };
  const Setting settings[] = {{"greedy", 0, 0, 1, 0},
                              {"temperature 0.8, top_k 40, top_p 0.95", 0.8, 40, 0.95, 0},
                              {"temperature 0.8, top_p 0.95", 0.8, 0, 0.95, 0},
                              {"temperature 0.8, min_p 0.05", 0.8, 0, 1, 0.05},
                              {"temperature 0.8 (every token kept)", 0.8, 0, 1, 0}};
  for (const Setting& s : settings) {
    wick::models::SamplingOptions o;
    o.temperature = s.temperature;
    o.top_k = s.top_k;
    o.top_p = s.top_p;
    o.min_p = s.min_p;
    wick::models::Sampler sampler(o);
    sampler.sample(logits, {});  // warm-up
    const auto start = std::chrono::steady_clock::now();
    int64_t sum = 0;  // of the ids, so that the calls are not optimised away
    for (int i = 0; i < tokens; ++i) sum += sampler.sample(logits, {});
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("%-40s %8.3f ms per token (ids sum to %lld)\n", s.name, ms / tokens, static_cast<long long>(sum));
  }
}
