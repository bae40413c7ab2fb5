#pragma once

// The Synchronizer: publishes versioned weights to every rollouter. A sync is always
// pause -> load -> resume, and resume is sent even when a step fails, so no rollouter is
// "paused forever". Each step runs under a watchdog timeout (async_training.sync_timeout_ms);
// a timeout fails the run loudly instead of hanging. Publishes that arrive during a sync are
// coalesced: only the newest waits. Measures time and bytes per sync.

#include <caf/actor_system.hpp>

#include <vector>

#include "actors/env.hpp"
#include "messages/interfaces.hpp"

namespace asyncrl {

struct synchronizer_args {
  env_ptr env;
  std::vector<rollouter_actor> rollouters;
  queue_actor queue;
  controller_actor controller;
};

synchronizer_actor spawn_synchronizer(caf::actor_system& sys, synchronizer_args args);

}  // namespace asyncrl
