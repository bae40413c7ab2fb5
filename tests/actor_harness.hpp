#pragma once

// Runs whole training runs under CAF's test coordinator: every actor is scheduled in the
// test's thread, in a deterministic order, and time only moves when the harness fires a
// timeout. No sleeps, no wall-clock waits.

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "messages/checkpoint.hpp"
#include "messages/run_result.hpp"
#include "runtime/config/run_config.hpp"

namespace caf::scheduler {
class test_coordinator;
}

namespace asyncrl::test {

/// An actor system on the test coordinator with asyncrl's types registered.
class coordinated_system {
 public:
  coordinated_system();
  ~coordinated_system();
  caf::actor_system& sys() { return *sys_; }
  caf::scheduler::test_coordinator& sched();
  /// Runs jobs until `done()` holds; fires the next timeout whenever nothing is runnable.
  /// Returns false if everything went quiet without `done()` (a hang).
  bool run_until(const std::function<bool()>& done, int max_timeouts = 1000);
  /// Remembers an actor so that the destructor can kill it: the actor system's destructor
  /// waits for every actor, and a scripted fake never quits by itself.
  /// Jobs resumed so far: the coordinator resumes one message per job, so this counts messages.
  uint64_t resumed() const { return resumed_; }
  template <class Handle>
  Handle track(Handle h) {
    tracked_.push_back(caf::actor_cast<caf::actor>(h));
    return h;
  }

 private:
  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  std::vector<caf::actor> tracked_;
  uint64_t resumed_ = 0;
};

/// A small config for actor tests: a 2-layer model, 1-2 digit arithmetic, tiny batches, one
/// thread. `overrides` are key=value strings as on the command line.
std::unique_ptr<loaded_config> tiny_run_config(const std::vector<std::string>& overrides);

/// The outcome of one coordinated run.
struct run_outcome {
  run_result result;
  std::vector<std::string> metrics;  // metrics.jsonl lines
  bool finished = false;             // false: the run hung
  uint64_t messages = 0;             // messages the actors handled, all of them
};

/// Where a coordinated run keeps its files, and how it is interrupted or resumed.
struct run_files {
  std::string run_dir;            // metrics.jsonl, ledger.json; must exist
  std::string checkpoint_dir;     // empty = no checkpoints
  int64_t interrupt_at_step = 0;  // > 0: an interrupt (as SIGINT sends) once this step is logged
  std::optional<run_state> resume;
};

/// The controller of a run of `cfg` as `asyncrl train` builds it with the built-in tokenizer
/// (a fresh model from model.init, arithmetic data), spawned on `sys` and asked to run: the
/// run's result lands in `result` when it ends. `tag` is the run's config text.
struct started_run {
  caf::actor ctrl;
  std::shared_ptr<std::optional<run_result>> result;
};
started_run start_coordinated_run(caf::actor_system& sys, const run_config& cfg,
                                  const run_files& files, const std::string& tag);

/// Runs the actor part of a training run on a fresh coordinated system.
run_outcome run_coordinated(const run_config& cfg);
/// The same, with files the caller keeps (checkpoints, resume, the ledger).
run_outcome run_coordinated(const run_config& cfg, run_files files);

}  // namespace asyncrl::test
