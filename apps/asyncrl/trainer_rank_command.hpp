#pragma once

// `asyncrl trainer-rank`: one data-parallel trainer rank other than 0 (docs/scaling.md). `asyncrl
// train` starts its local ranks with it; a rank on another machine is started by hand with the
// run's config. Torch-free header.

#include <string>
#include <vector>

namespace asyncrl {

struct trainer_rank_options {
  std::string config;                  // the run's config (train writes <run_dir>/dp_config.yaml)
  std::vector<std::string> overrides;  // key=value
  int rank = -1;                       // 1 .. trainer.data_parallel - 1
  std::string join;                    // HOST:PORT of the rendezvous (<run_dir>/dp.json)
};

/// Joins the group, replays rank 0's commands until the run ends. Exit codes: 0 when rank 0
/// ended the run, 1 when it was lost or a collective failed, 2 for bad arguments.
int run_trainer_rank_command(const trainer_rank_options& o);

}  // namespace asyncrl
