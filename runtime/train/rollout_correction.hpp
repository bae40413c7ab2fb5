#pragma once

// Rollout correction (docs/algorithms.md §18): importance weights and rejection masks that
// correct the policy gradient for tokens sampled by another policy than the one the trainer
// computes (bf16 sampling kernels, stale weights). Plain tensor functions, as losses.hpp.

#include <ATen/ATen.h>

#include "runtime/train/rollout_correction_params.hpp"

namespace asyncrl::rl {

/// The log-ratio clamp before exp, as verl's SAFETY_BOUND: exp(20) ~ 4.9e8.
inline constexpr double kLogRatioBound = 20.0;

struct correction {
  at::Tensor log_ratio;  // (M, L) l_t clamped to [-20, 20], 0 where mask is 0
  at::Tensor raw;        // (M, L) the untruncated weight at the `is` level (token level for none)
  at::Tensor weight;     // (M, L) the weight applied: raw truncated at is_threshold (none: raw)
  at::Tensor truncated;  // bool (M, L): masked-in tokens whose raw weight exceeded is_threshold
  at::Tensor keep;       // bool (M, L): masked-in tokens that passed rejection and the veto
};

/// Weights and rejection for log_ratio = logp_train - logp_rollout, (M, L), one row per response,
/// `mask` (M, L) its model tokens. A row with no masked-in token keeps weight 1 and is not
/// rejected (it adds nothing to the loss either way). Everything is detached.
correction rollout_correction(const at::Tensor& log_ratio, const at::Tensor& mask,
                              const rollout_correction_params& p);

}  // namespace asyncrl::rl
