#pragma once

// `asyncrl score`: per-token log-probs of given sequences under a model directory.

#include <string>

#include "apps/asyncrl/model_options.hpp"

namespace asyncrl {

struct score_command {
  common_model_options model;
  std::string input_path;
};

/// For each JSONL line {"token_ids": [...]} or {"text": "..."} prints {"logprobs": [...]}:
/// log p(token_i | tokens < i) for i = 1 .. n-1. Blank lines are skipped; a bad line throws
/// naming file:line, after the lines before it were printed.
int run_score_command(const score_command& c);

}  // namespace asyncrl
