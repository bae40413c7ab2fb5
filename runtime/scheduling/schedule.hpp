#pragma once

// How a mode turns into counts: groups per optimizer step, steps per weight sync, how the
// trainer pulls, and the admission parameters. Shared by the actors and the simulator.

#include <cstdint>

#include "runtime/scheduling/admission.hpp"
#include "runtime/scheduling/async_section.hpp"

namespace asyncrl {

/// What a plan is derived from: the async_training section and the batch sizes of the data,
/// rollout and trainer sections (see schedule_params_from).
struct schedule_params {
  async_section async_training;
  int64_t group_size = 8;           // rollout.n
  int64_t train_batch_size = 16;    // data.train_batch_size
  int64_t ppo_mini_batch_size = 0;  // trainer.ppo_mini_batch_size; 0 = train_batch_size
  int64_t total_steps = 20;         // trainer.total_steps
  int64_t max_refill_rounds = 0;    // algorithm.refill: rounds; 0 = no refill
};

struct schedule_plan {
  async_mode mode = async_mode::periodic;
  int64_t group_size = 1;       // G
  int64_t groups_per_step = 1;  // ppo_mini_batch_size prompts per optimizer step
  int64_t steps_per_sync = 1;   // sync/periodic: B / mini; fully_async: require_batches * k
  int64_t groups_per_sync = 1;  // the admission window k * R (B in sync and periodic)
  bool wait_for_batch = false;  // sync: the whole batch is generated before training starts
  bool old_per_step = false;    // fully_async: the proximal policy is the local update's start
  // fully_async (verl): one local update gathers require_batches mini-batches before its first
  // optimizer step, and the proximal policy stays at the weights of the update's start.
  int64_t steps_per_update = 1;
  bool partial_rollout = false;
  int64_t total_steps = 1;
  // algorithm.refill: filtered groups a step may replace, max_refill_rounds batches of
  // groups_per_step (DAPO's max_num_gen_batches - 1); 0 = off.
  int64_t refill_budget = 0;
  admission_params admission;
};

/// Derives the plan (from a config that load_config has already cross-checked).
schedule_plan make_schedule(const schedule_params& sp);

}  // namespace asyncrl
