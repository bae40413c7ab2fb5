#pragma once

// `asyncrl train`: the RL run. Evaluates the starting model, runs the actor system (controller,
// rollouters, reward, queue, trainer, synchronizer) to trainer.total_steps, then writes
// <run_dir>/final/, evaluates it on the same test split with the same settings, and writes
// <run_dir>/summary.json (reports.hpp). Torch-free header.

#include <string>

namespace asyncrl {

struct loaded_config;

/// Runs everything; returns the process exit code (0 on success). The summary is printed as
/// JSON on stdout.
/// `resume_dir`: continue that run from its newest usable checkpoint (lc is its config.yaml with
/// the command line's overrides). Exit codes: 0 completed, 1 failed, 130 interrupted.
int run_train_command(const loaded_config& lc, const std::string& resume_dir = "");

}  // namespace asyncrl
