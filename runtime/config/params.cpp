#include "runtime/config/params.hpp"

#include <algorithm>

#include "runtime/config/run_config.hpp"

namespace asyncrl {

schedule_params schedule_params_from(const run_config& cfg) {
  schedule_params sp;
  sp.async_training = cfg.async_training;
  sp.group_size = cfg.rollout.n;
  sp.train_batch_size = cfg.data.train_batch_size;
  sp.ppo_mini_batch_size = cfg.trainer.ppo_mini_batch_size;
  sp.total_steps = cfg.trainer.total_steps;
  sp.max_refill_rounds = cfg.algorithm.refill ? cfg.algorithm.max_refill_rounds : 0;
  return sp;
}

policy_trainer_params policy_trainer_params_from(const run_config& cfg) {
  const auto& al = cfg.algorithm;
  const auto& tr = cfg.trainer;
  policy_trainer_params p;
  p.loss = al.loss;
  p.prox_logp = al.prox_logp;
  p.use_rollout_logprobs = al.use_rollout_logprobs;
  p.clip_eps_low = al.clip_eps_low;
  p.clip_eps_high = al.clip_eps_high;
  p.dual_clip_c = al.dual_clip_c;
  p.kl_coef = al.kl_coef;
  p.imp_weight_cap = al.imp_weight_cap;
  p.loss_agg = al.loss_agg;
  p.rollout_correction = al.rollout_correction;
  p.shared_prompt_attention = tr.shared_prompt_attention;
  p.padding_free = tr.padding_free;
  p.activation_checkpointing = tr.activation_checkpointing;
  p.deterministic_accumulation = tr.deterministic_accumulation;
  p.precision = tr.precision;
  p.compute_ref = tr.compute_ref;
  p.logprob_chunk_tokens = tr.logprob_chunk_tokens;
  p.lr = tr.lr;
  p.min_lr_ratio = tr.min_lr_ratio;
  p.lr_schedule = tr.lr_schedule;
  p.warmup_steps = tr.warmup_steps;
  p.weight_decay = tr.weight_decay;
  p.beta1 = tr.beta1;
  p.beta2 = tr.beta2;
  p.grad_clip = tr.grad_clip;
  p.total_steps = tr.total_steps;
  p.grad_bucket_bytes = std::max<int64_t>(1, static_cast<int64_t>(tr.grad_bucket_mb * (1 << 20)));
  p.overlap_grad_reduce = tr.overlap_grad_reduce;
  p.temperature = cfg.rollout.temperature > 0 ? cfg.rollout.temperature : 1.0;
  p.batch_invariant = cfg.rollout.batch_invariant;
  return p;
}

sim_params sim_params_from(const run_config& cfg) {
  sim_params p;
  p.plan = make_schedule(schedule_params_from(cfg));
  p.workload = cfg.workload;
  p.slots = cfg.rollout.max_batch;
  p.chunk_tokens = cfg.rollout.chunk_tokens;
  // Padding-free training computes real tokens only: the simulator then charges no padding.
  p.micro_batch = cfg.trainer.padding_free ? 0 : cfg.trainer.micro_batch_size;
  p.group_aligned = cfg.trainer.group_aligned_micro_batches;
  p.seed = static_cast<uint64_t>(cfg.runtime.seed);
  const auto& s = cfg.simulate;
  p.prompt_tokens = s.prompt_tokens;
  p.warmup_steps = s.warmup_steps;
  p.costs = s.costs;
  const int64_t total = s.devices > 0 ? s.devices : s.rollout_devices + s.train_devices;
  p.colocated = is_colocated(cfg.async_training);
  if (p.colocated) {
    p.rollout_devices = total;  // every device generates, then every device trains
    p.train_devices = total;
  } else {
    p.rollout_devices = s.rollout_devices;
    p.train_devices = s.train_devices;
  }
  if (!s.calibration.empty()) load_calibration(s.calibration, p);
  return p;
}

}  // namespace asyncrl
