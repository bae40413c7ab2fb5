#pragma once

// The set-up that `asyncrl sft` and `asyncrl train` share: the process settings, the run
// directory and the task data. Each command then loads its policy (load_or_init_policy) and
// checks its own length limits.

#include <c10/core/Device.h>

#include <string>

#include "runtime/task/task_data.hpp"

namespace asyncrl {

struct loaded_config;
struct run_config;
struct runtime_section;

/// What a run starts from.
struct run_start {
  std::string dir;  // runtime.run_dir, with config.yaml and data/ written
  c10::Device device{c10::kCPU};
  task_data data;
};

/// Applies the runtime section, creates the run directory with config.yaml, loads the task data
/// and writes it to <run_dir>/data/{train,test}.jsonl, so later commands can use the same data.
run_start start_run(const loaded_config& lc);

/// "fresh init" or model.path: where a run's starting weights come from, for its log line.
std::string model_source(const run_config& cfg);

/// Applies the runtime section to the process: log level and torch threads.
void apply_runtime(const runtime_section& rt);

/// Creates the run directory and writes the resolved config there as config.yaml, so every
/// run records exactly what it ran with. Returns the directory.
std::string prepare_run_dir(const loaded_config& lc);

/// Fails before any work when the run directory's file system has less than `need_bytes`
/// free (checkpoints and the final model), naming the directory and both sizes.
void check_free_space(const std::string& dir, uint64_t need_bytes);

/// Checks a device string ("cpu", "cuda", "cuda:N") against what this libtorch can use;
/// throws std::runtime_error naming `key` with advice when CUDA is asked for but missing.
void check_device(const std::string& device, const std::string& key = "runtime.device");

}  // namespace asyncrl
