#pragma once

// The controller's record of every prompt of the run's schedule, so that none is lost or
// trained twice across crashes and resumes. A dispatched prompt is in flight until a step
// consumes it (trained or filtered) or the queue drops it; its schedule position (`seq`) then
// goes to the trained or the dropped list, exactly once. A crashed rollouter's unfinished
// prompts, and at a checkpoint every prompt not yet scored, go back to the loader with their
// group ids (docs/fault-tolerance.md). Plain data: no CAF.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "messages/payloads.hpp"

namespace asyncrl {

class run_ledger {
 public:
  /// `t` went to rollouter `worker`.
  void dispatched(const prompt_task& t, int32_t worker);
  /// Group `id` reached the Reward (its rollouter's report, or the Reward's settle; repeats
  /// are harmless).
  void completed(uint64_t id);
  /// A step consumed these groups. Returns their tasks (the checkpoint cut may need them back).
  std::vector<prompt_task> trained(const std::vector<uint64_t>& ids);
  /// The queue dropped group `id`. Regenerate: the task comes back (same seq) for the caller
  /// to give a new group id; else its seq is recorded as dropped.
  std::optional<prompt_task> dropped(uint64_t id, bool regenerate);
  /// Rollouter `worker` crashed: its dispatched, unfinished tasks leave the ledger (the caller
  /// generates them again), in group id order.
  std::vector<prompt_task> lost_with(int32_t worker);

  /// In flight and not in `saved`, in group id order: what a checkpoint regenerates.
  std::vector<prompt_task> unsaved(const std::set<uint64_t>& saved) const;
  /// Seqs of every task still in flight.
  std::vector<uint64_t> in_flight_seqs() const;
  size_t in_flight() const { return in_flight_.size(); }
  /// Tasks each rollouter is still generating: dispatched to it and not completed. A completed
  /// group has left it (for the Reward, the queue or the trainer) and counts in in_flight() only.
  std::map<int32_t, int64_t> in_flight_by_worker() const;

  const std::vector<uint64_t>& trained_seqs() const { return trained_seqs_; }
  const std::vector<uint64_t>& dropped_seqs() const { return dropped_seqs_; }
  /// Resume: the lists of the checkpoint.
  void restore(std::vector<uint64_t> trained, std::vector<uint64_t> dropped);

 private:
  struct entry {
    prompt_task task;
    int32_t worker = -1;
    bool completed = false;
  };
  std::map<uint64_t, entry> in_flight_;
  std::vector<uint64_t> trained_seqs_, dropped_seqs_;
};

}  // namespace asyncrl
