#pragma once

// The RL objective as plain tensor functions, callable on a user's own tensors. Every formula
// is in docs/algorithms.md (§2-§7). Per-token tensors share one shape, typically
// (B, T) with `mask` marking response tokens; they may live on any device. Bad shapes or an
// empty batch throw std::invalid_argument with a message naming the argument.

#include <ATen/ATen.h>

#include "runtime/train/rollout_correction_params.hpp"
#include "runtime/train/train_modes.hpp"

namespace asyncrl::rl {

// Advantages ----------------------------------------------------------------------------------

/// GRPO group normalisation for rewards (num_groups, G):
/// A = (r - mean) / (std + eps) with the unbiased std (N - 1), or A = r - mean when
/// `divide_by_std` is false (Dr.GRPO). A group of one gets mean 0 and std 1, as in verl.
at::Tensor group_advantages(const at::Tensor& rewards, bool divide_by_std = true,
                            double eps = 1e-6);

/// (num_groups,) bool: groups whose rewards are all equal, so every advantage is 0.
at::Tensor zero_variance_groups(const at::Tensor& rewards);

// Policy-gradient terms -----------------------------------------------------------------------

struct clip_config {
  double eps_low = 0.2;   // ratio >= 1 - eps_low
  double eps_high = 0.2;  // ratio <= 1 + eps_high
  double dual_c = 3.0;    // A < 0: min(L, -c A); 0 = off
};

/// Per-token clipped surrogate for a log-ratio (log-ratio clamped to [-20, 20] before exp):
/// L = -min(r A, clip(r, 1 - eps_low, 1 + eps_high) A), then the dual clip for A < 0.
/// The two clip flags follow verl's pg_clipfrac / pg_clipfrac_lower and are disjoint whenever
/// dual_c >= 1 - eps_low (verl requires dual_c > 1).
struct surrogate {
  at::Tensor loss;          // per token
  at::Tensor ratio;         // per token, exp(log_ratio)
  at::Tensor clipped;       // bool per token: -clip(r) A > -r A, the clipped term was active
  at::Tensor dual_clipped;  // bool per token: A < 0 and the dual clip -c A lowered the loss
};
surrogate clipped_surrogate(const at::Tensor& log_ratio, const at::Tensor& advantages,
                            const clip_config& clip);

/// k3 KL estimate per token (docs/algorithms.md §4): x = logp_ref - logp; exp(x) - x - 1, the log
/// ratio clamped to [-20, 20] and the value to [-10, 10]. Differentiable in `logp`.
at::Tensor kl_k3(const at::Tensor& logp, const at::Tensor& logp_ref);

/// A-3PO's interpolation weight per token: 0 where d == 0, 1/d where d >= 1, computed in
/// `dtype` (1/3 in float32 is off by 1e-8, which a float64 trainer would see).
at::Tensor loglinear_alpha(const at::Tensor& staleness, at::ScalarType dtype = at::kFloat);

/// A-3PO's proximal log-probs: alpha * logp_behav + (1 - alpha) * logp.detach(), with alpha
/// from the per-token staleness d = v(policy) - v(token), in the dtype of `logp`. Costs no
/// forward pass.
at::Tensor loglinear_prox(const at::Tensor& logp_behav, const at::Tensor& logp,
                          const at::Tensor& staleness);

/// Decoupled PPO (docs/algorithms.md §6): w = exp(logp_prox - logp_behav) (detached), r =
/// exp(logp - logp_prox), L = -w * min(r A, clip(r) A) (dual clip as above). With a cap > 0,
/// tokens whose w exceeds it leave the loss (their `loss` is 0 and `kept` false).
struct decoupled_terms {
  at::Tensor loss;          // per token, already multiplied by w and by `kept`
  at::Tensor weight;        // w per token
  at::Tensor kept;          // bool per token
  at::Tensor clipped;       // bool per token, as surrogate::clipped
  at::Tensor dual_clipped;  // bool per token, as surrogate::dual_clipped
  at::Tensor ratio;         // r per token
};
decoupled_terms decoupled_surrogate(const at::Tensor& logp, const at::Tensor& logp_prox,
                                    const at::Tensor& logp_behav, const at::Tensor& advantages,
                                    const clip_config& clip, double imp_weight_cap);

/// Entropy of softmax(logits) over the last dimension.
at::Tensor entropy_from_logits(const at::Tensor& logits);

// Aggregation ---------------------------------------------------------------------------------

/// token_mean: sum(x * mask) / norm, where `norm` is the response-token count of the
/// *whole* batch, so micro-batches add up to the full-batch loss.
/// seq_mean: sum over rows of (row's masked mean) / norm, where `norm` is the batch's
/// sequence count. x and mask are (B, T); a fully masked row contributes 0.
at::Tensor aggregate(const at::Tensor& x, const at::Tensor& mask, loss_aggregation mode,
                     double norm);

// The whole loss ------------------------------------------------------------------------------

struct loss_config {
  loss_kind loss = loss_kind::grpo;
  clip_config clip;
  double kl_coef = 0.0;
  double imp_weight_cap = 0.0;
  loss_aggregation agg = loss_aggregation::token_mean;
  /// Weights and rejection against the rollout's log-probs (rollout_correction.hpp): on
  /// logp_old - logp_behav (coupled) or logp_prox - logp_behav (decoupled).
  rollout_correction_params rc;
  /// false: leave `loss_outputs::stats` empty and only fill `stat_sums` on the device, so the
  /// loss needs no host synchronisation (the trainer reads the sums once per step).
  bool host_stats = true;
};

/// Per-token inputs of one (micro-)batch, all the same shape.
struct loss_inputs {
  at::Tensor logp;        // policy, with gradient
  at::Tensor logp_old;    // coupled: the old (behaviour) policy
  at::Tensor logp_behav;  // decoupled: the generator's log-probs
  at::Tensor logp_prox;   // decoupled: proximal log-probs (recompute or loglinear)
  at::Tensor logp_ref;    // reference; undefined = no KL term
  at::Tensor advantages;  // per token (broadcast a per-sequence A over its tokens)
  at::Tensor mask;        // response tokens (bool or 0/1)
  double norm = 0.0;      // batch token count (token-mean) or sequence count (seq-mean)
};

/// Sums for metrics, over the masked tokens of this micro-batch.
struct loss_stats {
  double tokens = 0;        // masked (response) tokens
  double kept_tokens = 0;   // after the importance-weight cap
  double clipped = 0;       // kept tokens whose clipped PPO term was active (verl pg_clipfrac)
  double dual_clipped = 0;  // kept tokens, A < 0, where the dual clip applied (pg_clipfrac_lower)
  double kl_sum = 0;
  double weight_min = 0, weight_max = 0, weight_sum = 0;  // w (decoupled) or old/behav ratio
  // Rollout correction: the weight applied (kept tokens; 1 for a coupled loss without IS), the
  // tokens whose weight was truncated, the tokens rejected (rs, veto) and the k3 estimate of
  // KL(pi_rollout || pi_train) summed over the masked-in tokens.
  double rc_weight_sum = 0, rc_weight_max = 0;
  double rc_truncated = 0, rc_rejected = 0, rc_kl_sum = 0;
};

/// The slots of loss_outputs::stat_sums.
enum stat_slot : int64_t {
  st_tokens,
  st_kept,
  st_clipped,
  st_dual_clipped,
  st_kl,
  st_weight_min,  // combined by min
  st_weight_max,  // combined by max
  st_weight_sum,
  st_rc_weight_sum,
  st_rc_weight_max,  // combined by max
  st_rc_truncated,
  st_rc_rejected,
  st_rc_kl,
  st_count
};

struct loss_outputs {
  at::Tensor loss;  // scalar, differentiable; this micro-batch's share of the batch loss
  at::Tensor pg_per_token;
  at::Tensor kl_per_token;  // undefined without logp_ref
  loss_stats stats;
  /// The same statistics as a (st_count,) float64 tensor on the loss's device, in stat_slot
  /// order (min/max are +inf/-inf when no token is masked in). Sums of micro-batches add,
  /// except min/max.
  at::Tensor stat_sums;
};

/// stat_sums of one or more micro-batches (added, min/max combined) on the host.
loss_stats read_stats(const at::Tensor& stat_sums);
/// a + b for stat_sums: sums add, weight_min/weight_max take the min/max.
at::Tensor combine_stats(const at::Tensor& a, const at::Tensor& b);

/// The full per-token objective, aggregated: pg + kl_coef * k3, the pg term multiplied by the
/// rollout correction's weight and zero on the tokens it rejects.
loss_outputs policy_loss(const loss_inputs& in, const loss_config& cfg);

}  // namespace asyncrl::rl
