#pragma once

// `asyncrl train`: the RL run. Evaluates the starting model, runs the actor system (controller,
// rollouters, reward, queue, trainer, synchronizer) to trainer.total_steps, then writes
// <run_dir>/final/, evaluates it on the same test split with the same settings, and writes
// <run_dir>/summary.json (reports.hpp). Torch-free header.

#include <nlohmann/json.hpp>
#include <string>

#include "apps/asyncrl/reports.hpp"
#include "messages/run_result.hpp"

namespace asyncrl {

struct loaded_config;
struct run_config;

/// How run_training runs: what `asyncrl train` sets from its command line, and what
/// `asyncrl chaos` changes to run many short runs in one process.
struct train_options {
  std::string resume_dir;     // continue that run from its newest usable checkpoint
  bool show_progress = true;  // the controller's progress line on stderr
};

/// One training run's outcome, in-process.
struct train_report {
  run_result result;               // the actor run's (the last one, after trainer restarts)
  train_outcome outcome;           // restarts, final model, evaluations
  nlohmann::ordered_json summary;  // what was written to <run_dir>/summary.json
  std::string run_dir;
  std::string checkpoint_dir;
  std::string summary_error;  // why summary.json could not be written (a full disk); "" if it was
};

/// Where a run's checkpoints go: checkpoint.dir, or <run_dir>/checkpoints.
std::string checkpoint_dir_of(const run_config& cfg);

/// The whole run, up to writing summary.json; prints nothing on stdout. Throws on bad config,
/// data or an unusable --resume (as run_train_command does).
train_report run_training(const loaded_config& lc, const train_options& opt);

/// Runs everything; returns the process exit code (0 on success). The summary is printed as
/// JSON on stdout.
/// `resume_dir`: continue that run from its newest usable checkpoint (lc is its config.yaml with
/// the command line's overrides). Exit codes: 0 completed, 1 failed, 130 interrupted.
int run_train_command(const loaded_config& lc, const std::string& resume_dir = "");

}  // namespace asyncrl
