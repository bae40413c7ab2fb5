#pragma once

// The console's views: what `status`, `workers` and `metrics` show, built from the controller's
// state as JSON. They only read; the commands that change the run are in controller_console.cpp.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

#include "actors/controller_state.hpp"

namespace asyncrl {

/// Each rollouter: where it runs, its state and weight version as it last reported them, and the
/// prompts it holds.
nlohmann::ordered_json console_rollouters_view(const controller_state& st);

/// The run, the trainer, the rollouters, the synchronizer, the reward, the queue, staleness and
/// the prompt accounting. `q` and `rc` are the queue's and the reward's answers, or null if they
/// did not answer (their sections are then left out or shown as -1).
nlohmann::ordered_json console_status_view(const controller_state& st, const queue_stats* q,
                                           const reward_counts* rc);

/// The rollouters, the reward's worker slots with their calls in flight, and the reward's counts.
nlohmann::ordered_json console_workers_view(const controller_state& st, const reward_counts& rc,
                                            const std::vector<int64_t>& load);

/// The last `n` lines of metrics.jsonl, oldest first.
nlohmann::ordered_json console_metrics_view(const controller_state& st, int64_t n);

}  // namespace asyncrl
