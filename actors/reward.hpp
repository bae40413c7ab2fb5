#pragma once

// The Reward role: a pool of scoring workers with a per-call timeout. A response whose scoring
// throws or times out scores 0 and is counted. The Reward supervises the pool: a worker that
// dies is replaced in its slot and every call it held is sent again, once, to a live worker;
// more than supervision.max_restarts restarts within supervision.restart_window_s (on the actor
// clock) fail the role. Once all G responses of a group are scored, the group gets its
// advantages and moves on to the queue.
//
// With reward.function=external each worker runs on its own thread and owns one external
// scorer (a process it starts, or a connection to a scorer server; runtime/task/
// external_scorer.hpp, docs/reward-protocol.md). Its timeouts, crashes and malformed answers
// score 0 and are counted like the built-in function's (timeouts, failures), and by outcome in
// reward_counts' scorer_* fields.

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
