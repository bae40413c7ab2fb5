#pragma once

// `asyncrl eval`: accuracy of a model directory on a JSONL file, greedy pass@1 and, with
// --samples N, mean@N of sampled responses. Prints one JSON line; --responses FILE keeps the
// greedy responses for inspection.

#include <cstdint>
#include <string>

#include "apps/asyncrl/model_options.hpp"
#include "runtime/generation/generator.hpp"
#include "runtime/tools/env_section.hpp"

namespace asyncrl {

struct eval_command {
  common_model_options model;
  std::string data_path;
  int64_t samples = 1;
  int64_t max_new_tokens = 48;
  int64_t batch = 128;
  sampling_params sampling;
  uint64_t seed = 1;
  // Episodes (docs/episodes.md): --tool (env.kind: none, calculator or external), and for an
  // external environment --env-command or --env-socket, --env-reward, --env-timeout-ms.
  env_section env;
  int64_t max_turns = 1;
  int64_t max_episode_tokens = 0;  // 0 = max_new_tokens
  bool tool_off = false;           // every call answered "error: tool unavailable"
  std::string responses_path;      // JSONL of the greedy responses; empty = none
};

/// Returns the exit code; throws on bad input.
int run_eval_command(const eval_command& c);

}  // namespace asyncrl
