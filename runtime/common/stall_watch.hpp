#pragma once

// The progress watchdog's rule (runtime.progress_timeout_s), apart from the actor that arms its
// ticks: a tick comes every quarter of the timeout, and the run has stalled once four ticks in
// a row saw no new optimizer step while the run was not paused (a paused run expects none).
// Plain data on the caller's clock, so that the controller's watchdog stays deterministic under
// CAF's test coordinator and the rule has a unit test of its own.

#include <chrono>
#include <cstdint>

namespace asyncrl {

class stall_watch {
 public:
  static constexpr int ticks_to_stall = 4;

  explicit stall_watch(double timeout_s = 0) : timeout_s_(timeout_s) {}

  /// A new timeout (<= 0: off). Returns true if the watch was off before, so that the caller
  /// arms its ticks again.
  bool set_timeout(double s);
  double timeout_s() const { return timeout_s_; }
  bool enabled() const { return timeout_s_ > 0; }
  /// The period of the ticks: a quarter of the timeout, at least 1 ms.
  std::chrono::milliseconds tick() const;

  /// Optimizer step `step` completed (or a resumed run starts after it).
  void step_done(int64_t step) { last_step_ = step; }
  int64_t last_step() const { return last_step_; }

  /// One tick. Returns true when the run has stalled.
  bool on_tick(bool paused);

 private:
  double timeout_s_ = 0;
  int64_t last_step_ = 0;
  int64_t seen_step_ = -1;  // the step the last tick saw
  int quiet_ticks_ = 0;     // ticks in a row without a new step
};

}  // namespace asyncrl
