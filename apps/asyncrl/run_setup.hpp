#pragma once

#include <string>

namespace asyncrl {

struct loaded_config;
struct runtime_section;

/// Applies the runtime section to the process: log level and torch threads.
void apply_runtime(const runtime_section& rt);

/// Creates the run directory and writes the resolved config there as config.yaml, so every
/// run records exactly what it ran with. Returns the directory.
std::string prepare_run_dir(const loaded_config& lc);

/// Checks a device string ("cpu", "cuda", "cuda:N") against what this libtorch can use;
/// throws std::runtime_error with advice when CUDA is asked for but missing.
void check_device(const std::string& device);

}  // namespace asyncrl
