#pragma once

// What a whole training run reports back to its caller.

#include <caf/meta/type_name.hpp>

#include <string>
#include <vector>

#include "messages/payloads.hpp"
#include "messages/weights.hpp"

namespace asyncrl {

struct run_result {
  bool ok = true;
  std::string error;
  int64_t steps = 0;
  int64_t groups_generated = 0;
  int64_t groups_trained = 0;
  int64_t groups_dropped = 0;  // stale at delivery + filtered (no signal)
  int64_t groups_in_flight = 0;
  int64_t groups_filtered = 0;
  int64_t tokens_generated = 0;
  int64_t tokens_trained = 0;
  int64_t syncs = 0;
  double wall_time_s = 0;
  double train_time_s = 0;  // from the first prompt to the last step
  std::vector<rollout_counts> rollouters;
  reward_counts reward;
  queue_stats queue;
  trainer_counts trainer;
  weight_snapshot final_weights;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, run_result& x) {
  return f(caf::meta::type_name("run_result"), x.ok, x.error, x.steps, x.groups_generated,
           x.groups_trained, x.groups_dropped, x.groups_in_flight, x.groups_filtered,
           x.tokens_generated, x.tokens_trained, x.syncs, x.wall_time_s, x.train_time_s,
           x.rollouters, x.reward, x.queue, x.trainer, x.final_weights);
}

}  // namespace asyncrl
