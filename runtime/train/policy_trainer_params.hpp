#pragma once

// What the policy trainer takes from the algorithm, trainer and rollout sections: built by
// policy_trainer_params_from (runtime/config/params.hpp) for a run, by hand in tests and
// benchmarks. Torch-free. The defaults are the config's defaults (a test checks they agree).

#include <cstdint>

#include "runtime/train/rollout_correction_params.hpp"
#include "runtime/train/train_modes.hpp"

namespace asyncrl {

struct policy_trainer_params {
  // The objective (algorithm.*).
  loss_kind loss = loss_kind::grpo;
  prox_method prox_logp = prox_method::recompute;  // decoupled only
  bool use_rollout_logprobs = false;  // coupled: logp_old from the rollout instead of a forward
  double clip_eps_low = 0.2;
  double clip_eps_high = 0.2;
  double dual_clip_c = 3.0;  // 0 = off
  double kl_coef = 0.0;
  double imp_weight_cap = 0.0;  // decoupled: 0 = off
  loss_aggregation loss_agg = loss_aggregation::token_mean;
  rollout_correction_params rollout_correction;  // TIS / MIS against the rollout's log-probs

  // The update (trainer.*).
  bool shared_prompt_attention = false;
  bool padding_free = true;  // one row per micro-batch, attention per sequence (packing.hpp)
  bool activation_checkpointing = false;   // recompute each layer in the backward (model.hpp)
  bool deterministic_accumulation = true;  // float64 gradient buffers
  train_precision precision = train_precision::float32;  // float64: weights and math in float64
  bool compute_ref = true;  // reference forward for the kl metric even when kl_coef = 0
  double lr = 1e-4;
  double min_lr_ratio = 0.0;
  lr_schedule_kind lr_schedule = lr_schedule_kind::constant;
  int64_t warmup_steps = 0;
  double weight_decay = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double grad_clip = 1.0;  // 0 = off
  int64_t total_steps = 20;
  // Data parallel: the ranks' gradient sums go in buckets of this many bytes, and a rank's last
  // micro-batch of a step sums them while its backward runs (grad_reducer.hpp).
  int64_t grad_bucket_bytes = int64_t{25} << 20;
  bool overlap_grad_reduce = true;

  /// Log-probs (and the entropy metric) from the LM head this many tokens at a time, the
  /// backward recomputing each chunk's logits (runtime/model/chunked_logprobs.hpp): no (N, V)
  /// logits of a whole micro-batch. 0 = the plain full-logits composition. Not used with
  /// batch_invariant (its own kernels).
  int64_t logprob_chunk_tokens = 2048;

  double temperature = 1.0;  // logits are divided by it, as the generator does
  /// rollout.batch_invariant: the trainer's log-probs by the batch-invariant kernels, equal bit
  /// for bit to the rollouts' under the same weights (model.hpp, CausalLMImpl::batch_invariant).
  bool batch_invariant = false;
};

/// The defaults, written once above: the config's trainer and algorithm sections take theirs
/// from here (runtime/config/sections.hpp).
inline constexpr policy_trainer_params kPolicyTrainerDefaults{};

}  // namespace asyncrl
