#pragma once

// The choice keys of the config as enums, parsed once when the config loads (config_schema::
// add_enum), grouped by the section they belong to. Torch-free and small, so runtime/train/,
// runtime/scheduling/ and runtime/model/ can use them without the config sections. Each table
// lists the names in the order `asyncrl config --describe` shows them.

#include "runtime/common/enum_names.hpp"

namespace asyncrl {

// model --------------------------------------------------------------------------------------

/// model.init.arch, and a model directory's `model_type`.
enum class model_arch {
  qwen2,  // q/k/v biases
  llama,  // none (unless config.json says attention_bias)
};
inline constexpr enum_name<model_arch> model_arch_names[] = {{model_arch::qwen2, "qwen2"},
                                                             {model_arch::llama, "llama"}};
constexpr const auto& enum_names(model_arch) {
  return model_arch_names;
}

// data ---------------------------------------------------------------------------------------

/// data.chat_template: how a question becomes a prompt (runtime/text/chat_template.hpp).
enum class chat_format {
  auto_detect,  // from the tokenizer: its tokenizer_config.json chat_template, else none
  none,         // <bos> question '\n' (the built-in task's format)
  qwen,         // <|im_start|>role\n...<|im_end|>\n (Qwen2, Qwen2.5, Qwen3)
  llama3,       // <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>
};
inline constexpr enum_name<chat_format> chat_format_names[] = {{chat_format::auto_detect, "auto"},
                                                               {chat_format::none, "none"},
                                                               {chat_format::qwen, "qwen"},
                                                               {chat_format::llama3, "llama3"}};
constexpr const auto& enum_names(chat_format) {
  return chat_format_names;
}

// sft, trainer -------------------------------------------------------------------------------

/// sft.schedule and trainer.lr_schedule (see lr_schedule).
enum class lr_schedule_kind { constant, warmup, cosine };
inline constexpr enum_name<lr_schedule_kind> lr_schedule_kind_names[] = {
    {lr_schedule_kind::constant, "constant"},
    {lr_schedule_kind::warmup, "warmup"},
    {lr_schedule_kind::cosine, "cosine"}};
constexpr const auto& enum_names(lr_schedule_kind) {
  return lr_schedule_kind_names;
}

// rollout ------------------------------------------------------------------------------------

/// rollout.dtype: the rollouters' weights, activations and KV cache. bf16 halves their memory
/// and the bytes of every weight sync; the trainer's log-probs then differ from the rollout's
/// by the rounding (update_stats' mismatch_* metrics measure it).
enum class rollout_dtype { float32, bf16 };
inline constexpr enum_name<rollout_dtype> rollout_dtype_names[] = {
    {rollout_dtype::float32, "float32"}, {rollout_dtype::bf16, "bf16"}};
constexpr const auto& enum_names(rollout_dtype) {
  return rollout_dtype_names;
}

// reward -------------------------------------------------------------------------------------

/// reward.function: which rule scores a response.
enum class reward_function {
  math,      // score_response: the final answer against the ground truth
  prefix,    // 1.0 iff the response starts with a fixed string: a bandit whose optimum is known
  external,  // a scorer process or server (reward.external.*, docs/reward-protocol.md)
};
inline constexpr enum_name<reward_function> reward_function_names[] = {
    {reward_function::math, "math"},
    {reward_function::prefix, "prefix"},
    {reward_function::external, "external"}};
constexpr const auto& enum_names(reward_function) {
  return reward_function_names;
}

// async_training -----------------------------------------------------------------------------

/// async_training.mode: how generation and training are scheduled.
enum class async_mode {
  sync,         // generate the whole batch, then train on it
  periodic,     // train on groups as they arrive, one update per batch
  fully_async,  // streaming with a staleness bound
};
inline constexpr enum_name<async_mode> async_mode_names[] = {
    {async_mode::sync, "sync"},
    {async_mode::periodic, "periodic"},
    {async_mode::fully_async, "fully_async"}};
constexpr const auto& enum_names(async_mode) {
  return async_mode_names;
}

/// async_training.stale_policy: what happens to a group over eta at delivery.
enum class stale_action {
  drop,        // counted and discarded
  regenerate,  // discarded, and its prompt is generated again
};
inline constexpr enum_name<stale_action> stale_action_names[] = {
    {stale_action::drop, "drop"}, {stale_action::regenerate, "regenerate"}};
constexpr const auto& enum_names(stale_action) {
  return stale_action_names;
}

// algorithm ----------------------------------------------------------------------------------

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

// trainer ------------------------------------------------------------------------------------

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

// supervision --------------------------------------------------------------------------------

/// supervision.trainer_failure: what a crashed trainer does to the run.
enum class trainer_failure_action {
  fail,     // the run fails; its last checkpoint resumes it (asyncrl train --resume)
  restart,  // the run restarts in-process from its last checkpoint (bounded like the others)
};
inline constexpr enum_name<trainer_failure_action> trainer_failure_action_names[] = {
    {trainer_failure_action::fail, "fail"}, {trainer_failure_action::restart, "restart"}};
constexpr const auto& enum_names(trainer_failure_action) {
  return trainer_failure_action_names;
}

}  // namespace asyncrl
