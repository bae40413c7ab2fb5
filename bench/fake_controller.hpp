#pragma once

// A controller that answers every message of the controller interface with nothing, for the
// benchmarks that drive one role (queue, synchronizer) without a whole run. Failures are
// printed: a benchmark should never see one.

#include <caf/all.hpp>

#include <iostream>

#include "messages/interfaces.hpp"

namespace asyncrl::bench {

inline controller_actor fake_controller(caf::actor_system& sys) {
  return sys.spawn([](controller_actor::pointer) -> controller_actor::behavior_type {
    return {
        [](run_atom) -> run_result { return {}; },
        [](prompts_atom, int64_t) { return std::vector<prompt_task>{}; },
        [](dropped_atom, uint64_t, bool) {},
        [](progress_atom, rollout_progress&) {},
        [](report_atom, step_report&) {},
        [](checkpoint_atom, trainer_checkpoint&) {},
        [](done_atom) {},
        [](activity_atom, trainer_status&) {},
        [](activity_atom, sync_status&) {},
        [](fail_atom, std::string& why) { std::cerr << "run failed: " << why << "\n"; },
        [](interrupt_atom) {},
        [](requeue_atom, int32_t, caf::actor_addr&) {},
        [](join_atom, join_request&) -> caf::result<join_reply> { return join_reply{}; },
        [](join_atom, rank_join_request&) -> caf::result<rank_setup> { return rank_setup{}; },
        [](lost_atom, caf::actor&, std::string&) {},
        [](watchdog_atom) {},
        [](console_atom, console_request&) { return console_reply{}; },
    };
  });
}

}  // namespace asyncrl::bench
