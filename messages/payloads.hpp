#pragma once

// Message payloads exchanged by the actors. Plain data with an `inspect()` each, so every
// message can be serialized and any actor can later run on another node. Torch-free.

#include <caf/detail/stringification_inspector.hpp>
#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/none.hpp>
#include <caf/sec.hpp>

#include <type_traits>

#include <cstdint>
#include <string>
#include <vector>

#include "messages/float_bits.hpp"
#include "messages/role_states.hpp"
#include "runtime/task/prompt_loader.hpp"
#include "runtime/train/samples.hpp"
#include "runtime/train/update_stats.hpp"

namespace asyncrl {

// prompt_task (one prompt handed to a rollouter) is the data loader's:
// runtime/task/prompt_loader.hpp.

/// Faults injected (faults.*, the console's kill, hang and delay-sync), by kind: counted where
/// each fires, by the role that fires it. A role reports its part with its other counts; the
/// run's total is run_result::faults. Each counts events, so a fault that fires again (a hung
/// call re-sent after its worker died, a damaged checkpoint's step passed again after a
/// restart) counts again.
struct fault_counts {
  int64_t rollouter_kills = 0;       // the controller: kill_rollouter_every_steps
  int64_t reward_worker_kills = 0;   // the Reward: kill_reward_worker_every, console kills
  int64_t reward_throws = 0;         // the Reward: reward_throw_every
  int64_t reward_hangs = 0;          // the Reward: reward_hang_every, the console's hang
  int64_t sync_drops = 0;            // a rollouter: sync_drop_every
  int64_t sync_delays = 0;           // a rollouter: sync_delay_every, the console's delay-sync
  int64_t trainer_crashes = 0;       // the controller (the step report): crash_trainer_at_step
  int64_t checkpoints_damaged = 0;   // the controller: corrupt_checkpoint_at_step
  int64_t checkpoints_skipped = 0;   // the train command: damaged ones passed over at a (re)start
  int64_t trainer_rank_kills = 0;    // the train command: data-parallel ranks that died by SIGKILL
  int64_t env_faults = 0;            // a rollouter's environment pool: env_fault_every
  int64_t env_faults_recovered = 0;  // of those, calls whose replay succeeded (or were cut)

