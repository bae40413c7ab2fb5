#pragma once

// The Trainer: pulls scored groups from the queue in arrival order, streams them through the
// tri-model trainer micro-batch by micro-batch, and steps the optimizer after each
// ppo_mini_batch_size groups. A micro-batch never mixes groups, so its content (and its
// float32 gradient) does not depend on arrival order; with float64 accumulation the update
// then does not either, which is what makes periodic equal to sync bit for bit. Every
// steps_per_sync steps it hands a weight snapshot to the Synchronizer.

#include <caf/actor_system.hpp>

#include <memory>
#include <optional>

#include "actors/env.hpp"
#include "messages/interfaces.hpp"
#include "runtime/task/dataset.hpp"

namespace asyncrl {

class dp_leader;

struct trainer_args {
  env_ptr env;
  weight_snapshot initial;  // the starting policy (version 0)
  queue_actor queue;
  synchronizer_actor synchronizer;
  controller_actor controller;
  std::vector<qa_example> test;  // eval.every_steps evaluates the policy on it
  // Resume: the trainer's part of a checkpoint (its `held` groups go back to the queue).
  std::optional<trainer_checkpoint> restore;
  // Rank 0 of a multi-process data-parallel trainer (docs/scaling.md); null: one rank.
  std::shared_ptr<dp_leader> data_parallel;
};

trainer_actor spawn_trainer(caf::actor_system& sys, trainer_args args);

}  // namespace asyncrl
