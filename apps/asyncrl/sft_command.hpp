#pragma once

// `asyncrl sft`: the supervised warm-start.

#include <cstdint>
#include <string>

#include "runtime/task/evaluate.hpp"

namespace asyncrl {

struct loaded_config;

struct sft_report {
  int64_t steps = 0;
  int64_t skipped_steps = 0;
  double first_loss = 0.0;
  double final_loss = 0.0;    // mean over the last 10% of steps
  double tokens_per_s = 0.0;  // tokens through forward+backward per second
  double seconds = 0.0;
  int64_t parameters = 0;
  std::string model_dir;
  eval_result eval;          // greedy pass@1 on the test split after training
  double val_accuracy = -1;  // sft.stop_at_accuracy: the last held-out check; -1 = off
};

/// Supervised warm-start: next-token cross-entropy on the worked answers (response tokens
/// only), AdamW with the sft.* schedule. Writes <run_dir>/final/ (model directory),
/// <run_dir>/data/{train,test}.jsonl, <run_dir>/config.yaml and <run_dir>/sft_summary.json.
sft_report run_sft(const loaded_config& lc);

/// run_sft, then its report as one JSON line on stdout; returns the exit code.
int run_sft_command(const loaded_config& lc);

}  // namespace asyncrl
