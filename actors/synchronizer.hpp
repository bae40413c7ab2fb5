#pragma once

// The Synchronizer: publishes versioned weights to every rollouter. A sync is always
// pause -> load -> resume, and resume is sent even when a step fails, so no rollouter is
// "paused forever". Each step runs under a deadline (async_training.sync_timeout_ms, or
// drain_timeout_ms for a pause that drains). A failed attempt (a deadline, a lost message, a
// crashed rollouter) is retried async_training.sync_retries times, then fails the run loudly:
// every sync completes or fails within a bound. Publishes that arrive during a sync are
// coalesced: only the newest waits. It also replaces crashed rollouters (respawn), with the
// weights of the last completed sync. Measures time and bytes per sync.

#include <caf/actor_system.hpp>

#include <functional>
#include <vector>

#include "actors/env.hpp"
#include "messages/interfaces.hpp"

namespace asyncrl {

/// Spawns the replacement of rollouter `worker` with the given weights (the controller's
/// closure: it knows the queue, the reward and itself).
using rollouter_factory = std::function<rollouter_actor(int32_t worker, const weight_snapshot&)>;

struct synchronizer_args {
  env_ptr env;
  weight_snapshot initial;  // what every rollouter starts with
  rollouter_factory respawn;
  std::vector<rollouter_actor> rollouters;
  queue_actor queue;
  controller_actor controller;
};

synchronizer_actor spawn_synchronizer(caf::actor_system& sys, synchronizer_args args);

}  // namespace asyncrl
