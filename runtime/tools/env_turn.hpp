#pragma once

// One turn of a multi-turn episode between the model and its environment (docs/episodes.md):
// the model turn handed over and the environment's answer. Plain data, torch-free and CAF-free:
// the rollouter's environment pool and `asyncrl eval` both use it (messages/episodes.hpp makes
// it a message).

#include <cstdint>
#include <string>
#include <vector>

namespace asyncrl {

/// A model turn handed to the environment. It carries the episode's earlier turns, so that an
/// environment that lost its state (a restarted process) can be brought back to this point by
/// replaying them: the answer depends on the episode's record only, never on which process
/// serves it, and a resumed run re-issues the same calls.
struct env_call {
  uint64_t episode = 0;  // the response's uid
  int32_t turn = 0;      // 1-based: the model turn just finished
  std::string text;      // that turn, decoded, end-of-turn token excluded
  std::string task;      // the prompt the model was given, decoded (templated with a chat format)
  std::string ground_truth;
  std::vector<std::string> earlier;  // model turns 1..turn-1, for a replay
};

/// The environment's answer to one model turn.
struct env_answer {
  // One per tool call of the turn (an external environment answers one), appended to the
  // context in the model's chat format unless done.
  std::vector<std::string> observations;
  bool done = false;        // the episode ends with this turn
  bool has_reward = false;  // the environment scored the episode (on its last step)
  double reward = 0;
  bool failed = false;          // the environment failed this call after env.max_retries replays
  std::string error;            // why, when failed
  double latency_ms = 0;        // the injected tool latency of this call (env.latency_median_ms)
  int32_t failed_attempts = 0;  // attempts that failed before this answer (each replayed)
  bool injected = false;        // faults.env_fault_every hit this call (counted by the rollouter)
};

}  // namespace asyncrl
