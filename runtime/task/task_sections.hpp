#pragma once

// The task's data (the data section of the config) and the evaluation's settings (eval).
// Torch-free.

#include <cstdint>
#include <string>

#include "runtime/text/chat_format.hpp"
#include "runtime/tools/env_section.hpp"

namespace asyncrl {

/// The built-in procedurally generated arithmetic task.
struct arith_config {
  int64_t min_digits = 1;
  int64_t max_digits = 3;
  std::string ops = "+-";
};

/// The built-in tool task (data.task: arith_tools): multi-step products and sums, solved with
/// the calculator (runtime/task/task_tools.hpp).
struct arith_tools_config {
  int64_t terms_min = 2;
  int64_t terms_max = 3;
  int64_t digits = 3;
  std::string ops = "*+-";
  bool traces = true;  // worked answers as calculator traces (else "#### N")
};

struct data_section {
  std::string task = "arith";  // built-in task, used when train_path/test_path are empty
  // JSONL, or Parquet: a file, a glob, or a hub directory (its train- or test-*.parquet shards;
  // runtime/task/parquet_data.hpp). A prompt field and an answer field (see the keys below).
  std::string train_path;
  std::string test_path;
  // Field names of a JSONL line; dotted paths reach nested objects ("reward_model.ground_truth").
  // The prompt is a string or a list of chat messages {role, content}.
  std::string prompt_key = "question";
  std::string answer_key = "answer";
  chat_format chat_template = chat_format::auto_detect;
  std::string system_prompt;  // empty = the chat template's own default (Qwen2.5 has one)
  int64_t train_size = 20000;
  int64_t test_size = 256;
  int64_t seed = 1234;
  arith_config arith;
  arith_tools_config arith_tools;
  int64_t train_batch_size = 16;  // prompts per RL step
  int64_t max_prompt_length = 64;
};

struct eval_section {
  int64_t samples = 1;  // >1 also reports mean@N with rollout sampling
  int64_t max_new_tokens = 48;
  int64_t batch = 128;
  int64_t every_steps = 0;  // train: greedy eval on the test split every n steps; 0 = off
  // Multi-turn episodes (env.kind not none): evaluated as the episodes training runs, each model
  // turn up to max_new_tokens. 0 = rollout.max_turns / max_episode_tokens.
  int64_t max_turns = 0;
  int64_t max_episode_tokens = 0;
  bool tool = true;  // false: every tool call is answered "error: tool unavailable"
  env_section env;   // the env section, copied when the config loads (not a key)
};

}  // namespace asyncrl
