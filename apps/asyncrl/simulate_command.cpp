#include "apps/asyncrl/simulate_command.hpp"

#include "apps/asyncrl/reports.hpp"
#include "runtime/config/params.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/scheduling/simulator.hpp"

namespace asyncrl {

int run_simulate_command(const loaded_config& lc, bool per_step) {
  auto p = sim_params_from(lc.cfg);
  auto r = simulate(p);
  auto j = simulate_line(p, r, per_step);
  // Busy and overlapped time, so that a caller can scale the costs to a measured run and see
  // how much of each phase ran contended (bench/e2e.py).
  j["trainer_busy_s"] = r.trainer_busy_ms / 1000.0;
  j["trainer_overlap_s"] = r.trainer_overlap_ms / 1000.0;
  j["rollout_busy_s"] = r.rollout_busy_ms / 1000.0;
  j["rollout_overlap_s"] = r.rollout_overlap_ms / 1000.0;
  print_line(j);
  return 0;
}

}  // namespace asyncrl
