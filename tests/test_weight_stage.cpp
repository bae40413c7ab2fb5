// Sending a weight version in chunks (actors/weight_stage.hpp), under CAF's test coordinator.

#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include <memory>
#include <vector>

#include "actors/weight_stage.hpp"
#include "tests/actor_harness.hpp"

using namespace asyncrl;

namespace {

// An agent that takes chunks and never acknowledges them (a node gone quiet).
node_agent_actor silent_agent(test::coordinated_system& cs) {
  return cs.track(
      cs.sys().spawn([](node_agent_actor::pointer self) -> node_agent_actor::behavior_type {
        auto held = std::make_shared<std::vector<caf::typed_response_promise<int64_t>>>();
        return {
            [=](stage_atom, weight_chunk&) -> caf::result<int64_t> {
              held->push_back(self->make_response_promise<int64_t>());
              return held->back();
            },
            [](launch_atom, int64_t) -> caf::result<std::vector<caf::actor>> {
              return std::vector<caf::actor>{};
            },
            [](load_atom, int64_t v) -> caf::result<int64_t> { return v; },
            [](link_atom, std::string&, int32_t, int64_t) -> caf::result<bool> { return false; },
            [](stage_atom, weight_broadcast&) -> caf::result<int64_t> { return int64_t{0}; },
            [](link_atom, std::string&) {},
            [](stage_atom, int64_t, std::string&) {},
            [](stop_atom) {},
        };
      }));
}

// The synchronizer quits (the run stops) while chunks are in flight: everything the stage's
// `done` holds must be released with it. The synchronizer's `done` holds the sync's response
// promise, and through it the trainer: a sender that kept itself alive kept the detached trainer
// alive, and the actor system waited for it forever at shutdown (tests/repl remote, 3 in 24).
TEST(WeightStage, AnOwnerThatQuitsMidStageReleasesWhatDoneHolds) {
  test::coordinated_system cs;
  auto agent = silent_agent(cs);
  auto held_by_done = std::make_shared<int>(42);
  std::weak_ptr<int> watch = held_by_done;
  auto calls = std::make_shared<int>(0);
  auto owner = cs.sys().spawn([=](caf::event_based_actor* self) -> caf::behavior {
    stage_params sp;
    sp.version = 3;
    sp.packed = std::make_shared<const std::vector<char>>(std::vector<char>(10, 'x'));
    sp.digest = "not checked here";
    sp.chunk_bytes = 4;  // 3 chunks, all in flight at once
    stage_weights(self, agent, std::move(sp),
                  [calls, held_by_done](const std::string&) { ++*calls; });
    return {[](caf::ping_atom) {}};
  });
  held_by_done.reset();
  cs.sched().run();
  EXPECT_FALSE(watch.expired());  // the chunks are in flight: the stage is alive
  caf::anon_send_exit(owner, caf::exit_reason::user_shutdown);
  cs.sched().run();
  EXPECT_TRUE(watch.expired()) << "the stage outlived its owner";
  EXPECT_EQ(*calls, 0);  // nobody is told: the owner is gone
}

}  // namespace
