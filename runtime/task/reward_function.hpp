#pragma once

// The built-in reward functions (reward.function). Each table lists
// the names in the order `asyncrl config --describe` shows them; the config parses them
// (runtime/config/modes.hpp includes this file).

#include "runtime/common/enum_names.hpp"

namespace asyncrl {

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

}  // namespace asyncrl