  fault_counts& operator+=(const fault_counts& o) {
    rollouter_kills += o.rollouter_kills;
    reward_worker_kills += o.reward_worker_kills;
    reward_throws += o.reward_throws;
    reward_hangs += o.reward_hangs;
    sync_drops += o.sync_drops;
    sync_delays += o.sync_delays;
    trainer_crashes += o.trainer_crashes;
    checkpoints_damaged += o.checkpoints_damaged;
    checkpoints_skipped += o.checkpoints_skipped;
    trainer_rank_kills += o.trainer_rank_kills;
    env_faults += o.env_faults;
    env_faults_recovered += o.env_faults_recovered;
    return *this;
  }
};

/// A rollouter's cumulative counters, pushed to the controller as they change.
struct rollout_progress {
  int32_t worker = 0;
  int64_t tokens_generated = 0;
  int64_t groups_completed = 0;
  double busy_ms = 0;  // time spent decoding or prefilling
  double idle_ms = 0;  // time with nothing to generate (no credit, paused, waiting)
  int64_t version = 0;
  rollouter_state state = rollouter_state::idle;
  std::vector<uint64_t> completed;  // group ids sent to the Reward since the last push
  // Its injected faults so far, pushed as each fires: a crashed incarnation never answers the
  // stop with its rollout_counts, and the controller keeps these instead.
  fault_counts faults;
};

/// The MessageQueue's counters (groups).
struct queue_stats {
  int64_t depth = 0;     // queued, waiting for the trainer
  int64_t running = 0;   // admitted, not yet queued
  int64_t received = 0;  // ever put
  int64_t delivered = 0;
  int64_t dropped_stale = 0;  // over eta at delivery (dropped or sent back)
  int64_t regenerated = 0;    // of those, prompts sent back for regeneration
  int64_t abandoned = 0;      // admitted but never finished (rollouter stopped)
  int64_t lost = 0;           // admitted to a rollouter that crashed: regenerated elsewhere
  int64_t restored = 0;       // put back from a checkpoint at resume
  int64_t refilled = 0;       // admitted beyond the window in place of filtered groups
  int64_t admitted_in_window = 0;
  int64_t window_budget = 0;
  int64_t carried = 0;
  int64_t capacity = 0;
  int64_t published_version = 0;
  int64_t max_delivered_staleness = 0;
  // Response tokens (every sample's) of the groups received and of those dropped as stale: the
  // mean length of generated against trained groups, i.e. the length bias of a drop.
  int64_t received_tokens = 0;
  int64_t dropped_tokens = 0;
  int64_t stale_waits = 0;  // stale_policy wait: pulls held for a group at its last chance
  // What the queue is waiting on right now (the progress watchdog reports it).
  int64_t credit_requests_waiting = 0;  // rollouters' requests held for admission budget
  int64_t pull_waiting_min = 0;         // groups the trainer's waiting pull needs; 0 = none
  int64_t pull_waiting_old = 0;  // ... of which it waits for being generated (stale_policy wait)
  std::string admission_limit;   // what held the last refused grant: window, eta, ...
  bool held = false;             // the console paused admission (pause / resume)
  // Per staleness window (index = syncs seen): groups granted in it, and groups carried into it
  // (running + queued when it opened). Raw counts, so that a test can check verl's budget
  // granted + carried <= floor((1 + s) k R) without trusting the admission arithmetic.
  std::vector<int64_t> window_granted;
  std::vector<int64_t> window_carried;
};

/// Groups for the trainer, with the queue's counters at delivery time.
struct delivery {
  std::vector<scored_group> groups;
  queue_stats stats;
};

/// What one weight sync did.
struct sync_report {
  int64_t version = 0;
  double time_ms = 0;
  int64_t bytes = 0;
  int32_t workers = 0;
  bool ok = true;
  bool superseded = false;  // replaced by a newer publish before it started; never loaded
  std::string error;
};

/// Per-step metrics from the trainer; the controller adds the run-wide fields.
struct step_report {
  int64_t step = 0;
  int64_t policy_version = 0;
  update_stats update;  // the optimizer step's own metrics (runtime/train/update_stats.hpp)
  double reward_mean = 0;
  double accuracy = 0;
  int64_t samples = 0;
  int64_t stale_samples = 0;
  double partial_ratio = 0;
  int64_t max_partial_span = 0;
  int64_t groups_trained = 0;
  int64_t filtered_groups = 0;
  // algorithm.refill: groups asked for in place of this step's filtered ones, and whether
  // algorithm.max_refill_rounds ran out before the step had its groups with a signal.
  int64_t refilled_groups = 0;
  bool refill_exhausted = false;
  int64_t reward_failures = 0;
  double step_ms = 0;          // since the previous step ended
  double trainer_idle_ms = 0;  // of that, waiting for samples
  // When the step's first and last groups reached the trainer, ms after the step began: the
  // start-up latency and (step_ms - last_group_ms) the training left after the last group.
  // -1: no group arrived during the step (it trained groups held from before).
  double first_group_ms = -1;
  double last_group_ms = -1;
  // When the step's first forward/backward started, ms after the step began: how long the
  // trainer had to wait before it could compute. -1: the step trained nothing.
  double first_train_ms = -1;
  double sync_time_ms = 0;  // the last completed weight sync
  int64_t sync_bytes = 0;
  double params_checksum = 0;
  queue_stats queue;
  int64_t prox_version = 0;         // weights of the old/proximal model in this step
  int64_t out_of_order_groups = 0;  // consumed after a group with a larger id (arrival order)
  double eval_accuracy = -1;        // eval.every_steps: greedy test accuracy; -1 = not this step
  double eval_time_s = 0;           // eval.every_steps: time spent evaluating so far
  std::vector<uint64_t> group_ids;  // the groups this step consumed (trained or filtered)
  // The step's trained samples (`samples` of them, filtered groups left out): each one's reward
  // and response length in tokens, for runtime.tensorboard's histograms. One number per sample,
  // so a report stays small.
  std::vector<double> rewards;
  std::vector<int32_t> response_lengths;
};

/// Final counts of the roles, gathered at shutdown for the no-sample-lost accounting.
struct rollout_counts {
  int32_t worker = 0;
  int64_t groups_completed = 0;   // all G responses generated and sent to Reward
  int64_t groups_unfinished = 0;  // admitted but not finished when stopped
  int64_t tokens_generated = 0;
  int64_t interruptions = 0;
  fault_counts faults;  // injected into this incarnation: sync_drops, sync_delays
  // Multi-turn episodes: model turns handed to the environment, the environment's tokens
  // appended, observations cut to env.max_observation_tokens, attempts that failed and were
  // replayed, and calls that failed after env.max_retries replays (their episodes end, scored 0).
  int64_t env_calls = 0;
  int64_t env_tokens = 0;
  int64_t observations_cut = 0;
  int64_t env_retries = 0;
  int64_t env_failures = 0;
};

struct reward_counts {
  int64_t received = 0;
  int64_t forwarded = 0;
  int64_t in_progress = 0;
  int64_t failures = 0;  // scoring threw
  int64_t timeouts = 0;
  int64_t worker_restarts = 0;  // crashed reward workers the Reward actor replaced
  int64_t fenced = 0;  // from a rollouter declared lost (its work regenerated): not counted
  // reward.function=external, by outcome (docs/reward-protocol.md). Timeouts are also in
  // `timeouts`, crashed, malformed and unavailable calls also in `failures`.
  int64_t scorer_timeouts = 0;
  int64_t scorer_crashes = 0;         // the scorer exited / hung up before answering
  int64_t scorer_malformed = 0;       // an answer that is not a valid frame, or for another uid
  int64_t scorer_unavailable = 0;     // no scorer could be started or connected to
  int64_t scorer_restarts = 0;        // scorer processes started again, connections reopened
  int64_t scorer_start_failures = 0;  // exec/connect errors, exits before the first answer
  // Injected into the pool (reward_worker_kills, reward_throws, reward_hangs), replaced workers
  // included. Not carried by checkpoints: zero in a run_state (see run_result::faults).
  fault_counts faults;
};

struct trainer_counts {
  int64_t deliveries = 0;  // non-empty pulls answered: 1 per batch in sync, more when streaming
  int64_t received = 0;
  int64_t trained = 0;
  int64_t filtered = 0;
  int64_t held = 0;  // received, not yet trained
  int64_t steps = 0;
  int64_t skipped_steps = 0;
  int64_t version = 0;
  int64_t refilled = 0;  // refills asked for filtered groups (algorithm.refill)
};

// inspect() --------------------------------------------------------------------------------

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, fault_counts& x) {
  return f(caf::meta::type_name("fault_counts"), x.rollouter_kills, x.reward_worker_kills,
           x.reward_throws, x.reward_hangs, x.sync_drops, x.sync_delays, x.trainer_crashes,
           x.checkpoints_damaged, x.checkpoints_skipped, x.trainer_rank_kills, x.env_faults,
           x.env_faults_recovered);
}

