#pragma once

// `asyncrl train` with trainer.data_parallel > 1 (docs/scaling.md): rank 0's side of the
// trainer's ranks. Starts the rendezvous (a c10d TCPStore at trainer.dist_listen), starts the
// local ranks as processes of this executable (`asyncrl trainer-rank`), gives remote ranks
// their place through the controller (under the cluster's TLS or run secret), waits until every
// rank joined, and hands the trainer actor the dp_leader that drives them. The local ranks'
// processes die with this one (PR_SET_PDEATHSIG) and are reaped when the session ends.
// Torch-free header.

#include <sys/types.h>

#include <caf/expected.hpp>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "messages/cluster.hpp"

namespace asyncrl {

struct run_config;
class dist_group;
class dist_rendezvous;
class dp_leader;

class dp_session {
 public:
  /// Null for a run of one rank. Starts the rendezvous (rank 0's store, at trainer.dist_listen)
  /// and the local ranks, and returns without waiting for them. Writes the resolved config to
  /// <run_dir>/dp_config.yaml (the local ranks read it) and the rendezvous address to
  /// <run_dir>/dp.json. The group's keys live under a fresh random token: a local rank gets it
  /// in its environment, a remote one from admit(), so a rank of another run (a port reused)
  /// never joins this group.
  static std::unique_ptr<dp_session> open(const run_config& cfg, const std::string& run_dir,
                                          const std::string& config_yaml);
  ~dp_session();
  dp_session(const dp_session&) = delete;
  dp_session& operator=(const dp_session&) = delete;

  /// trainer.remote_ranks > 0: ranks join from elsewhere, through the controller (admit).
  bool awaits_remote() const { return remote_ > 0; }
  /// The next remote rank's place, for the controller (trainer-rank --connect, whose secret it
  /// checked): its rank, the store, the token and the run's config; an error once every remote
  /// rank has one. Thread-safe.
  caf::expected<rank_setup> admit(const std::string& host, int32_t pid);
  /// Waits for every rank and forms the group (then leader() is set). Throws dist_error
  /// naming the ranks that did not join within trainer.dist_timeout_s, after stopping the
  /// ranks it started.
  void join();

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
  std::unique_ptr<dist_rendezvous> rendezvous_;  // until join()
  std::unique_ptr<dist_group> group_;
  std::shared_ptr<dp_leader> leader_;
  std::vector<pid_t> pids_;  // local ranks 1, 2, ... (index + 1)
  std::vector<int> status_;  // waitpid status once reaped
  std::vector<bool> reaped_;

  std::mutex admit_mu_;      // admit() runs on the controller's thread
  rank_setup remote_setup_;  // what every remote rank gets, but its rank
  int32_t remote_ = 0;       // trainer.remote_ranks
  int32_t admitted_ = 0;     // remote ranks given a place so far
};

}  // namespace asyncrl
