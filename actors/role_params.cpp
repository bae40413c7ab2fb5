#include "actors/role_params.hpp"

#include "runtime/config/params.hpp"  // schedule_params_from, policy_trainer_params_from
#include "runtime/config/run_config.hpp"

namespace asyncrl {

namespace {

rollouter_params rollouter_params_from(const run_config& cfg, const schedule_plan& plan) {
  const auto& ro = cfg.rollout;
  rollouter_params p;
  p.device = rollout_device(ro, cfg.runtime);
  p.devices = ro.devices;
  p.dtype = ro.dtype;
  p.batch_invariant = ro.batch_invariant;
  p.fused_decode = ro.fused_decode;
  p.group_size = plan.group_size;
  p.temperature = ro.temperature;
  p.top_k = ro.top_k;
  p.top_p = ro.top_p;
  p.max_new_tokens = ro.max_new_tokens;
  p.max_turns = ro.max_turns;
  p.max_episode_tokens = ro.max_episode_tokens > 0 ? ro.max_episode_tokens : ro.max_new_tokens;
  p.env = cfg.env;
  p.max_prompt_length = cfg.data.max_prompt_length;
  p.max_batch = ro.max_batch;
  p.chunk_tokens = ro.chunk_tokens;
  p.partial_rollout = plan.partial_rollout;
  p.report_starts = plan.admission.wait_for_stale;
  p.seed = static_cast<uint64_t>(cfg.runtime.seed);
  p.workload = cfg.workload;
  p.slow_ms = cfg.faults.slow_rollouter_ms;
  p.sync_drop_every = cfg.faults.sync_drop_every;
  p.sync_delay_every = cfg.faults.sync_delay_every;
  p.sync_delay_ms = cfg.faults.sync_delay_ms;
  p.env_fault_every = cfg.faults.env_fault_every;
  return p;
}

node_params node_params_from(const run_config& cfg) {
  node_params p;
  p.rollouters = cfg.rollout.num_workers;
  p.rollout_threads = cfg.rollout.threads;
  p.trainer_threads = cfg.trainer.threads;
  p.colocated = is_colocated(cfg.async_training);
  p.affinity = cfg.runtime.affinity;
  p.chat_template = cfg.data.chat_template;
  p.system_prompt = cfg.data.system_prompt;
  return p;
}

reward_params reward_params_from(const run_config& cfg) {
  reward_params p;
  p.reward = cfg.reward;
  p.env_reward = cfg.env.kind == env_kind::none ? env_reward_source::scorer : cfg.env.reward;
  p.adv_estimator = cfg.algorithm.adv_estimator;
  p.filter_groups = cfg.algorithm.filter_groups;
  p.max_restarts = cfg.supervision.max_restarts;
  p.restart_window_s = cfg.supervision.restart_window_s;
  p.kill_worker_every = cfg.faults.kill_reward_worker_every;
  p.throw_every = cfg.faults.reward_throw_every;
  p.hang_every = cfg.faults.reward_hang_every;
  return p;
}

queue_params queue_params_from(const run_config& cfg, const schedule_plan& plan) {
  queue_params p;
  p.admission = plan.admission;
  p.members = cfg.rollout.num_workers;
  p.regenerate_stale = cfg.async_training.stale_policy == stale_action::regenerate;
  return p;
}

sync_params sync_params_from(const run_config& cfg) {
  sync_params p;
  p.sync_timeout_ms = cfg.async_training.sync_timeout_ms;
  p.drain_timeout_ms = cfg.async_training.drain_timeout_ms;
  p.retries = cfg.async_training.sync_retries;
  p.request_timeout_ms = cfg.cluster.request_timeout_ms;
  p.chunk_bytes = cfg.cluster.chunk_bytes;
  p.transport = cfg.cluster.weights;
  p.link_host = weights_link_host(cfg.cluster);
  p.corrupt_link_every = cfg.faults.corrupt_link_every;
  return p;
}

trainer_params trainer_params_from(const run_config& cfg) {
  const auto& tr = cfg.trainer;
  trainer_params p;
  p.policy = policy_trainer_params_from(cfg);
  p.schedule = schedule_params_from(cfg);
  p.device = trainer_device(tr, cfg.runtime);
  p.devices = tr.devices;
  p.data_parallel = data_parallel_ranks(tr);
  p.shard_optimizer = tr.shard_optimizer;
  p.micro_batch_size = tr.micro_batch_size;
  p.micro_batch_tokens = tr.micro_batch_tokens;
  p.group_aligned_micro_batches = tr.group_aligned_micro_batches;
  p.eager_micro_batches = tr.eager_micro_batches;
  p.shared_prompt_attention = tr.shared_prompt_attention;
  p.eval = cfg.eval;
  p.seed = static_cast<uint64_t>(cfg.runtime.seed);
  p.checkpoint_every_steps = cfg.checkpoint.every_steps;
  p.crash_at_step = cfg.faults.crash_trainer_at_step;
  return p;
}

controller_params controller_params_from(const run_config& cfg) {
  controller_params p;
  p.mode = cfg.async_training.mode;
  p.seed = static_cast<uint64_t>(cfg.runtime.seed);
  p.local_rollouters = cfg.rollout.num_workers;
  p.trainer_failure = cfg.supervision.trainer_failure;
  p.max_restarts = cfg.supervision.max_restarts;
  p.restart_window_s = cfg.supervision.restart_window_s;
  p.checkpoint_keep = cfg.checkpoint.keep;
  p.progress_timeout_s = cfg.runtime.progress_timeout_s;
  p.tls = cfg.cluster.tls.enabled();
  p.kill_rollouter_every_steps = cfg.faults.kill_rollouter_every_steps;
  p.corrupt_checkpoint_at_step = cfg.faults.corrupt_checkpoint_at_step;
  return p;
}

}  // namespace

live_settings live_settings_of(const trainer_params& p) {
  const auto& at = p.schedule.async_training;
  return live_settings{at.staleness_threshold,         at.max_staleness,
                       at.trigger_parameter_sync_step, p.policy.lr,
                       p.checkpoint_every_steps,       p.eval.every_steps};
}

void apply_live_settings(trainer_params& p, const live_settings& s) {
  auto& at = p.schedule.async_training;
  at.staleness_threshold = s.staleness_threshold;
  at.max_staleness = s.max_staleness;
  at.trigger_parameter_sync_step = s.trigger_parameter_sync_step;
  p.policy.lr = s.lr;
  p.checkpoint_every_steps = s.checkpoint_every_steps;
  p.eval.every_steps = s.eval_every_steps;
}

role_params make_role_params(const run_config& cfg) {
  const auto plan = make_schedule(schedule_params_from(cfg));
  role_params p;
  p.rollouter = rollouter_params_from(cfg, plan);
  p.node = node_params_from(cfg);
  p.reward = reward_params_from(cfg);
  p.queue = queue_params_from(cfg, plan);
  p.sync = sync_params_from(cfg);
  p.trainer = trainer_params_from(cfg);
  p.controller = controller_params_from(cfg);
  p.model = cfg.model;
  return p;
}

worker_setup worker_setup_of(const role_params& p) {
  worker_setup w;
  w.rollouter = p.rollouter;
  w.node = p.node;
  w.model = p.model;
  w.seed = static_cast<int64_t>(p.rollouter.seed);
  return w;
}

struct live_config::impl {
  std::unique_ptr<loaded_config> loaded;
};

live_config::live_config(std::unique_ptr<impl> i)
    : impl_(std::move(i)),
      params_(std::make_unique<role_params>(make_role_params(impl_->loaded->cfg))) {}

live_config::live_config(const std::string& yaml)
    : live_config(std::make_unique<impl>(impl{load_config_text(yaml, "the run's config", {})})) {}

live_config::~live_config() = default;
live_config::live_config(live_config&&) noexcept = default;
live_config& live_config::operator=(live_config&&) noexcept = default;

bool live_config::has(const std::string& key) const {
  return impl_->loaded->schema.has(key);
}

std::string live_config::value(const std::string& key) const {
  return impl_->loaded->schema.value(key);
}

live_config live_config::with(const std::string& key, const std::string& value) const {
  return live_config(std::make_unique<impl>(
      impl{load_config_text(yaml(), "the run's config", {key + "=" + value})}));
}

std::string live_config::yaml() const {
  return impl_->loaded->schema.dump_yaml();
}

}  // namespace asyncrl
