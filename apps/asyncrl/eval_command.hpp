#pragma once

// `asyncrl eval`: accuracy of a model directory on a JSONL file, greedy pass@1 and, with
// --samples N, mean@N of sampled responses. Prints one JSON line.

#include <cstdint>
#include <string>

#include "apps/asyncrl/model_options.hpp"
#include "runtime/generation/generator.hpp"

namespace asyncrl {

struct eval_command {
  common_model_options model;
  std::string data_path;
  int64_t samples = 1;
  int64_t max_new_tokens = 48;
  int64_t batch = 128;
  sampling_params sampling;
  uint64_t seed = 1;
};

/// Returns the exit code; throws on bad input.
int run_eval_command(const eval_command& c);

}  // namespace asyncrl
