#pragma once

// What every role of a run shares: each role's parameters, the derived schedule, the model
// architecture and the tokenizer. Immutable once the run starts. No run config: the roles get
// their parameters from actors/role_params.hpp.

#include <memory>
#include <vector>

#include "actors/role_params.hpp"
#include "runtime/common/cpu_affinity.hpp"
#include "runtime/model/model_config.hpp"
#include "runtime/model/weight_blob.hpp"
#include "runtime/task/prompting.hpp"
#include "runtime/task/reward.hpp"
#include "runtime/text/tokenizer.hpp"

namespace asyncrl {

struct actor_env {
  role_params params;
  schedule_plan plan;  // make_schedule(params.trainer.schedule)
  model_config model;
  tokenizer_ptr tokenizer;  // never null
  prompt_format prompt;     // data.chat_template resolved against the tokenizer
  /// Compute roles get their own threads (caf::detached). False under CAF's test coordinator,
  /// which runs every actor deterministically in the test's thread.
  bool detached = true;
  /// Torch threads of each rollout worker and of the trainer.
  int rollout_threads = 1;
  int trainer_threads = 1;
  /// runtime.affinity=roles: each role's CPUs (empty sets: not pinned). Only detached roles pin
  /// their threads.
  core_split cores;
};

using env_ptr = std::shared_ptr<const actor_env>;

/// Builds the environment (throws std::runtime_error when the chat template cannot be used
/// with the tokenizer, or when runtime.affinity=roles needs more CPUs than the process may
/// use): derives the schedule and splits the cores between the roles (all cores to each role
/// in colocated sync mode, shared otherwise). `has_trainer` = false: a worker process, whose
/// cores all go to its rollouters.
env_ptr make_env(const role_params& params, const model_config& model, tokenizer_ptr tok,
                 bool detached, bool has_trainer = true);

/// The CPUs of local rollouter `worker` (worker ids of one process are consecutive, so slots
/// are worker mod the number of local rollouters); empty: not pinned.
const std::vector<int>& rollouter_cpus(const actor_env& env, int32_t worker);

/// Pins the calling thread to `cpus` when the role runs on its own thread (env.detached);
/// a failure is logged, never fatal (the run is still correct, only slower).
void pin_role_thread(const actor_env& env, const std::vector<int>& cpus, const char* role);

}  // namespace asyncrl
