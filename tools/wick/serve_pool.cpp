#include "serve_pool.h"

#include <chrono>
#include <utility>

namespace wick::serve {

ConnectionPool::ConnectionPool(size_t threads, size_t max_connections, const std::atomic<bool>& stopping,
                               std::atomic<int64_t>& open)
    : max_connections_(max_connections), stopping_(stopping), open_(open) {
  workers_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

ConnectionPool::~ConnectionPool() { shutdown(); }

void ConnectionPool::enqueue(std::function<void()> fn) {
  std::unique_lock lock(mu_);
  // A stop does not notify this pool: look at the flag now and then.
  while (static_cast<size_t>(open_.load()) >= max_connections_ && !stopping_)
    room_.wait_for(lock, std::chrono::milliseconds(100));
  ++open_;
  waiting_.push_back(std::move(fn));
  work_.notify_one();
}

void ConnectionPool::shutdown() {
  {
    std::lock_guard lock(mu_);
    if (shutdown_ && workers_.empty()) return;
    shutdown_ = true;
  }
  work_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

void ConnectionPool::work() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock lock(mu_);
      work_.wait(lock, [this] { return shutdown_ || !waiting_.empty(); });
      if (waiting_.empty()) return;
      fn = std::move(waiting_.front());
      waiting_.pop_front();
    }
    fn();  // answers the connection and closes it
    {
      std::lock_guard lock(mu_);
      --open_;
    }
    room_.notify_one();
  }
}

}  // namespace wick::serve
