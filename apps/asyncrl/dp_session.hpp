#pragma once

// `asyncrl train` with trainer.data_parallel > 1 (docs/scaling.md): rank 0's side of the
// trainer's ranks. Starts the rendezvous (a c10d TCPStore at trainer.dist_listen), starts the
// local ranks as processes of this executable (`asyncrl trainer-rank`), waits until every rank
// joined, and hands the trainer actor the dp_leader that drives them. The ranks' processes die
// with this one (PR_SET_PDEATHSIG) and are reaped when the session ends. Torch-free header.

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

namespace asyncrl {

struct run_config;
class dist_group;
class dp_leader;

class dp_session {
 public:
  /// Null for a run of one rank. Writes the resolved config to <run_dir>/dp_config.yaml (the
  /// ranks read it) and the rendezvous address to <run_dir>/dp.json. Throws dist_error naming
  /// the ranks that did not join within trainer.dist_timeout_s, after stopping those started.
  static std::unique_ptr<dp_session> start(const run_config& cfg, const std::string& run_dir,
                                           const std::string& config_yaml);
  ~dp_session();
  dp_session(const dp_session&) = delete;
  dp_session& operator=(const dp_session&) = delete;

  std::shared_ptr<dp_leader> leader() const { return leader_; }
  /// For each local rank whose process has ended: "; trainer rank 1 (pid 42) was killed by
  /// signal 9". Waits up to a second for a dying rank to be reaped.
  std::string diagnosis();
  /// Local ranks whose process died by SIGKILL before the run ended (counted in
  /// summary.json's faults.trainer_rank_kills).
  int64_t ranks_killed();

 private:
  dp_session() = default;
  void stop_ranks() noexcept;
  std::unique_ptr<dist_group> group_;
  std::shared_ptr<dp_leader> leader_;
  std::vector<pid_t> pids_;  // local ranks 1, 2, ... (index + 1)
  std::vector<int> status_;  // waitpid status once reaped
  std::vector<bool> reaped_;
};

}  // namespace asyncrl
