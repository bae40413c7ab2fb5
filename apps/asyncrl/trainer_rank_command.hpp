#pragma once

// `asyncrl trainer-rank`: one data-parallel trainer rank other than 0 (docs/scaling.md). `asyncrl
// train` starts its local ranks with it (--join); a rank on another machine is started by hand
// and joins through the run's cluster listener (--connect), as a worker does. Torch-free header.

#include <string>
#include <vector>

namespace asyncrl {

struct trainer_rank_options {
  // A rank on another machine: the run's cluster listener, and what it presents there.
  std::string connect;      // HOST:PORT (cluster.listen; <run_dir>/cluster.json)
  std::string secret_file;  // a run without TLS: its run.secret (or $ASYNCRL_RUN_SECRET)
  std::string tls_dir;      // a run with TLS: ca.pem, node.pem, node.key
  // A local rank (asyncrl train starts them): the run's config, the rank and the rendezvous.
  std::string config;                  // <run_dir>/dp_config.yaml
  int rank = -1;                       // 1 .. trainer.data_parallel - 1
  std::string join;                    // HOST:PORT of the rendezvous (<run_dir>/dp.json)
  std::vector<std::string> overrides;  // key=value (with --connect: this machine's keys only)
};

/// A local rank finds its group's token here (dp_session sets it); the group's keys in the
/// store are under dist_prefix(token).
inline constexpr const char* kDistTokenEnv = "ASYNCRL_DIST_TOKEN";
inline std::string dist_prefix(const std::string& token) {
  return "dp-" + token;
}

/// Joins the group, replays rank 0's commands until the run ends. Exit codes: 0 when rank 0
/// ended the run, 1 when it was lost or a collective failed, 2 for bad arguments.
int run_trainer_rank_command(const trainer_rank_options& o);

}  // namespace asyncrl
