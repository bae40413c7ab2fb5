#pragma once

// The Reward role: a pool of scoring workers with a per-call timeout. A response whose scoring
// throws or times out scores 0 and is counted. The Reward supervises the pool: a worker that
// dies is replaced in its slot and every call it held is sent again, once, to a live worker;
// more than supervision.max_restarts restarts within supervision.restart_window_s (on the actor
// clock) fail the role. Once all G responses of a group are scored, the group gets its
// advantages and moves on to the queue.

#include <caf/actor_system.hpp>

#include "actors/env.hpp"
#include "messages/interfaces.hpp"

namespace asyncrl {

struct reward_args {
  env_ptr env;
  queue_actor queue;
};

reward_actor spawn_reward(caf::actor_system& sys, reward_args args);

/// One worker of the pool (exposed for tests), with its own record of injected crashes.
reward_worker_actor spawn_reward_worker(caf::actor_system& sys, env_ptr env);

}  // namespace asyncrl
