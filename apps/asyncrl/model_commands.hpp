#pragma once

// The model-facing subcommands of `asyncrl`, separated from argument parsing (cli.cpp).
// Each prints its result as JSON on stdout and throws on bad input.

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/generation/generator.hpp"

namespace asyncrl {

struct common_model_options {
  std::string model_dir;
  std::string device = "cpu";
};

struct eval_command {
  common_model_options model;
  std::string data_path;
  int64_t samples = 1;
  int64_t max_new_tokens = 48;
  int64_t batch = 128;
  sampling_params sampling;
  uint64_t seed = 1;
};
int run_eval_command(const eval_command& c);

struct generate_command {
  common_model_options model;
  std::string prompt;
  bool raw = false;  // skip the <bos> question '\n' template
  int64_t samples = 1;
  int64_t max_new_tokens = 48;
  sampling_params sampling;
  uint64_t seed = 1;
};
int run_generate_command(const generate_command& c);

struct score_command {
  common_model_options model;
  std::string input_path;
};
/// For each JSONL line {"token_ids": [...]} or {"text": "..."} prints {"logprobs": [...]}:
/// log p(token_i | tokens < i) for i = 1 .. n-1.
int run_score_command(const score_command& c);

}  // namespace asyncrl
