#pragma once

// What a checkpoint holds beyond the trainer's tensors (docs/fault-tolerance.md). The trainer
// hands its part to the controller at a step boundary; the controller adds the queue's groups,
// the data loader and the ledger of the run's prompts, and writes one file
// (runtime/checkpoint/checkpoint_file.hpp) with three sections: "config" (the resolved YAML),
// "trainer" (policy_trainer::save_state) and "run" (a run_state, serialized by CAF).

#include <caf/meta/type_name.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "messages/payloads.hpp"
#include "messages/weights.hpp"

namespace asyncrl {

/// The trainer's state after optimizer step `step`. Groups it had consumed into a step that
/// had not run yet are not here: the controller regenerates them.
struct trainer_checkpoint {
  int64_t step = 0;
  int64_t steps_in_sync = 0;  // steps since the last publish
  int64_t prox_version = 0;
  double eval_time_s = 0;
  trainer_counts counts;            // as of `step`
  std::vector<scored_group> held;   // delivered, not yet consumed: go back to the queue
  std::string state;                // policy_trainer::save_state()
  weight_snapshot rollout_weights;  // the policy at `step` (float32), for the rollouters
};

// loader_state (where the data loader stands) is the loader's: runtime/task/prompt_loader.hpp.

/// Everything but the tensors.
struct run_state {
  int64_t step = 0;
  trainer_checkpoint trainer;  // without `state` (its own section)
  loader_state loader;
  std::vector<scored_group> queued;  // scored, not yet trained: the queue's, then the trainer's
  // Run-wide totals at the cut, added to this process's own counts at the end.
  queue_stats queue;
  reward_counts reward;
  int64_t groups_generated = 0;
  int64_t tokens_generated = 0;
  int64_t tokens_trained = 0;
  int64_t syncs = 0;
  int64_t rollouter_restarts = 0;
  double wall_time_s = 0;  // metrics.jsonl's wall clock continues from here
  // The ledger: schedule positions trained (or filtered) and dropped, each exactly once.
  std::vector<uint64_t> trained_seqs;
  std::vector<uint64_t> dropped_seqs;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, trainer_checkpoint& x) {
  return f(caf::meta::type_name("trainer_checkpoint"), x.step, x.steps_in_sync, x.prox_version,
           x.eval_time_s, x.counts, x.held, x.state, x.rollout_weights);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, loader_state& x) {
  return f(caf::meta::type_name("loader_state"), x.epoch, x.pos, x.next_group, x.next_seq, x.retry);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, run_state& x) {
  return f(caf::meta::type_name("run_state"), x.step, x.trainer, x.loader, x.queued, x.queue,
           x.reward, x.groups_generated, x.tokens_generated, x.tokens_trained, x.syncs,
           x.rollouter_restarts, x.wall_time_s, x.trained_seqs, x.dropped_seqs);
}

}  // namespace asyncrl
