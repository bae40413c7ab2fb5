#pragma once

// A rollouter's environment pool: answers the model turns of its multi-turn episodes
// (docs/episodes.md). The rollouter sends each finished model turn as a request and goes on
// generating; the answer arrives as a response whatever the rollouter's state, so a weight
// sync never waits on a tool. The pool applies the injected tool latency
// (env.latency_median_ms) by answering later, and counts failures: more than
// env.max_failure_rate of the last env.failure_window calls failed ends the pool (and, linked,
// its rollouter and the run) with an error that says so. faults.env_fault_every injects its
// faults here, in front of whichever environment answers.

#include <caf/actor_system.hpp>

#include "messages/interfaces.hpp"
#include "runtime/text/chat_format.hpp"
#include "runtime/tools/env_section.hpp"

namespace asyncrl {

struct env_pool_args {
  int32_t worker = 0;  // the rollouter's id, for log lines
  env_section env;
  chat_format format = chat_format::none;  // the syntax of the model's tool calls
  uint64_t seed = 1;                       // runtime.seed: the latency draws
  int64_t fault_every = 0;                 // faults.env_fault_every (0 = off)
};

/// Spawns a pool; its owner links to it (a pool never outlives its rollouter).
env_pool_actor spawn_env_pool(caf::actor_system& sys, env_pool_args args);

}  // namespace asyncrl
