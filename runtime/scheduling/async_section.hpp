#pragma once

// The async_training section: the scheduling mode, the staleness bounds, and the deadlines
// of syncs. Each table lists
// the names in the order `asyncrl config --describe` shows them; the config parses them
// (runtime/config/modes.hpp includes this file).

#include <cstdint>

#include "runtime/common/enum_names.hpp"

namespace asyncrl {

/// rollout.chunk_tokens' default: decode steps between a rollouter's control-message checks
/// (the rollouter's parameters and the simulator take it from here).
inline constexpr int64_t kDefaultChunkTokens = 4;

/// async_training.mode: how generation and training are scheduled.
enum class async_mode {
  sync,         // generate the whole batch, then train on it
  periodic,     // train on groups as they arrive, one update per batch
  fully_async,  // streaming with a staleness bound
};
inline constexpr enum_name<async_mode> async_mode_names[] = {
    {async_mode::sync, "sync"},
    {async_mode::periodic, "periodic"},
    {async_mode::fully_async, "fully_async"}};
constexpr const auto& enum_names(async_mode) {
  return async_mode_names;
}

/// async_training.stale_policy: how eta is kept (docs/algorithms.md §14).
enum class stale_action {
  drop,        // a group over eta at delivery is counted and discarded
  regenerate,  // discarded, and its prompt is generated again
  wait,        // the trainer waits for running groups at their last chance: none is over eta
};
inline constexpr enum_name<stale_action> stale_action_names[] = {
    {stale_action::drop, "drop"},
    {stale_action::regenerate, "regenerate"},
    {stale_action::wait, "wait"}};
constexpr const auto& enum_names(stale_action) {
  return stale_action_names;
}

/// Scheduling of generation and training (docs/algorithms.md §12-§14).
struct async_section {
  async_mode mode = async_mode::periodic;
  bool colocate = true;                     // sync: both phases use every core, in turn
  double staleness_threshold = 0.0;         // s
  int64_t trigger_parameter_sync_step = 1;  // k
  int64_t require_batches = 1;
  bool partial_rollout = false;
  int64_t max_staleness = -1;  // eta; -1 = off
  // How eta is kept. wait: no finished group is dropped, so none is lost and long responses are
  // not trained less often than short ones (docs/benchmarks.md: the bias and the throughput).
  stale_action stale_policy = stale_action::wait;
  int64_t queue_capacity = 0;         // groups admitted and not yet trained; 0 = automatic
  int64_t sync_timeout_ms = 120000;   // watchdog of one weight sync
  int64_t drain_timeout_ms = 600000;  // bound of a pause that drains (no partial rollout)
  int64_t sync_retries = 3;  // a weight sync that failed (deadline, lost message) is retried
};

/// Whether generation and training take turns on the same devices (colocate applies to sync
/// mode only).
inline bool is_colocated(const async_section& a) {
  return a.mode == async_mode::sync && a.colocate;
}

}  // namespace asyncrl
