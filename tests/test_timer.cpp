// Backend::make_timer, the clock of `wick bench`, on every backend present and the reference.
#include <chrono>
#include <cmath>
#include <gtest/gtest.h>
#include <vector>

#include "backend/registry.h"
#include "reference/reference.h"
#include "wick/wick.h"

namespace wick {
namespace {

std::vector<Backend*> backends() {
  std::vector<Backend*> out = {&reference::reference_backend()};
  for (Device d : available_devices()) out.push_back(&backend_for(d));
  return out;
}

// Real work: a 256x256 f32 product (33 MFLOP; 1.6 MFLOP on the reference).
StoragePtr work(Backend& b, const Layout& layout, const StoragePtr& x) {
  const View v{*x, layout, DType::F32};
  return b.matmul(v, v);
}

TEST(Timer, MeasuresTheWorkBetweenStartAndStop) {
  for (Backend* b : backends()) {
    SCOPED_TRACE(b->name());
    const int64_t n = b->name() == "reference" ? 64 : 256;
    const Layout layout(Shape{n, n});
    StoragePtr x = b->rand_uniform(layout.shape(), DType::F32, -1, 1);
    work(*b, layout, x);  // warm-up
    b->synchronize();
    std::unique_ptr<Timer> timer = b->make_timer();
    for (int round = 0; round < 2; ++round) {  // a timer may be started again
      const auto wall_start = std::chrono::steady_clock::now();
      timer->start();
      StoragePtr out = work(*b, layout, x);
      timer->stop();
      const double ms = timer->elapsed_ms();
      const double wall_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall_start).count();
      EXPECT_TRUE(std::isfinite(ms));
      EXPECT_GT(ms, 0);
      EXPECT_LE(ms, wall_ms + 1.0);  // the measured work happened within the host's interval
    }
  }
}

TEST(Timer, NothingBetweenStartAndStopTakesNoTimeToSpeakOf) {
  for (Backend* b : backends()) {
    SCOPED_TRACE(b->name());
    std::unique_ptr<Timer> timer = b->make_timer();
    const auto wall_start = std::chrono::steady_clock::now();
    timer->start();
    timer->stop();
    const double ms = timer->elapsed_ms();
    const double wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall_start).count();
    EXPECT_GE(ms, 0);
    EXPECT_LE(ms, wall_ms + 1.0);
  }
}

}  // namespace
}  // namespace wick
