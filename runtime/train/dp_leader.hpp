#pragma once

// Rank 0's side of a multi-process data-parallel trainer: posts policy_trainer's calls to every
// other rank through the group's store, and routes each micro-batch to the rank with the fewest
// tokens so far in the step (ties: the lowest rank, rank 0 included). The gradients are summed
// once the step's last micro-batch is routed (else at the step), so the routing changes who
// works, not the update.

#include <functional>
#include <string>
#include <vector>

#include "runtime/train/dp_commands.hpp"

namespace asyncrl {

class dist_group;

class dp_leader : public dp_commands {
 public:
  /// `group` (rank 0) must outlive this object. `diagnose` names a rank that is gone, if any.
  explicit dp_leader(dist_group& group, std::function<std::string()> diagnose = {});

  int route(const std::vector<const scored_sample*>& micro, bool last) override;
  void begin_batch() override;
  void step() override;
  void save() override;
  void load(std::string& state) override;
  void set_lr(double lr) override;
  void discard() override;
  std::string diagnosis() override;
  /// Tells every other rank to exit (the end of the run). Never throws.
  void stop() noexcept;

  dist_group& group() { return group_; }
  /// Micro-batches and tokens each rank got in the last step (tests, logs).
  const std::vector<int64_t>& step_tokens() const { return last_tokens_; }

 private:
  void post(int rank, dp_command c, const std::string& payload = {});
  void post_all(dp_command c, const std::string& payload = {});
  dist_group& group_;
  std::function<std::string()> diagnose_;
  std::vector<int64_t> next_;          // per rank: the next command's sequence number
  std::vector<std::string> posted_;    // keys posted since the last step
  std::vector<std::string> erasable_;  // keys posted before the last step: read by now
  std::vector<int64_t> tokens_;        // per rank: tokens routed in the current step
  std::vector<int64_t> last_tokens_;
};

/// The store key of rank r's command `seq`.
std::string dp_command_key(int rank, int64_t seq);

}  // namespace asyncrl
