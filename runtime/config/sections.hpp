#pragma once

// The sections of the YAML config as plain structs, one per top-level key. Torch-free and
// schema-free: a component takes the section it needs (or a params struct built from it, see
// runtime/config/params.hpp) without pulling in the whole run config and its loader.

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/common/cpu_affinity.hpp"
#include "runtime/config/modes.hpp"
#include "runtime/model/model_config.hpp"
#include "runtime/model/model_source.hpp"
#include "runtime/scheduling/async_section.hpp"
#include "runtime/scheduling/sim_costs.hpp"
#include "runtime/scheduling/workload.hpp"
#include "runtime/task/task_sections.hpp"
#include "runtime/tools/env_section.hpp"
#include "runtime/train/policy_trainer_params.hpp"

namespace asyncrl {

/// Supervised warm-start.
struct sft_section {
  int64_t steps = 400;
  int64_t batch_size = 64;
  double lr = 3e-3;
  double min_lr_ratio = 0.1;
  double weight_decay = 0.01;
  double grad_clip = 1.0;
  int64_t warmup_steps = 20;
  lr_schedule_kind schedule = lr_schedule_kind::cosine;
  int64_t log_every = 25;
  // Stop early once the greedy accuracy on a held-out slice of the training split reaches this
  // (0 = off): the warm-start then has the same strength on every machine, whatever its BLAS.
  double stop_at_accuracy = 0.0;
  int64_t eval_every = 25;  // steps between those checks
  int64_t val_size = 256;   // training examples held out for them (not trained on)
};

/// Sampling for rollouts (and for the sampled part of eval).
struct rollout_section {
  int64_t n = 8;  // group size G
  double temperature = 1.0;
  int64_t top_k = 0;               // 0 = off
  double top_p = 1.0;              // 1 = off
  int64_t max_new_tokens = 48;     // per model turn
  int64_t max_turns = 1;           // model turns per episode; > 1 needs env.kind
  int64_t max_episode_tokens = 0;  // model + environment tokens per episode; 0 = max_new_tokens
  int64_t num_workers = 1;
  int64_t max_batch = 128;                     // KV-cache slots per worker (continuous batching)
  int64_t chunk_tokens = kDefaultChunkTokens;  // decode steps between control-message checks
  int64_t threads = 0;                         // torch threads per rollout worker; 0 = by mode
  rollout_dtype dtype = rollout_dtype::float32;
  bool batch_invariant = kPolicyTrainerDefaults.batch_invariant;  // algorithms.md §19
  bool fused_decode = kFusedDecodeDefault;                        // model.hpp
  std::string device;                // cpu, cuda, cuda:N; empty = runtime.device
  std::vector<std::string> devices;  // rollouter w on devices[w % n]; empty = rollout.device
};

/// reward.function=external: a scorer process or server (docs/reward-protocol.md).
struct reward_external_config {
  std::string command;             // argv, split on whitespace; one process per worker
  std::string socket;              // or: a scorer server's Unix socket; one connection per worker
  double timeout_s = 30;           // per call; a timeout scores 0 and kills the process
  int64_t max_start_failures = 3;  // failed starts in a row before a worker gives up
};

/// The Reward actor's worker pool.
struct reward_section {
  int64_t num_workers = 2;
  int64_t timeout_ms = 5000;      // per call; a timeout scores 0 and is counted
  bool detached_workers = false;  // a thread per worker, for reward functions that block
  reward_function function = reward_function::math;
  std::string prefix;               // prefix: the string a rewarded response starts with
  reward_external_config external;  // function=external
  // A run whose scoring fails (timeouts, exceptions, a scorer's crashes and malformed answers)
  // for more than this share of the last failure_window responses stops with an error instead
  // of training on zero rewards. 1 never stops.
  double max_failure_rate = 0.5;
  int64_t failure_window = 32;
};

/// The RL objective: advantages, policy loss and the proximal policy (docs/algorithms.md §2-§8).
struct algorithm_section {
  advantage_estimator adv_estimator = advantage_estimator::grpo;
  bool filter_groups = false;     // skip groups whose rewards are all equal (counted)
  bool refill = false;            // ... and generate others in their place (DAPO)
  int64_t max_refill_rounds = 4;  // refill: at most this many batches of replacements a step
  // The objective; the defaults are the policy trainer's (policy_trainer_params.hpp).
  loss_kind loss = kPolicyTrainerDefaults.loss;
  prox_method prox_logp = kPolicyTrainerDefaults.prox_logp;                 // decoupled only
  bool use_rollout_logprobs = kPolicyTrainerDefaults.use_rollout_logprobs;  // coupled only
  double clip_eps_low = kPolicyTrainerDefaults.clip_eps_low;
  double clip_eps_high = kPolicyTrainerDefaults.clip_eps_high;
  double dual_clip_c = kPolicyTrainerDefaults.dual_clip_c;        // 0 = off
  double kl_coef = kPolicyTrainerDefaults.kl_coef;                // beta of the k3 KL penalty
  double imp_weight_cap = kPolicyTrainerDefaults.imp_weight_cap;  // decoupled; 0 = off
  loss_aggregation loss_agg = kPolicyTrainerDefaults.loss_agg;
  rollout_correction_params rollout_correction = kPolicyTrainerDefaults.rollout_correction;
};

/// The optimizer and how a batch is cut into micro-batches and mini-batches.
struct trainer_section {
  int64_t micro_batch_size = 32;            // responses per forward/backward
  int64_t micro_batch_tokens = 0;           // > 0: micro-batches by packed tokens, across groups
  bool group_aligned_micro_batches = true;  // a micro-batch never mixes groups (bitwise Theorem 1)
  bool eager_micro_batches = true;  // unaligned: train a part-filled micro-batch rather than idle
  int64_t ppo_mini_batch_size = 0;  // prompts (groups) per optimizer step; 0 = the whole batch
  bool shared_prompt_attention = kPolicyTrainerDefaults.shared_prompt_attention;
  bool padding_free = kPolicyTrainerDefaults.padding_free;  // one row, attention per sequence
  // Recompute each layer in the backward; float64 gradient buffers; the reference forward for
  // the kl metric even when kl_coef = 0. The defaults are the policy trainer's, written once.
  bool activation_checkpointing = kPolicyTrainerDefaults.activation_checkpointing;
  bool deterministic_accumulation = kPolicyTrainerDefaults.deterministic_accumulation;
  train_precision precision = kPolicyTrainerDefaults.precision;
  bool compute_ref = kPolicyTrainerDefaults.compute_ref;
  int64_t logprob_chunk_tokens = kPolicyTrainerDefaults.logprob_chunk_tokens;  // 0 = full logits
  double lr = kPolicyTrainerDefaults.lr;
  double min_lr_ratio = kPolicyTrainerDefaults.min_lr_ratio;
  lr_schedule_kind lr_schedule = kPolicyTrainerDefaults.lr_schedule;
  int64_t warmup_steps = kPolicyTrainerDefaults.warmup_steps;
  double weight_decay = kPolicyTrainerDefaults.weight_decay;
  double beta1 = kPolicyTrainerDefaults.beta1;
  double beta2 = kPolicyTrainerDefaults.beta2;
  double grad_clip = kPolicyTrainerDefaults.grad_clip;
  int64_t total_steps = kPolicyTrainerDefaults.total_steps;
  int64_t threads = 0;  // torch threads of the trainer; 0 = by mode
  std::string device;   // cpu, cuda, cuda:N; empty = runtime.device
  // Data parallel (docs/scaling.md).
  std::vector<std::string> devices;  // one rank per device; empty = every rank on trainer.device
  int64_t data_parallel = 0;         // ranks (processes); 0 = the length of devices, else 1
  bool shard_optimizer = false;      // AdamW moments split over the ranks (ZeRO-1)
  int64_t remote_ranks = 0;          // the last ranks join from elsewhere (asyncrl trainer-rank)
  std::string dist_listen = "127.0.0.1:0";  // the ranks' rendezvous (rank 0's TCPStore)
  double dist_timeout_s = 300;              // the rendezvous and every collective
  // The ranks' gradient sums: bucket size (MiB), and summed during the step's last backward.
  double grad_bucket_mb = static_cast<double>(kPolicyTrainerDefaults.grad_bucket_bytes) / (1 << 20);
  bool overlap_grad_reduce = kPolicyTrainerDefaults.overlap_grad_reduce;
};

/// trainer.data_parallel resolved: the explicit count, else the length of trainer.devices,
/// else 1.
inline int64_t data_parallel_ranks(const trainer_section& t) {
  if (t.data_parallel > 0) return t.data_parallel;
  return t.devices.empty() ? 1 : static_cast<int64_t>(t.devices.size());
}

struct runtime_section {
  int64_t seed = 1;
  std::string run_dir = "runs/demo";
  std::string device = "cpu";  // cpu, cuda, cuda:N; the default of trainer.device, rollout.device
  int64_t threads = 0;         // torch intra-op threads; 0 = all cores
  int64_t caf_threads = 0;     // CAF scheduler threads of the cooperative actors; 0 = one
  // Pin the trainer and each rollouter to their own cores (actors/env.cpp's split). Off by
  // default: on the 2-vCPU reference machine bench/bench_contention measured no clear gain
  // (contention 1.72 pinned vs 1.86 unpinned, within the run-to-run spread).
  cpu_affinity affinity = cpu_affinity::none;
  std::string log_level = "info";
  // final/'s weights. float32 by default: bf16 rounds every weight (up to 2^-9 ~ 0.2% relative),
  // which an HF consumer may want for size but which is not the model the run trained.
  weights_dtype save_dtype = weights_dtype::float32;
  bool eval_before = true;           // train: evaluate the starting model on the test split
  bool eval_after = true;            // train: evaluate the final model on the test split
  double progress_timeout_s = 1800;  // watchdog: no optimizer step for this long fails the run
  bool tensorboard = false;          // train: TensorBoard event files in <run_dir>/tensorboard/
};

/// The device of the trainer and of this process's rollouters: their own key, else
/// runtime.device.
inline const std::string& trainer_device(const trainer_section& t, const runtime_section& r) {
  return t.device.empty() ? r.device : t.device;
}
inline const std::string& rollout_device(const rollout_section& o, const runtime_section& r) {
  return o.device.empty() ? r.device : o.device;
}

/// Checkpoints of a train run (docs/fault-tolerance.md).
struct checkpoint_section {
  int64_t every_steps = 10;  // 0 = only at a signal or a failure; sync/periodic: at the next sync
  int64_t keep = 2;          // the newest this many are kept
  std::string dir;           // empty = <run_dir>/checkpoints
};

/// Restarts of failed roles, Erlang style: more than max_restarts in restart_window_s fails
/// the run.
struct supervision_section {
  int64_t max_restarts = 5;
  double restart_window_s = 60;
  trainer_failure_action trainer_failure = trainer_failure_action::fail;
};

/// Built-in fault injection (0 = off everywhere). "every n" counts are deterministic: the same
/// faults at the same points in every run with the same config.
struct faults_section {
  int64_t kill_rollouter_every_steps = 0;  // after every n-th optimizer step a rollouter dies
  int64_t kill_reward_worker_every = 0;    // the worker scoring every n-th response dies
  int64_t reward_throw_every = 0;          // every n-th response's scoring throws (scores 0)
  int64_t reward_hang_every = 0;           // every n-th response's scoring never answers
  int64_t sync_delay_every = 0;            // every n-th weight sync's load is delayed ...
  int64_t sync_delay_ms = 0;               // ... by this long
  int64_t sync_drop_every = 0;             // every n-th weight sync loses a load message (retried)
  int64_t slow_rollouter_ms = 0;           // rollouter 0 waits this long before each decode chunk
  int64_t crash_trainer_at_step = 0;       // the trainer throws after this step (once)
  int64_t corrupt_checkpoint_at_step = 0;  // the checkpoint of this step is damaged on disk
  int64_t kill_trainer_rank_at_step = 0;   // the last data-parallel rank dies (SIGKILL) then
  int64_t corrupt_link_every = 0;          // every n-th version over each weights link is damaged
  int64_t env_fault_every = 0;             // every n-th environment call fails once (4 kinds)
};

/// TLS for the cluster's connections: all three set, or none (docs/cluster.md).
struct cluster_tls_config {
  std::string certificate;  // this node's certificate chain (PEM)
  std::string key;          // its private key (PEM)
  std::string ca;           // peers must present a certificate signed by this CA (PEM)
  bool enabled() const { return !certificate.empty(); }
};

/// Networked deployment: `asyncrl train` publishes its controller here and `asyncrl worker`
/// processes join it with rollouters (docs/cluster.md).
struct cluster_section {
  std::string listen = "127.0.0.1:0";  // host:port; port 0 = any free one; "off" = no listener
  bool allow_insecure = false;         // plain TCP on a non-loopback address
  cluster_tls_config tls;
  int64_t chunk_bytes = 4 << 20;       // weights cross the network in chunks of this size
  int64_t request_timeout_ms = 30000;  // bound of every request to a remote node
  weights_transport weights = weights_transport::caf;
  std::string weights_listen;  // collective: host of the links' stores; "" = cluster.listen's host
};

/// `asyncrl simulate`: devices and per-device costs of the discrete-event model.
struct simulate_section {
  std::string calibration;  // JSON from bench/bench_calibrate; its costs replace the keys below
  int64_t devices = 0;      // total; 0 = rollout_devices + train_devices
  int64_t rollout_devices = 1;
  int64_t train_devices = 1;
  sim_costs costs;  // simulate.decode_base_ms ... simulate.train_scaling
  int64_t prompt_tokens = 12;
  int64_t warmup_steps = 2;
};

}  // namespace asyncrl
