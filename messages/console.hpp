#pragma once

// Messages of the operator's console (`asyncrl repl`, docs/repl.md): one request type carrying
// a parsed command, one reply type, and the settings that can change while a run goes on.
// Plain data with inspect(), so the console works the same in-process and across the network.

#include <caf/meta/type_name.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/scheduling/admission.hpp"

namespace asyncrl {

/// A console command for the run (runtime/console/commands.hpp names them). `command` is the
/// console_cmd value; the controller checks it again, since a peer may run another version.
struct console_request {
  int32_t command = 0;
  std::vector<std::string> args;
  bool read_only = false;  // the client was started with --read-only: refuse every change
  std::string secret;      // the run's secret (<run_dir>/run.secret) when it has no TLS
};

/// The run's answer: `json` is the result (an object) when ok, `error` says why not.
struct console_reply {
  bool ok = false;
  std::string error;
  std::string json;
};

/// The values of the live-settable keys (runtime/console/live_keys.hpp). The controller sends
/// all of them at once to the trainer, which applies them at its next step boundary.
struct live_settings {
  double staleness_threshold = 0;
  int64_t max_staleness = -1;
  int64_t trigger_parameter_sync_step = 1;
  double lr = 0;
  int64_t checkpoint_every_steps = 0;
  int64_t eval_every_steps = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, console_request& x) {
  return f(caf::meta::type_name("console_request"), x.command, x.args, x.read_only, x.secret);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, console_reply& x) {
  return f(caf::meta::type_name("console_reply"), x.ok, x.error, x.json);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, live_settings& x) {
  return f(caf::meta::type_name("live_settings"), x.staleness_threshold, x.max_staleness,
           x.trigger_parameter_sync_step, x.lr, x.checkpoint_every_steps, x.eval_every_steps);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, admission_params& x) {
  return f(caf::meta::type_name("admission_params"), x.window, x.staleness_threshold,
           x.consumer_batch, x.max_staleness, x.capacity, x.wait_for_stale);
}

}  // namespace asyncrl
