#pragma once

// The trainer's choices: objective, proximal policy, aggregation, precision, LR schedule,
// advantages. Torch-free (policy_trainer_params.hpp says why). Each table lists
// the names in the order `asyncrl config --describe` shows them; the config parses them
// (runtime/config/modes.hpp includes this file).

#include "runtime/common/enum_names.hpp"

namespace asyncrl {

/// sft.schedule and trainer.lr_schedule (see lr_schedule).
enum class lr_schedule_kind { constant, warmup, cosine };
inline constexpr enum_name<lr_schedule_kind> lr_schedule_kind_names[] = {
    {lr_schedule_kind::constant, "constant"},
    {lr_schedule_kind::warmup, "warmup"},
    {lr_schedule_kind::cosine, "cosine"}};
constexpr const auto& enum_names(lr_schedule_kind) {
  return lr_schedule_kind_names;
}

/// algorithm.adv_estimator.
enum class advantage_estimator {
  grpo,    // (r - mean) / (std + 1e-6) per group
  drgrpo,  // r - mean
};
inline constexpr enum_name<advantage_estimator> advantage_estimator_names[] = {
    {advantage_estimator::grpo, "grpo"}, {advantage_estimator::drgrpo, "drgrpo"}};
constexpr const auto& enum_names(advantage_estimator) {
  return advantage_estimator_names;
}

/// algorithm.loss: the policy-gradient objective.
enum class loss_kind {
  grpo,       // coupled PPO clip against the old policy
  decoupled,  // AReaL: behaviour weight times a clip against the proximal policy
};
inline constexpr enum_name<loss_kind> loss_kind_names[] = {{loss_kind::grpo, "grpo"},
                                                           {loss_kind::decoupled, "decoupled"}};
constexpr const auto& enum_names(loss_kind) {
  return loss_kind_names;
}

/// algorithm.prox_logp: where the decoupled loss gets its proximal log-probs.
enum class prox_method {
  recompute,  // a forward pass of the old policy
  loglinear,  // A-3PO's interpolation between behaviour and current log-probs
};
inline constexpr enum_name<prox_method> prox_method_names[] = {
    {prox_method::recompute, "recompute"}, {prox_method::loglinear, "loglinear"}};
constexpr const auto& enum_names(prox_method) {
  return prox_method_names;
}

/// algorithm.loss_agg: how per-token losses become the batch loss (see rl::aggregate).
enum class loss_aggregation {
  token_mean,  // over every response token of the batch
  seq_mean,    // the mean of per-sequence means
};
inline constexpr enum_name<loss_aggregation> loss_aggregation_names[] = {
    {loss_aggregation::token_mean, "token-mean"}, {loss_aggregation::seq_mean, "seq-mean"}};
constexpr const auto& enum_names(loss_aggregation) {
  return loss_aggregation_names;
}

/// trainer.precision: the trainer's weights and arithmetic. bf16 is mixed precision: float32
/// master weights, gradients and AdamW state, a bf16 forward and backward, float32 softmax,
/// log-probs and loss.
enum class train_precision { float32, float64, bf16 };
inline constexpr enum_name<train_precision> train_precision_names[] = {
    {train_precision::float32, "float32"},
    {train_precision::float64, "float64"},
    {train_precision::bf16, "bf16"}};
constexpr const auto& enum_names(train_precision) {
  return train_precision_names;
}

}  // namespace asyncrl
