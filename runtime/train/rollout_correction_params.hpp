#pragma once

// algorithm.rollout_correction: how the trainer corrects for the rollout's log-probs being
// those of another policy (a bf16 sampler, other kernels, older weights). Torch-free: the config
// parses it and the policy trainer takes it (policy_trainer_params.hpp). The meanings are
// verl's rollout correction (docs/algorithms.md §18); rl::rollout_correction computes them.

#include "runtime/common/enum_names.hpp"

namespace asyncrl {

/// algorithm.rollout_correction.is: truncated importance sampling (TIS) and its level.
enum class rc_is_level {
  none,      // no weight (coupled); the decoupled loss keeps its untruncated behaviour weight
  token,     // w_t = min(exp(l_t), is_threshold)
  sequence,  // w = min(exp(sum_t l_t), is_threshold), the same for every token of a response
};
inline constexpr enum_name<rc_is_level> rc_is_level_names[] = {{rc_is_level::none, "none"},
                                                               {rc_is_level::token, "token"},
                                                               {rc_is_level::sequence, "sequence"}};
constexpr const auto& enum_names(rc_is_level) {
  return rc_is_level_names;
}

/// algorithm.rollout_correction.rs: masked importance sampling (MIS, rejection) and its level.
/// A token or whole response whose statistic falls outside [lower, upper] leaves the loss.
enum class rc_rs_level {
  none,
  token,      // exp(l_t) per token
  sequence,   // exp(sum_t l_t) per response
  geometric,  // exp(mean_t l_t) per response: the per-token geometric mean of the ratio
};
inline constexpr enum_name<rc_rs_level> rc_rs_level_names[] = {
    {rc_rs_level::none, "none"},
    {rc_rs_level::token, "token"},
    {rc_rs_level::sequence, "sequence"},
    {rc_rs_level::geometric, "geometric"}};
constexpr const auto& enum_names(rc_rs_level) {
  return rc_rs_level_names;
}

/// Everything is in terms of the per-token log-ratio l_t = log pi_train(y_t) - log pi_rollout(y_t)
/// (pi_train: the old policy for the coupled loss, the proximal one for the decoupled loss),
/// clamped to [-20, 20].
struct rollout_correction_params {
  rc_is_level is = rc_is_level::none;
  double is_threshold = 2.0;  // TIS's upper bound on the weight
  rc_rs_level rs = rc_rs_level::none;
  double rs_threshold = 2.0;        // MIS: upper bound on the ratio
  double rs_threshold_lower = 0.0;  // MIS: lower bound; 0 = 1 / rs_threshold
  // A response holding a token whose ratio is below this leaves the loss whole (verl's
  // catastrophic-token veto); 0 = off.
  double veto_threshold = 0.0;

  /// The lower bound in force.
  double rs_lower() const {
    return rs_threshold_lower > 0 ? rs_threshold_lower : 1.0 / rs_threshold;
  }
  bool active() const {
    return is != rc_is_level::none || rs != rc_rs_level::none || veto_threshold > 0;
  }
};

}  // namespace asyncrl
