#pragma once

// The console's `eval` and `generate` (docs/repl.md): each runs on its own thread beside the
// run, on a copy of the trainer's current weights, so that the run goes on meanwhile. A task is
// an actor that answers one run_atom with its result as a JSON object (text) and quits.

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "actors/env.hpp"
#include "messages/weights.hpp"
#include "runtime/task/dataset.hpp"

namespace asyncrl {

/// Greedy pass@1 of `weights` on the first `n` examples of `test` (all when n <= 0), with the
/// run's eval settings: {"accuracy", "questions", "policy_version", "seconds"}.
caf::actor spawn_eval_task(caf::actor_system& sys, env_ptr env, weight_snapshot weights,
                           std::vector<qa_example> test, int64_t n);

/// One response of `weights` to `text` (the run's prompt format), sampled at `temperature` with
/// rollout.max_new_tokens: {"prompt", "response", "tokens", "finish", "policy_version"}.
caf::actor spawn_generate_task(caf::actor_system& sys, env_ptr env, weight_snapshot weights,
                               std::string text, double temperature, uint64_t seed);

}  // namespace asyncrl
