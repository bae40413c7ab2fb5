#pragma once

// The MessageQueue: a bounded buffer of scored groups between the Reward and the Trainer that
// enforces staleness twice:
// - at admission, by granting rollouters credits under verl's budget and AReaL's capacity rule
//   (runtime/admission.hpp); a credit request that cannot be granted yet is held, not refused,
//   so nobody polls and nothing hangs after a sync;
// - at delivery, where a group older than eta is dropped or its prompt sent back for
//   regeneration.
// It never evicts: the credits keep it within its capacity. Every drop is counted.

#include <caf/actor_system.hpp>

#include "actors/env.hpp"
#include "messages/interfaces.hpp"

namespace asyncrl {

struct queue_args {
  env_ptr env;
  controller_actor controller;  // told of every drop (and whether to regenerate it)
  // Resume: the scored groups of the checkpoint, queued first, and the groups accepted before
  // it (AReaL's capacity counts them).
  std::vector<scored_group> restored;
  int64_t accepted_before = 0;
};

queue_actor spawn_message_queue(caf::actor_system& sys, queue_args args);

}  // namespace asyncrl
