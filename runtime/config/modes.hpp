#pragma once

// The choice keys of the config as enums, parsed once when the config loads (config_schema::
// add_enum). Each enum lives with the component that owns it (included below, so the config
// only includes downward); the two only the config and the apps use are here. Each table lists
// the names in the order `asyncrl config --describe` shows them.

#include "runtime/common/enum_names.hpp"
#include "runtime/model/model_arch.hpp"
#include "runtime/scheduling/async_section.hpp"
#include "runtime/task/reward_function.hpp"
#include "runtime/text/chat_format.hpp"
#include "runtime/train/train_modes.hpp"

namespace asyncrl {

/// rollout.dtype: the rollouters' weights, activations and KV cache. bf16 halves their memory
/// and the bytes of every weight sync; the trainer's log-probs then differ from the rollout's
/// by the rounding (update_stats' mismatch_* metrics measure it).
enum class rollout_dtype { float32, bf16 };
inline constexpr enum_name<rollout_dtype> rollout_dtype_names[] = {
    {rollout_dtype::float32, "float32"}, {rollout_dtype::bf16, "bf16"}};
constexpr const auto& enum_names(rollout_dtype) {
  return rollout_dtype_names;
}

/// runtime.save_dtype: the weights of the model directory a run saves at its end (final/).
/// Checkpoints are unaffected: they keep the trainer's own precision for an exact resume.
enum class weights_dtype { float32, bf16 };
inline constexpr enum_name<weights_dtype> weights_dtype_names[] = {
    {weights_dtype::float32, "float32"}, {weights_dtype::bf16, "bf16"}};
constexpr const auto& enum_names(weights_dtype) {
  return weights_dtype_names;
}

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

/// cluster.weights_transport: how weight versions reach `asyncrl worker` processes.
enum class weights_transport {
  caf,         // checksummed CAF chunks through the controller's connection (any network, TLS)
  collective,  // a c10d broadcast over a link of two processes per worker (Gloo over TCP)
};
inline constexpr enum_name<weights_transport> weights_transport_names[] = {
    {weights_transport::caf, "caf"}, {weights_transport::collective, "collective"}};
constexpr const auto& enum_names(weights_transport) {
  return weights_transport_names;
}

}  // namespace asyncrl
