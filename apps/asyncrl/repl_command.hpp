#pragma once

// `asyncrl repl`: the operator's console beside a run (docs/repl.md). It attaches to a run in
// progress (its run_dir/cluster.json, or HOST:PORT, with the workers' TLS settings), or starts
// one (--config) and attaches to it. Torch-free header.

#include <string>
#include <vector>

namespace asyncrl {

struct repl_options {
  std::string attach;       // RUN_DIR (its cluster.json) or HOST:PORT
  std::string config;       // start `asyncrl train --config FILE` in the background, then attach
  std::string exec;         // "status; set trainer.lr 1e-5": run these, then exit
  bool json = false;        // one JSON object per command
  bool read_only = false;   // refuse every command that changes the run
  std::string tls_dir;      // DIR/ca.pem, DIR/node.pem, DIR/node.key, as for workers
  std::string secret_file;  // the run's secret (default: RUN_DIR/run.secret, or the env)
  std::vector<std::string> overrides;  // with --config: the run's; else local keys only
};

/// Exit codes: 0 when every command succeeded (or the session was interactive), 1 when one
/// failed or the run could not be reached.
int run_repl_command(const repl_options& opt);

}  // namespace asyncrl
