#pragma once

// The policy weights inside a trainer state (a checkpoint's "trainer" section), for what uses
// a checkpoint without resuming it: `asyncrl serve --follow` and `asyncrl export`.

#include <cstdint>
#include <string>

#include "runtime/model/model.hpp"

namespace asyncrl {

/// Copies the policy of `trainer_state` (policy_trainer::save_state's bytes) into `model`,
/// after checking that every tensor's name, shape and dtype match. Returns the weights'
/// version. Throws std::runtime_error naming the tensor that does not match, or the state
/// that cannot be read.
int64_t load_policy_from_trainer_state(const std::string& trainer_state, const CausalLM& model);

}  // namespace asyncrl
