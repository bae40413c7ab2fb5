#include "apps/asyncrl/simulate_command.hpp"

#include "apps/asyncrl/reports.hpp"
#include "runtime/config/params.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/scheduling/simulator.hpp"

namespace asyncrl {

int run_simulate_command(const loaded_config& lc, bool per_step) {
  auto p = sim_params_from(lc.cfg);
  auto r = simulate(p);
  print_line(simulate_line(p, r, per_step));
  return 0;
}

}  // namespace asyncrl
