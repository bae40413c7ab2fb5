#pragma once

// The set-up that `asyncrl sft` and `asyncrl train` share: the process settings, the run
// directory and the task data. Each command then loads its policy (load_or_init_policy) and
// checks its own length limits.

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

#include "runtime/task/task_data.hpp"

namespace asyncrl {

struct loaded_config;
struct run_config;
struct runtime_section;
struct model_config;
struct model_bundle;

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

/// Host memory this process may still use: /proc/meminfo's MemAvailable, or less when a
/// cgroup (v2) memory limit is closer. 0 when neither can be read (the check is then skipped).
uint64_t host_memory_available();

/// Fails before any weight is allocated when the least host memory the run's model needs (the
/// trainer's weights, gradients and AdamW state; one copy per rollouter in this process; the
/// run's own copy; each counted where its device is the CPU) exceeds `host_available`. The
/// error names the model's size keys and the keys that change the need. `rollouters` is how
/// many this process hosts; `with_trainer` false for a worker.
void check_model_fits(const run_config& cfg, const model_config& mc, uint64_t host_available,
                      int64_t rollouters, bool with_trainer = true);

/// The same error, for an allocation that failed anyway (a GPU, or an estimate too low): `why`
/// is the allocator's message.
[[noreturn]] void model_did_not_fit(const run_config& cfg, const model_config& mc,
                                    const std::string& why);

/// load_or_init_policy after check_model_fits (against host_memory_available()): a model too
/// large for this machine fails before any weight is allocated, and one whose allocation fails
/// anyway (on a GPU, or past the estimate) fails naming the same keys.
model_bundle load_fitting_policy(const run_config& cfg, c10::Device device, int64_t rollouters,
                                 bool with_trainer = true);

/// Checks a device string ("cpu", "cuda", "cuda:N") against what this libtorch can use;
/// throws std::runtime_error naming `key` with advice when CUDA is asked for but missing.
void check_device(const std::string& device, const std::string& key = "runtime.device");

/// Checks every device the trainer ranks and the local rollouters are placed on (a device that
/// does not exist is refused, naming its key: "trainer.devices[1]"), and logs the placement,
/// saying which devices the two roles share (colocated).
void check_placement(const run_config& cfg);

}  // namespace asyncrl
