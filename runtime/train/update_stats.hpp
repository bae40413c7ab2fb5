#pragma once

// Metrics of one optimizer step: sums over its mini-batch, turned into means. Torch-free.
// fields() is the only list of them: the step report's inspect() (messages/payloads.hpp),
// metrics.jsonl (actors/controller.cpp) and the message round-trip test walk it, so a metric is
// named once, here, and in the line of policy_trainer::step() that computes it.

#include <cstdint>

#include "runtime/common/fields.hpp"

namespace asyncrl {

struct update_stats {
  double loss = 0, kl = 0, entropy = 0;
  // Shares of kept tokens, counted apart as verl does: the clipped PPO term was the active loss
  // (pg_clipfrac), and A < 0 with the dual clip -c A applied (pg_clipfrac_lower).
  double clip_frac = 0, clip_frac_lower = 0;
  double imp_weight_min = 0, imp_weight_max = 0, imp_weight_mean = 0;
  int64_t masked_tokens = 0;     // dropped by the importance-weight cap
  int64_t tokens_trained = 0;    // response tokens in the loss
  int64_t samples_trained = 0;   // responses in the loss
  int64_t tokens_processed = 0;  // positions through the policy forward, padding included
  int64_t tokens_real = 0;       // of them real tokens: processed / real = padding overhead
  int64_t micro_batches = 0;     // forward/backward passes the step accumulated
  int64_t staleness_max = 0;     // max over tokens of version - token version
  double grad_norm = 0;
  bool skipped = false;
  double lr = 0;
  double prox_time_ms = 0;  // old/proximal log-probs: the forward pass, or the interpolation
  // Rollout vs trainer log-probs of the same tokens under the same weights version (a bf16
  // rollout against a float32 trainer, kernels that differ): over `mismatch_tokens` response
  // tokens, the mean and max of |log pi_rollout - log pi_train| and the k3 estimate of
  // KL(pi_rollout || pi_train). Tokens sampled by other weights than the trainer holds at that
  // micro-batch are left out; 0 tokens: the three are 0.
  double mismatch_abs_mean = 0, mismatch_abs_max = 0, mismatch_kl_k3 = 0;
  int64_t mismatch_tokens = 0;
  // Rollout correction (algorithm.rollout_correction), over all response tokens whatever their
  // version: the mean and max of the weight applied to the kept tokens (1 without IS on the
  // coupled loss), the shares of tokens whose weight was truncated and that were rejected
  // (rs, veto), and the k3 estimate of KL(pi_rollout || pi_train) with pi_train the old or
  // proximal policy. Computed whether or not a correction is on.
  double rc_weight_mean = 0, rc_weight_max = 0;
  double rc_truncated_frac = 0, rc_rejected_frac = 0, rc_kl_k3 = 0;

  // The names are the metrics.jsonl keys.
  static constexpr auto fields() {
    using s = update_stats;
    return std::make_tuple(
        named("loss", &s::loss), named("kl", &s::kl), named("entropy", &s::entropy),
        named("clip_frac", &s::clip_frac), named("clip_frac_lower", &s::clip_frac_lower),
        named("imp_weight_min", &s::imp_weight_min), named("imp_weight_max", &s::imp_weight_max),
        named("imp_weight_mean", &s::imp_weight_mean), named("masked_tokens", &s::masked_tokens),
        named("tokens_trained", &s::tokens_trained), named("samples_trained", &s::samples_trained),
        named("tokens_processed", &s::tokens_processed), named("tokens_real", &s::tokens_real),
        named("micro_batches", &s::micro_batches), named("staleness_max", &s::staleness_max),
        named("grad_norm", &s::grad_norm), named("skipped", &s::skipped), named("lr", &s::lr),
        named("prox_time_ms", &s::prox_time_ms), named("mismatch_abs_mean", &s::mismatch_abs_mean),
        named("mismatch_abs_max", &s::mismatch_abs_max),
        named("mismatch_kl_k3", &s::mismatch_kl_k3), named("mismatch_tokens", &s::mismatch_tokens),
        named("rc_weight_mean", &s::rc_weight_mean), named("rc_weight_max", &s::rc_weight_max),
        named("rc_truncated_frac", &s::rc_truncated_frac),
        named("rc_rejected_frac", &s::rc_rejected_frac), named("rc_kl_k3", &s::rc_kl_k3));
  }
};

}  // namespace asyncrl
