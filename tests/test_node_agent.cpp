// The node agent's account of why it quit, under CAF's test coordinator: a worker process
// rejoins only when the agent says the controller was lost or dropped the node
// (node_agent_args::lost; apps/asyncrl/worker_command.cpp). A wrong answer either way is a bug
// a user sees: a worker that exits at every network blip, or one that rejoins a run that ended
// or that a signal told it to leave.

#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <atomic>
#include <memory>
#include <string>

#include "actors/node_agent.hpp"
#include "runtime/cluster/weight_chunks.hpp"
#include "tests/actor_harness.hpp"
#include "tests/role_fakes.hpp"

using namespace asyncrl;

namespace {

struct agent_under_test {
  caf::actor agent;
  controller_actor controller;
  std::shared_ptr<std::atomic<bool>> lost;
  std::shared_ptr<bool> quit = std::make_shared<bool>(false);
};

// An agent joined to a fake controller (which answers the join with an empty worker_setup; the
// environment comes from tiny_env), and a watcher that records its exit.
agent_under_test joined_agent(test::coordinated_system& cs) {
  agent_under_test a;
  a.controller = test::fake_controller(cs, {});
  node_agent_args args;
  args.controller = a.controller;
  args.host = "test";
  args.make_env = [](const worker_setup&) { return test::tiny_env({}); };
  a.lost = args.lost;
  a.agent = caf::actor_cast<caf::actor>(spawn_node_agent(cs.sys(), std::move(args)));
  cs.track(a.agent);
  auto quit = a.quit;
  cs.track(cs.sys().spawn([quit, agent = a.agent](caf::event_based_actor* self) {
    self->monitor(agent);
    self->set_down_handler([quit](caf::down_msg&) { *quit = true; });
    return caf::behavior{[](int) {}};
  }));
  cs.sched().run();
  return a;
}

TEST(NodeAgent, DroppedByTheControllerItQuitsAsLost) {
  // The controller's on_remote_lost sends the agent an exit (a missed deadline, the link still
  // up). Fails if: the agent does not quit, or does not say lost (the worker would exit instead
  // of rejoining).
  test::coordinated_system cs;
  auto a = joined_agent(cs);
  caf::anon_send(a.agent, caf::exit_msg{caf::actor_cast<caf::actor_addr>(a.controller),
                                        caf::exit_reason::user_shutdown});
  cs.sched().run();
  EXPECT_TRUE(*a.quit);
  EXPECT_TRUE(a.lost->load());
}

TEST(NodeAgent, TheControllerGoneItQuitsAsLost) {
  // The controller's node is gone (a heartbeat timeout arrives as its down message). Fails if
  // the agent outlives it, or quits without saying lost.
  test::coordinated_system cs;
  auto a = joined_agent(cs);
  caf::anon_send_exit(a.controller, caf::exit_reason::kill);
  cs.sched().run();
  EXPECT_TRUE(*a.quit);
  EXPECT_TRUE(a.lost->load());
}

TEST(NodeAgent, ASignalOrTheRunsEndIsNotALoss) {
  // A signal to the worker process (an anonymous exit) and the run's end (stop) must never
  // make the process rejoin. Fails if either says lost.
  {
    test::coordinated_system cs;
    auto a = joined_agent(cs);
    caf::anon_send(a.agent,
                   caf::exit_msg{caf::actor_addr{},
                                 caf::make_error(caf::sec::runtime_error, "worker interrupted")});
    cs.sched().run();
    EXPECT_TRUE(*a.quit);
    EXPECT_FALSE(a.lost->load());
  }
  {
    test::coordinated_system cs;
    auto a = joined_agent(cs);
    caf::anon_send(caf::actor_cast<node_agent_actor>(a.agent), stop_atom::value);
    cs.sched().run();
    EXPECT_TRUE(*a.quit);
    EXPECT_FALSE(a.lost->load());
  }
}

// One chunk holding all of a packed snapshot of version `holds`, sent as version `as`.
weight_chunk whole_chunk(int64_t as, int64_t holds) {
  const auto bytes = pack_weights(weight_snapshot{holds, std::make_shared<weight_blob>()});
  weight_chunk c;
  c.version = as, c.index = 0, c.count = 1, c.offset = 0;
  c.total_bytes = static_cast<int64_t>(bytes.size());
  c.digest = sha256_hex(bytes.data(), bytes.size());
  c.bytes.assign(bytes.begin(), bytes.end());
  return c;
}

TEST(NodeAgent, BytesHoldingAnotherVersionAreRefusedAndTheStagedOneKept) {
  // v2 staged, then bytes announced as v3 that hold v1 (intact, their digest right): refused,
  // and v2 must still launch. Fails if the agent stages what it refuses (it then had v1 and
  // answered launch v2 with "not staged (have v1)").
  test::coordinated_system cs;
  auto a = joined_agent(cs);
  auto agent = caf::actor_cast<node_agent_actor>(a.agent);
  std::vector<std::string> answers;
  auto stage = [&](int64_t as, int64_t holds) {
    cs.track(cs.sys().spawn(
        [&answers, agent, c = whole_chunk(as, holds)](caf::event_based_actor* s) mutable {
          s->request(agent, caf::infinite, stage_atom::value, std::move(c))
              .then([&answers](int64_t) { answers.push_back("ok"); },
                    [&answers](caf::error& e) { answers.push_back(caf::to_string(e)); });
        }));
    cs.sched().run();
  };
  stage(2, 2);
  stage(3, 1);
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[0], "ok");
  EXPECT_NE(answers[1].find("the bytes of v3 hold v1"), std::string::npos) << answers[1];
  std::string launched;
  cs.track(cs.sys().spawn([&launched, agent](caf::event_based_actor* s) {
    s->request(agent, caf::infinite, launch_atom::value, int64_t{2})
        .then([&launched](std::vector<caf::actor>&) { launched = "ok"; },
              [&launched](caf::error& e) { launched = caf::to_string(e); });
  }));
  cs.sched().run();
  EXPECT_EQ(launched, "ok");
}

}  // namespace
