#pragma once

// `asyncrl chaos`: a bounded soak of the fault tolerance. Runs a series of short training runs
// ("rounds") from one config, each injecting one kind of fault over and over through the
// faults.* keys (the last round all of them at once), each in <run_dir>/chaos/<round>. After
// each round it checks the run's invariants (completed, group accounting, ledger without lost or
// duplicated positions, staleness, metrics continuity and policy version) and counts the faults
// injected and recovered; prints a table and writes <run_dir>/chaos.json. Torch-free header.

#include <cstdint>
#include <string>
#include <vector>

namespace asyncrl {

/// `asyncrl chaos` arguments.
struct chaos_args {
  std::string config_path;             // --config FILE
  std::vector<std::string> overrides;  // key=value, applied to every round
  int64_t rounds = 1;                  // --rounds N: the series N times, runtime.seed + i
  double minutes = 0;                  // --minutes M: a soak: repeat the series until M minutes
                                       // have passed (no new round after), whatever --rounds says
  double max_rss_growth_mb = 256;      // with --minutes: fail when the resident memory at the
                                       // end exceeds the one after the first series by more
};

/// Runs the series; returns 0 when every round passed and no group was lost or duplicated,
/// 1 otherwise, 130 when interrupted.
int run_chaos_command(const chaos_args& a);

}  // namespace asyncrl
