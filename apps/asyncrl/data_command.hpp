#pragma once

// `asyncrl data`: writes the task's train/test splits as JSONL, so that other tools (and
// `asyncrl eval -d`) can read the same examples. Prints one JSON line.

#include <string>

namespace asyncrl {

struct loaded_config;

/// Writes <out_dir>/train.jsonl and <out_dir>/test.jsonl; returns the exit code.
int run_data_command(const loaded_config& lc, const std::string& out_dir);

}  // namespace asyncrl
