#pragma once

// The simulator's bookkeeping of trained groups: per-step counters and the run's summary.

#include <cstdint>
#include <vector>

#include "runtime/scheduling/simulator.hpp"

namespace asyncrl {

/// One generated response as the trainer sees it: the policy versions of its first and last
/// tokens, its length, and how often a sync interrupted it.
struct sim_sample {
  int64_t first_version = 0, last_version = 0;
  int32_t tokens = 0, interruptions = 0;
};

/// Adds a group trained at policy `version` to the step's counters (tokens, samples,
/// staleness, partial rollouts).
void account_group(sim_step& step, const std::vector<sim_sample>& samples, int64_t version);

/// The run's summary from its steps, ended at `end_ms`: mean step time and throughput after
/// `warmup_steps`, and the idle ratios of trainer and rollout devices. The group, sync and
/// interruption counts are left for the caller.
sim_result summarize_steps(std::vector<sim_step> steps, double end_ms, int64_t warmup_steps,
                           double rollout_busy_ms, int64_t rollout_devices);

}  // namespace asyncrl
