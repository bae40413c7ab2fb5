#pragma once

// The environment of multi-turn episodes (the `env` section of the config; docs/episodes.md).
// An episode alternates model turns and environment turns: the rollouter hands each finished
// model turn to its environment pool and goes on generating other episodes meanwhile.
// Torch-free and CAF-free; the defaults are written here once.

#include <cstdint>
#include <string>

#include "runtime/common/enum_names.hpp"

namespace asyncrl {

/// env.kind: what answers the model's turns.
enum class env_kind {
  none,        // single-turn responses (rollout.max_turns must be 1)
  calculator,  // the built-in calculator tool (runtime/tools/calculator.hpp), in-process
  external,    // a process or Unix-socket server speaking docs/env-protocol.md
};
inline constexpr enum_name<env_kind> env_kind_names[] = {{env_kind::none, "none"},
                                                         {env_kind::calculator, "calculator"},
                                                         {env_kind::external, "external"}};
constexpr const auto& enum_names(env_kind) {
  return env_kind_names;
}

/// env.reward: where an episode's reward comes from.
enum class env_reward_source {
  scorer,  // the Reward's scorer, on the episode's final model turn (reward.function)
  env,     // the environment's reward on its last step; none (a turn or token limit) = 0
  sum,     // both added
};
inline constexpr enum_name<env_reward_source> env_reward_source_names[] = {
    {env_reward_source::scorer, "scorer"},
    {env_reward_source::env, "env"},
    {env_reward_source::sum, "sum"}};
constexpr const auto& enum_names(env_reward_source) {
  return env_reward_source_names;
}

struct env_section {
  env_kind kind = env_kind::none;
  env_reward_source reward = env_reward_source::scorer;
  int64_t num_workers = 4;        // environment calls in flight per rollouter
  int64_t timeout_ms = 30000;     // per call; a timeout restarts the environment
  int64_t max_retries = 2;        // an episode whose environment failed is replayed this often
  double max_failure_rate = 0.5;  // of the last failure_window calls; over it the run fails
  int64_t failure_window = 32;
  int64_t max_observation_tokens = 256;  // longer observations are cut (and counted)
  std::string command;                   // external: argv, split on whitespace
  std::string socket;                    // external: or a server's Unix socket
  // Injected tool latency (benchmarks, tests): log-normal with this median, and a p99 of
  // latency_p99_ratio times the median. 0 = none. Drawn from (runtime.seed, episode, turn).
  double latency_median_ms = 0;
  double latency_p99_ratio = 20;
  // How a weight sync treats episodes waiting on their environment: false (asyncrl) pauses at
  // once and the episode continues under the new weights when its tool answers; true waits
  // for every outstanding tool call first (what verl does; the benchmark's baseline).
  bool sync_waits_for_tools = false;
};

}  // namespace asyncrl
