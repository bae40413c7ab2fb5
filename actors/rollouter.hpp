#pragma once

// The Rollouter: generates groups of G responses with continuous batching, in chunks of
// `rollout.chunk_tokens` decode steps so that control messages (pause, stop), sent with high
// priority, are handled between chunks. States are behaviours switched with become():
//
//   idle --work--> generating --pause--> interrupted --load--> syncing --resume--> resuming
//     ^                |  ^  ^                ^                                        |
//     +---- no work ---+  |  +----------------|------------- first chunk -------------+
//                         |                   |
//   waiting_env <---------+ nothing to generate, episodes at their environment
//     |  (an answer: generating; a pause: interrupted, at once)
//     +-------------------------------------------------------------------------------
//
// Multi-turn episodes (env.kind != none, docs/episodes.md): a model turn that does not end its
// episode goes to the environment pool and waits there outside the generator; the rollouter
// keeps generating other episodes, and takes a pause at once. When the answer arrives the
// environment's turn is appended (out of the loss) and the episode rejoins the generator, under
// the weights loaded then: the version change is in its tokens' versions.
//
// With partial rollout a pause interrupts at the next token boundary and keeps the partial
// responses (tokens stamped with their versions); after the new weights are loaded they are
// resumed by prefilling prompt + partial tokens. Without it, a pause lets the in-flight
// responses finish first (drain).

#include <caf/actor_system.hpp>

#include "actors/env.hpp"
#include "messages/interfaces.hpp"

namespace asyncrl {

struct rollouter_args {
  int32_t worker = 0;
  env_ptr env;
  weight_snapshot initial;  // version 0 weights
  queue_actor queue;
  reward_actor reward;
  controller_actor controller;
  // env.kind != none: the environment pool; null = the rollouter spawns its own (tests pass
  // one they control).
  env_pool_actor env_pool;
};

/// Spawns a rollouter (on its own thread when env->detached).
rollouter_actor spawn_rollouter(caf::actor_system& sys, rollouter_args args);

}  // namespace asyncrl
