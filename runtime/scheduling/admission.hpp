#pragma once

// Admission control for rollouts: how many new groups the rollouters may start now. Pure logic
// (no CAF, no torch), shared by the MessageQueue actor and the simulator, so both enforce
// exactly the same rules:
// - verl's staleness budget (docs/algorithms.md §13): between two weight syncs at most
//   (1 + s) * k * R new groups, minus the groups carried over (in flight + queued) at the sync;
// - AReaL's capacity (docs/algorithms.md §14): running + accepted <= (eta + v + 1) * B when eta >= 0;
// - the queue bound: running + queued <= capacity, so nothing is ever evicted.

#include <cstdint>
#include <string>

namespace asyncrl {

struct admission_params {
  int64_t window = 1;                // k * R groups consumed between two syncs
  double staleness_threshold = 0.0;  // s
  int64_t consumer_batch = 1;        // B of AReaL: groups per optimizer step
  int64_t max_staleness = -1;        // eta; -1 = off
  int64_t capacity = 1;              // running + queued never exceeds this
};

/// Counters in groups. "running" = admitted, not yet in the queue (generating, partial, or
/// being scored); "queued" = in the queue, not yet delivered.
class admission_control {
 public:
  explicit admission_control(admission_params p);

  /// Grants up to `want` new groups and counts them as running.
  int64_t grant(int64_t want);
  /// Why the last grant() gave less than asked: "window", "eta", "capacity" or "".
  const std::string& last_limit() const { return last_limit_; }

  /// A running group finished generation and scoring and entered the queue.
  void on_put();
  /// A running group will never reach the queue (its rollouter stopped before finishing).
  void on_abandoned();
  /// A queued group went to the trainer.
  void on_delivered();
  /// A queued group was dropped as too stale; it no longer counts as accepted.
  void on_dropped();
  /// The trainer's policy version (AReaL's v).
  void on_trainer_version(int64_t v);
  /// New weights reached the rollouters: a new verl window starts, charged with the groups
  /// carried over (running + queued).
  void on_sync();

  int64_t running() const { return running_; }
  int64_t queued() const { return queued_; }
  int64_t accepted() const { return accepted_; }
  int64_t admitted_in_window() const { return window_admitted_; }
  /// This window's verl budget: floor((1 + s) * k * R) - carried (at least 0).
  int64_t window_budget() const;
  int64_t carried() const { return carried_; }
  const admission_params& params() const { return p_; }

 private:
  admission_params p_;
  int64_t running_ = 0, queued_ = 0, accepted_ = 0;
  int64_t window_admitted_ = 0, carried_ = 0;
  int64_t trainer_version_ = 0;
  std::string last_limit_;
};

}  // namespace asyncrl
