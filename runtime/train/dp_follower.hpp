#pragma once

// A rank other than 0 of a multi-process data-parallel trainer: replays rank 0's commands
// (dp_commands.hpp) on its own policy_trainer, joining each collective as rank 0 does. Pulls in
// torch through policy_trainer.

#include <chrono>
#include <cstdint>
#include <functional>

namespace asyncrl {

class dist_group;
class policy_trainer;

struct follower_options {
  std::chrono::milliseconds poll{1000};  // one wait for the next command (then waits again)
  /// Called before each step command with its count in this process (1, 2, ...) and whether a
  /// state was loaded (a resumed run): fault injection, progress.
  std::function<void(int64_t step, bool resumed)> before_step;
};

/// Replays commands until rank 0 posts stop. Throws dist_error when rank 0's store is gone or
/// a collective fails, std::runtime_error on a malformed command.
void follow_rank_zero(policy_trainer& pt, dist_group& group, const follower_options& o = {});

}  // namespace asyncrl
