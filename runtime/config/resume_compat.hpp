#pragma once

// Which config changes a resume may make. A checkpoint continues one run: a key that changes
// what is trained, on which data, in which order, or with which model would silently make the
// resumed run a different run, so it is refused, naming the key. Keys that only change how the
// run is observed, bounded or supervised (total_steps, logging, timeouts, threads, checkpoints,
// faults) may change.

#include <string>
#include <vector>

namespace asyncrl {

struct loaded_config;

/// Empty when `now` may resume a run that used `saved`; else a message naming the first key
/// that may not change, with both values. `also_may_change`: keys the caller allows as well
/// (the live keys: what the console may change during the run may change at a resume too).
std::string resume_conflict(const loaded_config& saved, const loaded_config& now,
                            const std::vector<std::string>& also_may_change = {});

/// Whether `key` may differ between a checkpointed run and its resume.
bool resume_may_change(const std::string& key);

/// Live values to carry across a resume. A checkpoint's config holds the values in force when
/// it was cut, console changes included. For each of `keys` (the live keys) whose value in
/// `saved` differs from `now`'s, returns "key=value" to apply to `now`. The exception is a key
/// the resume's command line set: the user's value wins, and its "key=value (the checkpoint
/// had V)" goes to `kept`.
std::vector<std::string> live_values_to_restore(const loaded_config& saved,
                                                const loaded_config& now,
                                                const std::vector<std::string>& keys,
                                                std::vector<std::string>* kept);

}  // namespace asyncrl
