#pragma once

// `asyncrl simulate`: the discrete-event model of a run (runtime/scheduling/simulator), with
// the config's scheduling rules and modelled costs. Prints one JSON line.

namespace asyncrl {

struct loaded_config;

/// Returns the exit code; per_step adds every simulated step to the line.
int run_simulate_command(const loaded_config& lc, bool per_step);

}  // namespace asyncrl
