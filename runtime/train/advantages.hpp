#pragma once

// Group advantages for scored rollouts: rl::group_advantages (losses.hpp) for one group, without
// torch.

#include "runtime/train/samples.hpp"
#include "runtime/train/train_modes.hpp"

namespace asyncrl {

/// Sets each sample's advantage from its group's rewards with `estimator`. Returns false when
/// the group carries no signal (all rewards equal) and `filter_zero_variance` is set; the
/// caller counts it as filtered, never drops it silently.
bool assign_advantages(scored_group& g, advantage_estimator estimator, bool filter_zero_variance);

}  // namespace asyncrl
