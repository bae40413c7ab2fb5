#pragma once

// The run's data loader: the order of the training prompts (a fresh shuffle each epoch, from
// the run's seed), the prompts to generate again, and the counters that name each dispatched
// prompt (its group id and schedule position). Its whole state is one value, loader_state,
// which a checkpoint saves and a resume restores.

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace asyncrl {

/// One prompt handed to a rollouter: it generates `rollout.n` responses for it.
struct prompt_task {
  uint64_t group_id = 0;      // unique per dispatched prompt; selects the RNG streams
  uint64_t prompt_index = 0;  // position in the training data
  uint64_t seq = 0;           // position in the run's prompt schedule: trained exactly once
  std::vector<int32_t> prompt;
  std::string ground_truth;
};

/// The data loader: where the schedule stands.
struct loader_state {
  int64_t epoch = 0;
  uint64_t pos = 0;         // cursor in the epoch's order
  uint64_t next_group = 0;  // the next group id (selects the RNG streams)
  uint64_t next_seq = 0;    // the next schedule position
  // Prompts to generate before any new one, in order: those in flight at the checkpoint (with
  // their group ids, so that a regenerated group draws the same random numbers), then those
  // sent back by the queue for regeneration.
  std::vector<prompt_task> retry;
};

class prompt_loader {
 public:
  prompt_loader() = default;
  /// `prompts[i]` is training example i, encoded; `truths[i]` its ground truth (same size).
  prompt_loader(std::vector<std::vector<int32_t>> prompts, std::vector<std::string> truths,
                uint64_t seed);

  /// The next prompt to generate: the first to retry, else the next of the epoch's order (a
  /// new epoch reshuffles). A new prompt gets the next group id and schedule position.
  prompt_task next();

  /// A prompt to generate again after those already waiting (a group the queue dropped):
  /// with a fresh group id, so that its samples differ from the dropped ones.
  void regenerate(prompt_task t);
  /// Prompts lost with a rollouter, to generate before anything else, in this order.
  void retry_first(std::vector<prompt_task> lost);

  /// The state to checkpoint: `in_flight` (prompts dispatched and not saved, in group-id
  /// order) go first in its retry list, before those already waiting.
  loader_state save(std::vector<prompt_task> in_flight) const;
  /// Continues from `s` (the same prompts and seed as the saved run).
  void restore(const loader_state& s);

  uint64_t dispatched() const { return state_.next_seq; }  // schedule positions handed out
  const std::deque<prompt_task>& waiting() const { return retry_; }
  size_t size() const { return prompts_.size(); }

 private:
  void reshuffle();

  std::vector<std::vector<int32_t>> prompts_;
  std::vector<std::string> truths_;
  uint64_t seed_ = 0;
  std::vector<size_t> order_;
  loader_state state_;  // its retry list is unused: retry_ holds it (front insertions)
  std::deque<prompt_task> retry_;
};

}  // namespace asyncrl
