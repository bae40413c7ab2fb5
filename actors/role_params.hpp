#pragma once

// Each role's own parameters, built once from the run config by make_role_params
// (role_params.cpp, the one file of actors/ that reads run_config), as llama.cpp turns its app
// parameters into llama_model_params at the app's edge. A role sees its own struct and nothing
// else; the console's live settings patch these structs, never a config.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "messages/console.hpp"  // live_settings
#include "messages/role_params.hpp"
#include "runtime/config/sections.hpp"  // reward_section, eval_section
#include "runtime/model/weight_blob.hpp"
#include "runtime/scheduling/schedule.hpp"
#include "runtime/train/policy_trainer_params.hpp"

namespace asyncrl {

struct run_config;

/// The Reward: its worker pool, the scoring function, the advantages it assigns, its restart
/// budget and its injected faults.
struct reward_params {
  reward_section reward;
  env_reward_source env_reward = env_reward_source::scorer;  // env.reward (multi-turn episodes)
  advantage_estimator adv_estimator = advantage_estimator::grpo;
  bool filter_groups = false;
  int64_t max_restarts = 5;  // supervision.*: more restarts than this within the window fail
  double restart_window_s = 60;
  int64_t kill_worker_every = 0;  // faults.kill_reward_worker_every
  int64_t throw_every = 0;        // faults.reward_throw_every
  int64_t hang_every = 0;         // faults.reward_hang_every
};

/// The MessageQueue: admission (from the schedule), members, and what happens to a stale group.
struct queue_params {
  admission_params admission;
  int64_t members = 1;            // local rollouters at the start
  bool regenerate_stale = false;  // async_training.stale_policy == regenerate
};

/// The Synchronizer's deadlines and retries.
struct sync_params {
  int64_t sync_timeout_ms = 120000;
  int64_t drain_timeout_ms = 600000;
  int64_t retries = 3;
  int64_t request_timeout_ms = 30000;  // cluster.request_timeout_ms: remote nodes
  int64_t chunk_bytes = 4 << 20;       // cluster.chunk_bytes (also the link's broadcast buckets)
  weights_transport transport = weights_transport::caf;  // cluster.weights_transport
  std::string link_host;           // where weights links listen (weights_link_host)
  int64_t corrupt_link_every = 0;  // faults.corrupt_link_every
};

/// The Trainer: the objective and optimizer, the micro-batching, the schedule it re-derives on a
/// live change, evaluation, and its fault.
struct trainer_params {
  policy_trainer_params policy;
  schedule_params schedule;          // with live settings applied, make_schedule gives the new plan
  std::string device = "cpu";        // trainer.device, else runtime.device
  std::vector<std::string> devices;  // trainer.devices: data-parallel rank r on devices[r]
  int64_t data_parallel = 1;         // ranks (trainer.data_parallel resolved)
  bool shard_optimizer = false;
  int64_t micro_batch_size = 32;
  int64_t micro_batch_tokens = 0;
  bool group_aligned_micro_batches = true;
  bool eager_micro_batches = true;
  bool shared_prompt_attention = false;
  eval_section eval;  // eval.every_steps and the greedy eval's options
  uint64_t seed = 1;
  int64_t checkpoint_every_steps = 10;  // checkpoint.every_steps
  int64_t crash_at_step = 0;            // faults.crash_trainer_at_step
};

/// The device of data-parallel rank `rank`: trainer.devices[rank], else trainer.device.
inline const std::string& trainer_rank_device(const trainer_params& p, int64_t rank) {
  return p.devices.empty() ? p.device : p.devices.at(static_cast<size_t>(rank));
}

/// Whether the trainer's injected crash (faults.crash_trainer_at_step) fires right after `step`:
/// once, and only in a run that did not resume from a checkpoint. The trainer throws on it
/// after sending that step's report; the controller, which outlives the trainer, counts the
/// crash when the report arrives, by this same rule.
inline bool trainer_crash_due(const trainer_params& p, int64_t step, bool resumed) {
  return p.crash_at_step > 0 && step == p.crash_at_step && !resumed;
}

/// The controller: the loader's seed, supervision, checkpoints, the watchdog, the console's
/// view of the run, and the controller's injected faults.
struct controller_params {
  async_mode mode = async_mode::periodic;
  uint64_t seed = 1;
  int64_t local_rollouters = 1;  // rollout.num_workers
  trainer_failure_action trainer_failure = trainer_failure_action::fail;
  int64_t max_restarts = 5;
  double restart_window_s = 60;
  int64_t checkpoint_keep = 2;
  double progress_timeout_s = 1800;
  bool tls = false;  // cluster.tls: remote console clients are allowed
  int64_t kill_rollouter_every_steps = 0;
  int64_t corrupt_checkpoint_at_step = 0;
};

/// Every role's parameters, from one config.
struct role_params {
  rollouter_params rollouter;
  node_params node;
  reward_params reward;
  queue_params queue;
  sync_params sync;
  trainer_params trainer;
  controller_params controller;
  model_section model;  // where the model comes from (a joining worker loads its architecture)
};

role_params make_role_params(const run_config& cfg);

/// What a joining worker process is sent.
worker_setup worker_setup_of(const role_params& p);

/// The dtype of the snapshots rollouters load (rollout.dtype): cast once per version by the
/// trainer (or once by the controller for the starting weights), never per rollouter.
inline weight_dtype rollout_weights_dtype(const rollouter_params& p) {
  return p.dtype == rollout_dtype::bf16 ? weight_dtype::bf16 : weight_dtype::float32;
}

/// The run's config as the console reads and changes it: YAML keys in, role parameters out.
/// Each change goes through the config loader (its parsing, ranges and cross-checks, and its
/// errors naming the key).
class live_config {
 public:
  explicit live_config(const std::string& yaml);
  ~live_config();
  live_config(live_config&&) noexcept;
  live_config& operator=(live_config&&) noexcept;

  bool has(const std::string& key) const;
  std::string value(const std::string& key) const;
  /// The config with `key` set to `value`; throws std::runtime_error with the loader's message.
  live_config with(const std::string& key, const std::string& value) const;
  std::string yaml() const;
  const role_params& params() const { return *params_; }

 private:
  struct impl;
  explicit live_config(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
  std::unique_ptr<role_params> params_;
};

/// What the console may change of the trainer's params (its live settings), and their update.
live_settings live_settings_of(const trainer_params& p);
void apply_live_settings(trainer_params& p, const live_settings& s);

}  // namespace asyncrl
