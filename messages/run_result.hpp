#pragma once

// What a whole training run reports back to its caller.

#include <caf/meta/type_name.hpp>

#include <string>
#include <vector>

#include "messages/payloads.hpp"
#include "messages/weights.hpp"
#include "runtime/common/enum_names.hpp"

namespace asyncrl {

/// How a run ended; summary.json's `status`.
enum class run_status { completed, failed, interrupted, stopped };  // stopped: the console
inline constexpr enum_name<run_status> run_status_names[] = {
    {run_status::completed, "completed"},
    {run_status::failed, "failed"},
    {run_status::interrupted, "interrupted"},
    {run_status::stopped, "stopped"}};
constexpr const auto& enum_names(run_status) {
  return run_status_names;
}

struct run_result {
  bool ok = true;
  run_status status = run_status::completed;
  std::string error;
  int64_t resumed_from_step = 0;  // 0 = a fresh run
  int64_t checkpoints = 0;        // written by this process
  std::string checkpoint;         // the newest one on disk, if any
  int64_t checkpoint_step = 0;    // the step it continues from
  int64_t rollouter_restarts = 0;
  int64_t sync_retries = 0;
  int64_t remote_rollouters_joined = 0;  // rollouters of `asyncrl worker` processes
  int64_t remote_rollouters_lost = 0;    // ... that died or were cut off (work regenerated)
  bool restartable = false;  // the trainer crashed and supervision.trainer_failure=restart
  int64_t steps = 0;
  int64_t groups_generated = 0;
  int64_t groups_trained = 0;
  int64_t groups_dropped = 0;  // stale at delivery + filtered (no signal)
  int64_t groups_in_flight = 0;
  int64_t groups_filtered = 0;
  int64_t tokens_generated = 0;
  int64_t tokens_trained = 0;
  int64_t syncs = 0;
  double wall_time_s = 0;
  double train_time_s = 0;  // from the first prompt to the last step
  std::vector<rollout_counts> rollouters;
  reward_counts reward;
  queue_stats queue;
  trainer_counts trainer;
  // Faults injected in this process, over every in-process restart (summary.json's "faults").
  // The controller counts its own (rollouter kills, damaged checkpoints, the trainer's crash)
  // and a crashed rollouter's as they happen, and adds the live roles' parts (reward.faults,
  // rollouters[i].faults) at the end (add_role_faults); the train command adds the skipped
  // checkpoints and sums its restarts' results. A checkpoint does not carry them: a resumed
  // process counts its own.
  fault_counts faults;
  weight_snapshot final_weights;
};

/// Adds the parts of run_result::faults the roles reported with their final counts (the Reward's
/// and each live rollouter's) to the run's total. The controller calls it once, as the run ends.
inline void add_role_faults(run_result& r) {
  r.faults += r.reward.faults;
  for (const auto& c : r.rollouters)
    r.faults += c.faults;
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, run_result& x) {
  return f(caf::meta::type_name("run_result"), x.ok, x.status, x.error, x.resumed_from_step,
           x.checkpoints, x.checkpoint, x.checkpoint_step, x.rollouter_restarts, x.sync_retries,
           x.remote_rollouters_joined, x.remote_rollouters_lost, x.restartable, x.steps,
           x.groups_generated, x.groups_trained, x.groups_dropped, x.groups_in_flight,
           x.groups_filtered, x.tokens_generated, x.tokens_trained, x.syncs, x.wall_time_s,
           x.train_time_s, x.rollouters, x.reward, x.queue, x.trainer, x.faults, x.final_weights);
}

}  // namespace asyncrl
