#pragma once

// Which config changes a resume may make. A checkpoint continues one run: a key that changes
// what is trained, on which data, in which order, or with which model would silently make the
// resumed run a different run, so it is refused, naming the key. Keys that only change how the
// run is observed, bounded or supervised (total_steps, logging, timeouts, threads, checkpoints,
// faults) may change.

#include <string>

namespace asyncrl {

struct loaded_config;

/// Empty when `now` may resume a run that used `saved`; else a message naming the first key
/// that may not change, with both values.
std::string resume_conflict(const loaded_config& saved, const loaded_config& now);

/// Whether `key` may differ between a checkpointed run and its resume.
bool resume_may_change(const std::string& key);

}  // namespace asyncrl
