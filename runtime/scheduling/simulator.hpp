#pragma once

// A discrete-event model of the actor runtime with modelled costs. It runs the same rules as
// the actors: admission credits from `admission_control` (verl's window, AReaL's eta, the queue
// bound), the mode arithmetic from `schedule_plan`, the trainer's pulls (whole batch in sync,
// streaming otherwise), syncs every steps_per_sync steps with pause -> load -> resume, partial
// rollout (interrupt at a decode-step boundary, re-prefill on resume) or drain, and staleness
// drops at delivery. Response lengths come from `workload_length`, as in the real rollouter.
// Torch-free and CAF-free, so it runs thousands of devices in seconds.

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/scheduling/async_section.hpp"
#include "runtime/scheduling/schedule.hpp"
#include "runtime/scheduling/sim_costs.hpp"
#include "runtime/scheduling/workload.hpp"

namespace asyncrl {

struct sim_params {
  schedule_plan plan;
  workload_section workload;  // lengths "model" are simulated as fixed at workload.median
  int64_t rollout_devices = 1;
  int64_t train_devices = 1;
  bool colocated = false;  // sync only: the same devices generate, then train
  int64_t slots = 128;     // KV-cache slots per rollout device
  int64_t prompt_tokens = 12;
  int64_t chunk_tokens = kDefaultChunkTokens;  // control messages are seen between chunks
  // The trainer's micro-batches pad every response to the longest in the micro-batch, so a
  // long tail costs padded tokens. 0: no padding (cost per generated token).
  int64_t micro_batch = 0;
  bool group_aligned = true;  // micro-batches never span groups (trainer.group_aligned_...)
  uint64_t seed = 1;
  int64_t warmup_steps = 2;          // excluded from the mean step time
  int32_t max_steps_per_event = 16;  // decode steps a device may advance in one event
  // Response lengths replayed in order instead of drawn: response k of group g gets
  // replay_lengths[(g * group_size + k) % size]. Empty: lengths come from `workload`. Set from
  // the calibration key "response_lengths" (e.g. the lengths a real run generated).
  std::vector<int32_t> replay_lengths;
  sim_costs costs;
};

struct sim_step {
  int64_t step = 0;
  double end_ms = 0;
  double step_ms = 0;
  double trainer_idle_ms = 0;
  int64_t tokens = 0;
  int64_t stale_samples = 0;
  int64_t staleness_max = 0;
  int64_t partial_samples = 0;
  int64_t max_partial_span = 0;
  int64_t samples = 0;
};

struct sim_result {
  std::vector<sim_step> steps;
  double total_ms = 0;
  double mean_step_ms = 0;  // after warmup_steps
  double trainer_idle_ratio = 0;
  double rollout_idle_ratio = 0;
  double tokens_per_s = 0;  // trained, after warm-up
  int64_t groups_generated = 0, groups_dropped = 0, syncs = 0, interruptions = 0;
  // Mean response length (tokens) of the groups that finished generation and of the groups
  // trained: a staleness drop that prefers long responses shows as len_trained < len_generated.
  double len_generated = 0, len_trained = 0;
  int64_t stale_waits = 0;  // stale_policy wait: times the trainer waited for an old group
  // Busy time of the trainer and of all rollout devices together, and the part of each that
  // started while the other phase was busy (and so ran at the contended cost), whole run.
  double trainer_busy_ms = 0, trainer_overlap_ms = 0;
  double rollout_busy_ms = 0, rollout_overlap_ms = 0;
};

/// Runs the model to plan.total_steps optimizer steps.
sim_result simulate(const sim_params& p);

/// Replaces the costs (and the prompt length, and the replayed response lengths when the file
/// has "response_lengths") with those measured by bench/bench_calibrate or bench/e2e.py in
/// the JSON file `path`. Its training speed-up for p.train_devices applies only when
/// p.costs.train_scaling is 0 (not set by hand). Throws std::runtime_error naming the file.
void load_calibration(const std::string& path, sim_params& p);

}  // namespace asyncrl
