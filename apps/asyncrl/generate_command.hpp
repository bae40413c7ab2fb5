#pragma once

// `asyncrl generate`: sampled responses of a model directory to one prompt, one JSON line each.

#include <cstdint>
#include <string>

#include "apps/asyncrl/model_options.hpp"
#include "runtime/generation/generator.hpp"

namespace asyncrl {

struct generate_command {
  common_model_options model;
  std::string prompt;
  bool raw = false;  // skip the <bos> question '\n' template
  int64_t samples = 1;
  int64_t max_new_tokens = 48;
  sampling_params sampling;
  uint64_t seed = 1;
  bool stream = false;  // print the text of one response as it is generated, no JSON
};

/// Returns the exit code; throws on bad input or a failed generation.
int run_generate_command(const generate_command& c);

}  // namespace asyncrl
