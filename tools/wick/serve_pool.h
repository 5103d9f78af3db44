// `wick serve`'s HTTP threads: a fixed number of workers answer connections, and at most
// `max_connections` are open at once (being answered or waiting for a worker).
#pragma once

#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace wick::serve {

// httplib's accept loop hands each connection to enqueue(). Once `max_connections` are open,
// enqueue() waits for one to close: the loop stops accepting, and new connections wait in the
// kernel's listen backlog (then are refused by it) instead of holding a descriptor and memory here
// each. While `stopping` is set nothing waits, so that a stop ends the loop at once.
class ConnectionPool final : public httplib::TaskQueue {
 public:
  // `open` counts the connections being answered or waiting (for /metrics).
  ConnectionPool(size_t threads, size_t max_connections, const std::atomic<bool>& stopping, std::atomic<int64_t>& open);
  ~ConnectionPool() override;
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  void enqueue(std::function<void()> fn) override;
  // Ends the workers once every connection handed over has been answered.
  void shutdown() override;

 private:
  void work();

  const size_t max_connections_;
  const std::atomic<bool>& stopping_;
  std::atomic<int64_t>& open_;
  std::mutex mu_;
  std::condition_variable work_, room_;
  std::deque<std::function<void()>> waiting_;
  bool shutdown_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace wick::serve
