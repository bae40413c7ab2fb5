#pragma once

// Erlang-style restart intensity: a supervisor may restart a crashed child, but more than
// `max_restarts` restarts within `window` means the fault is not transient, and the run fails
// instead of restarting forever. Shared by the Reward (its workers) and the controller (its
// rollouters). Times come from the caller's clock (an actor's clock, so that tests under CAF's
// test coordinator control them).

#include <chrono>
#include <cstdint>
#include <deque>

namespace asyncrl {

class restart_budget {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  restart_budget(int64_t max_restarts, double window_s);

  /// Records a restart at `now`. False when the restarts within the window (this one and
  /// those at most `window` before it) exceed max_restarts: the caller gives up.
  bool spend(time_point now);

  /// Restarts counted in the window as of the last spend.
  int64_t in_window() const { return static_cast<int64_t>(times_.size()); }
  int64_t max_restarts() const { return max_restarts_; }
  double window_s() const { return window_s_; }

 private:
  int64_t max_restarts_;
  double window_s_;
  std::deque<time_point> times_;
};

}  // namespace asyncrl