// Log-probs, reward and advantage cross nodes as raw bits (messages/float_bits.hpp).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, scored_sample& x) {
  if constexpr (std::is_same<Inspector, caf::detail::stringification_inspector>::value) {
    return f(caf::meta::type_name("scored_sample"), x.uid, x.group_id, x.index, x.prompt,
             x.response, x.logprobs, x.versions, x.loss_mask, x.reward, x.advantage,
             x.interruptions, x.reward_failed, x.turns, x.env_failed, x.has_env_reward,
             x.env_reward);
  } else if constexpr (Inspector::reads_state) {
    auto logprobs = floats_bits(x.logprobs);
    auto reward = double_bits(x.reward), advantage = double_bits(x.advantage);
    auto env_reward = double_bits(x.env_reward);
    return f(caf::meta::type_name("scored_sample"), x.uid, x.group_id, x.index, x.prompt,
             x.response, logprobs, x.versions, x.loss_mask, reward, advantage, x.interruptions,
             x.reward_failed, x.turns, x.env_failed, x.has_env_reward, env_reward);
  } else {
    std::vector<uint32_t> logprobs;
    uint64_t reward = 0, advantage = 0, env_reward = 0;
    return f(caf::meta::type_name("scored_sample"), x.uid, x.group_id, x.index, x.prompt,
             x.response, logprobs, x.versions, x.loss_mask, reward, advantage, x.interruptions,
             x.reward_failed, x.turns, x.env_failed, x.has_env_reward, env_reward,
             caf::meta::load_callback([&]() -> caf::error {
               x.logprobs = bits_floats(logprobs);
               x.reward = bits_double(reward);
               x.advantage = bits_double(advantage);
               x.env_reward = bits_double(env_reward);
               if (!x.loss_mask.empty() && x.loss_mask.size() != x.response.size())
                 return caf::make_error(caf::sec::state_not_serializable,
                                        "scored_sample: loss_mask and response differ in length");
               return caf::none;
             }));
  }
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, scored_group& x) {
  return f(caf::meta::type_name("scored_group"), x.group_id, x.prompt_index, x.seq, x.ground_truth,
           x.filtered, x.worker, x.samples);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prompt_task& x) {
  return f(caf::meta::type_name("prompt_task"), x.group_id, x.prompt_index, x.seq, x.prompt,
           x.ground_truth);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rollout_progress& x) {
  return f(caf::meta::type_name("rollout_progress"), x.worker, x.tokens_generated,
           x.groups_completed, x.busy_ms, x.idle_ms, x.version, x.state, x.completed, x.faults);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, queue_stats& x) {
  return f(caf::meta::type_name("queue_stats"), x.depth, x.running, x.received, x.delivered,
           x.dropped_stale, x.regenerated, x.abandoned, x.lost, x.restored, x.refilled,
           x.admitted_in_window, x.window_budget, x.carried, x.capacity, x.published_version,
           x.max_delivered_staleness, x.received_tokens, x.dropped_tokens, x.stale_waits,
           x.credit_requests_waiting, x.pull_waiting_min, x.pull_waiting_old, x.admission_limit,
           x.held, x.window_granted, x.window_carried);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, delivery& x) {
  return f(caf::meta::type_name("delivery"), x.groups, x.stats);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sync_report& x) {
  return f(caf::meta::type_name("sync_report"), x.version, x.time_ms, x.bytes, x.workers, x.ok,
           x.superseded, x.error);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, update_stats& x) {
  return apply_fields(x,
                      [&](auto&... fs) { return f(caf::meta::type_name("update_stats"), fs...); });
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_report& x) {
  return f(caf::meta::type_name("step_report"), x.step, x.policy_version, x.update, x.reward_mean,
           x.accuracy, x.samples, x.stale_samples, x.partial_ratio, x.max_partial_span,
           x.groups_trained, x.filtered_groups, x.refilled_groups, x.refill_exhausted,
           x.reward_failures, x.step_ms, x.trainer_idle_ms, x.first_group_ms, x.last_group_ms,
           x.first_train_ms, x.sync_time_ms, x.sync_bytes, x.params_checksum, x.queue,
           x.prox_version, x.out_of_order_groups, x.eval_accuracy, x.eval_time_s, x.group_ids,
           x.rewards, x.response_lengths);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rollout_counts& x) {
  return f(caf::meta::type_name("rollout_counts"), x.worker, x.groups_completed,
           x.groups_unfinished, x.tokens_generated, x.interruptions, x.faults, x.env_calls,
           x.env_tokens, x.observations_cut, x.env_retries, x.env_failures);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, reward_counts& x) {
  return f(caf::meta::type_name("reward_counts"), x.received, x.forwarded, x.in_progress,
           x.failures, x.timeouts, x.worker_restarts, x.fenced, x.scorer_timeouts, x.scorer_crashes,
           x.scorer_malformed, x.scorer_unavailable, x.scorer_restarts, x.scorer_start_failures,
           x.faults);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, trainer_counts& x) {
  return f(caf::meta::type_name("trainer_counts"), x.deliveries, x.received, x.trained, x.filtered,
           x.held, x.steps, x.skipped_steps, x.version, x.refilled);
}

}  // namespace asyncrl
