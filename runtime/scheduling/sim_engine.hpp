#pragma once

// The simulator's discrete-event engine (see simulator.hpp for what it models).

#include "runtime/scheduling/simulator.hpp"

namespace asyncrl {

/// Runs the events of `p` to p.plan.total_steps optimizer steps; `p` is already checked.
sim_result run_event_simulation(const sim_params& p);

}  // namespace asyncrl
