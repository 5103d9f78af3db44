// The state of a backend's Philox generator (kernels/philox.h): a seed and the number of the next
// stream. Each rand_* call draws (seed, stream) and the counter moves on, so that one seed gives
// the same numbers on every backend, call by call; set_seed starts the count again.
#pragma once

#include <cstdint>
#include <mutex>

namespace wick {

class RandomStreams {
 public:
  static constexpr uint64_t kDefaultSeed = 0x5eed5eed5eed5eedull;

  struct Draw {
    uint64_t seed;
    uint64_t stream;
  };

  Draw next() {
    std::lock_guard<std::mutex> lock(mutex_);
    return {seed_, stream_++};
  }
  void reset(uint64_t seed) {
    std::lock_guard<std::mutex> lock(mutex_);
    seed_ = seed;
    stream_ = 0;
  }

 private:
  std::mutex mutex_;
  uint64_t seed_ = kDefaultSeed;
  uint64_t stream_ = 0;
};

}  // namespace wick
