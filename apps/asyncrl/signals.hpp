#pragma once

// SIGINT/SIGTERM during `asyncrl train`: the handler only counts signals; a watcher thread
// turns each new one into a call (an interrupt message to the controller), because nothing
// but an atomic store is safe inside a signal handler. A third signal exits at once.

#include <atomic>
#include <functional>
#include <thread>

namespace asyncrl {

class interrupt_watch {
 public:
  /// Installs the handlers; `on_signal(n)` runs on the watcher thread for the n-th signal.
  explicit interrupt_watch(std::function<void(int)> on_signal);
  /// Restores the previous handlers and stops the watcher.
  ~interrupt_watch();
  interrupt_watch(const interrupt_watch&) = delete;
  interrupt_watch& operator=(const interrupt_watch&) = delete;

  /// Signals received so far.
  static int count();
  /// The last signal's number (SIGINT or SIGTERM), 0 if none.
  static int last_signal();

 private:
  std::function<void(int)> on_signal_;
  std::atomic<bool> stop_{false};
  std::thread watcher_;
};

}  // namespace asyncrl
