// The steady-clock timer of backends that run ops synchronously on the host (CPU, reference).
#include <chrono>

#include "backend/backend.h"
#include "cpu/cpu_backend.h"

namespace wick {

namespace {

class HostTimer final : public Timer {
 public:
  explicit HostTimer(Backend& backend) : backend_(backend) {}
  void start() override {
    backend_.synchronize();
    start_ = Clock::now();
  }
  void stop() override {
    backend_.synchronize();
    stop_ = Clock::now();
  }
  double elapsed_ms() override { return std::chrono::duration<double, std::milli>(stop_ - start_).count(); }

 private:
  using Clock = std::chrono::steady_clock;
  Backend& backend_;
  Clock::time_point start_{}, stop_{};
};

}  // namespace

std::unique_ptr<Timer> make_host_timer(Backend& backend) { return std::make_unique<HostTimer>(backend); }

std::unique_ptr<Timer> cpu::CpuBackend::make_timer() { return make_host_timer(*this); }

}  // namespace wick
