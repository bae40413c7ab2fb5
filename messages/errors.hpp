#pragma once

// asyncrl's error codes. A role that cannot serve a request, or that ends, says why with one of
// these in a caf::error of category "asyncrl", as CAF's own errors are `sec` codes in category
// "system". The error's context holds the sentence for the log. Code that has to act on the
// kind of failure tests the code (`is(e, errc::run_over)`), never the text.

// First: CAF 0.17.6's caf/detail/atom_val.hpp uses uint64_t without including <cstdint>, and
// GCC 13's standard headers no longer bring it in on the way.
#include <cstdint>

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/make_message.hpp>
#include <caf/message.hpp>

#include "runtime/common/enum_names.hpp"

namespace caf {
class actor_system_config;
}

namespace asyncrl {

enum class errc : uint8_t {
  none = 0,        // CAF's "no error"
  role_failed,     // an exception ended a role, or a console task
  run_over,        // the run or the role is over or stopping: the request came too late
  unauthorized,    // a worker or console without the run's secret
  bad_request,     // a request no state of the role accepts (a join without rollouters, a
                   // second pull, a respawn of a rollouter that is not local)
  bad_weights,     // weights that fail their checks (chunk order, digest, version, shapes)
  join_failed,     // a worker node could not be admitted (staging its weights or launching)
  not_ready,       // the node agent has not joined yet, or has not staged the version asked for
  scorer_failed,   // the reward function or the external scorer failed on one response
  scorer_gave_up,  // the external scorer cannot be started again: its reward worker ends
  reward_gave_up,  // the Reward gave up on its workers (restart limit, failure rate): the run
                   // fails; the context also carries its reward_counts
  injected_fault,  // a fault the run was told to inject (faults.*, the console's kill)
  interrupted,     // SIGINT or SIGTERM
  env_failed,      // a rollouter's environment failed more than env.max_failure_rate allows
};
inline constexpr enum_name<errc> errc_names[] = {{errc::none, "none"},
                                                 {errc::role_failed, "role_failed"},
                                                 {errc::run_over, "run_over"},
                                                 {errc::unauthorized, "unauthorized"},
                                                 {errc::bad_request, "bad_request"},
                                                 {errc::bad_weights, "bad_weights"},
                                                 {errc::join_failed, "join_failed"},
                                                 {errc::not_ready, "not_ready"},
                                                 {errc::scorer_failed, "scorer_failed"},
                                                 {errc::scorer_gave_up, "scorer_gave_up"},
                                                 {errc::reward_gave_up, "reward_gave_up"},
                                                 {errc::injected_fault, "injected_fault"},
                                                 {errc::interrupted, "interrupted"},
                                                 {errc::env_failed, "env_failed"}};
constexpr const auto& enum_names(errc) {
  return errc_names;
}

/// Whether `e` is asyncrl's code `c` (its text aside).
bool is(const caf::error& e, errc c);

/// Lets `actor_system::render` name the code: "asyncrl.<code>: <the context's text>". Without
/// it a system still carries these errors (to other nodes too) but renders them as numbers.
void register_error_category(caf::actor_system_config& cfg);

}  // namespace asyncrl

CAF_ERROR_CODE_ENUM(asyncrl::errc, "asyncrl")
