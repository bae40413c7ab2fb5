#pragma once

// Scripted stand-ins for the roles around the one a unit test drives. A typed behaviour must
// handle its role's whole interface (messages/interfaces.hpp), so each fake lives here once: a
// new message is added in one place, not in every test. A test sets only the hooks it watches
// or scripts; an unset hook ignores its message or answers an empty value.

#include <caf/fwd.hpp>  // caf::result (caf/result.hpp alone does not compile in CAF 0.17)

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "actors/env.hpp"
#include "messages/interfaces.hpp"
#include "tests/actor_harness.hpp"

namespace asyncrl::test {

/// The environment of tiny_run_config(overrides), for roles run in the test's thread.
env_ptr tiny_env(const std::vector<std::string>& overrides);

/// Group `id` of one sample (prompt {1, 5}, response {7}) generated under `version`.
scored_group one_sample_group(uint64_t id, int64_t version);

/// What a fake controller does with the messages a test watches.
struct controller_hooks {
  std::function<std::vector<prompt_task>(int64_t n)> prompts;  // unset: no prompts
  std::function<void(uint64_t group_id, bool regenerate)> dropped;
  std::function<void(const step_report&)> report;
  std::function<void(const trainer_checkpoint&)> checkpoint;
  std::function<void(const std::string& why)> fail;
  std::function<void(const caf::actor& agent, const std::string& why)> lost;
};

/// A controller that only calls its hooks (the console gets an empty reply). Tracked by `cs`.
controller_actor fake_controller(coordinated_system& cs, controller_hooks hooks);

/// What a fake queue answers. Credit and pull get the queue itself, so that a test can hold
/// the answer in a response promise.
struct queue_hooks {
  // unset: grants nothing
  std::function<caf::result<int64_t>(queue_actor::pointer, int32_t worker, int64_t want)> credit;
  std::function<void(scored_group)> put;
  // unset: an empty delivery
  std::function<caf::result<delivery>(queue_actor::pointer, int64_t version, int64_t min,
                                      int64_t max)>
      pull;
  std::function<void(int64_t version)> synced;
  std::function<void(int64_t filtered, int64_t replace)> refill;
};

/// A queue that only calls its hooks (stats and stop answer empty counters). Tracked by `cs`.
queue_actor fake_queue(coordinated_system& cs, queue_hooks hooks);
/// The same fake on a real actor system, sending each group put on to `sink` as
/// (put_atom, scored_group).
queue_actor forwarding_queue(caf::actor_system& sys, caf::actor sink);

/// What a fake rollouter tells the test of a sync; `hang` makes it a stuck one.
struct rollouter_hooks {
  std::function<void(int64_t token)> pause;
  std::function<void(const weight_snapshot&)> load;
  std::function<void(int64_t token)> resume;
  bool hang = false;  // never answer a pause (the drain or the watchdog must end the sync)
};

/// What a fake synchronizer answers a publish; unset: an ok report of the published version.
struct sync_hooks {
  std::function<sync_report(const weight_snapshot&)> publish;
};

/// A synchronizer that answers each publish through its hook and ignores the rest of its
/// interface (no members, no joins). Tracked by `cs`.
synchronizer_actor fake_synchronizer(coordinated_system& cs, sync_hooks hooks);

/// A rollouter that pauses, loads (answering the snapshot's version) and resumes as asked, and
/// generates nothing. Tracked by `cs`.
rollouter_actor fake_rollouter(coordinated_system& cs, rollouter_hooks hooks);

}  // namespace asyncrl::test
