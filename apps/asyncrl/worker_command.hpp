#pragma once

// `asyncrl worker`: a process that joins a running `asyncrl train` with rollouters
// (docs/cluster.md). Torch-free header.

#include <cstdint>
#include <string>
#include <vector>

namespace asyncrl {

struct worker_options {
  std::string connect;  // HOST:PORT of the controller (train's cluster.listen)
  int32_t rollouters = 1;
  int32_t reward_workers = 0;  // not supported yet: refused when > 0
  std::string tls_dir;         // DIR/ca.pem, DIR/node.pem, DIR/node.key (scripts/make-certs.sh)
  std::string secret_file;     // the run's secret (RUN_DIR/run.secret), or $ASYNCRL_RUN_SECRET
  int64_t rejoin_s = 60;       // after losing the controller, try to rejoin this long; 0 = exit
  std::vector<std::string> overrides;  // keys a worker may set for itself (see the .cpp)
};

/// Joins, generates until the run is over. When the controller is lost or drops this node, joins
/// again as a new node within `rejoin_s`. Exit codes: 0 when the run ended, 1 when the
/// controller was lost for good or refused us, 2 for bad arguments.
int run_worker_command(const worker_options& opt);

}  // namespace asyncrl
