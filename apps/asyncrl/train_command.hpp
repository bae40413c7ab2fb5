#pragma once

// `asyncrl train`: the RL run. Evaluates the starting model, runs the actor system (controller,
// rollouters, reward, queue, trainer, synchronizer) to trainer.total_steps, then writes
// <run_dir>/final/, evaluates it on the same test split with the same settings, and writes
// <run_dir>/summary.json. Torch-free header.

#include <nlohmann/json.hpp>

namespace asyncrl {

struct loaded_config;
struct run_result;

/// Runs everything; returns the process exit code (0 on success). The summary is printed as
/// JSON on stdout.
int run_train_command(const loaded_config& lc);

/// summary.json's fields that come from the actor run.
nlohmann::ordered_json summarize(const run_result& r);

}  // namespace asyncrl
