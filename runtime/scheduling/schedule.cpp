#include "runtime/scheduling/schedule.hpp"

#include <cmath>

namespace asyncrl {

schedule_plan make_schedule(const schedule_params& sp) {
  const auto& at = sp.async_training;
  schedule_plan p;
  p.mode = at.mode;
  p.group_size = sp.group_size;
  p.groups_per_step = sp.ppo_mini_batch_size > 0 ? sp.ppo_mini_batch_size : sp.train_batch_size;
  if (at.mode == async_mode::fully_async) {
    p.steps_per_sync = at.require_batches * at.trigger_parameter_sync_step;
    p.old_per_step = true;
    p.steps_per_update = at.require_batches;
    p.partial_rollout = at.partial_rollout;
  } else {
    p.steps_per_sync = sp.train_batch_size / p.groups_per_step;
    p.wait_for_batch = at.mode == async_mode::sync;
  }
  p.groups_per_sync = p.groups_per_step * p.steps_per_sync;
  p.total_steps = sp.total_steps;
  p.refill_budget = sp.max_refill_rounds * p.groups_per_step;
  auto& a = p.admission;
  a.window = p.groups_per_sync;
  a.staleness_threshold = at.mode == async_mode::fully_async ? at.staleness_threshold : 0.0;
  a.consumer_batch = p.groups_per_step;
  a.max_staleness = at.mode == async_mode::fully_async ? at.max_staleness : -1;
  a.wait_for_stale = at.mode == async_mode::fully_async && at.stale_policy == stale_action::wait;
  a.capacity = at.queue_capacity > 0
                   ? at.queue_capacity
                   : static_cast<int64_t>(std::ceil((1.0 + a.staleness_threshold) * a.window)) +
                         2 * p.groups_per_step;
  return p;
}

}  // namespace asyncrl
