// The controller's roster (actors/rollouter_roster): incarnations, fencing, retirement, progress
// of the living and the dead, and placement. Real (fake) rollouter actors, so that every
// incarnation has an address of its own; no message is sent.

#include <gtest/gtest.h>

#include <caf/all.hpp>

#include "actors/rollouter_roster.hpp"
#include "tests/actor_harness.hpp"
#include "tests/role_fakes.hpp"

using namespace asyncrl;

namespace {

rollout_progress roster_progress(int32_t w, int64_t tokens, double busy_ms) {
  rollout_progress p;
  p.worker = w;
  p.tokens_generated = tokens;
  p.busy_ms = busy_ms;
  return p;
}

caf::actor_addr addr_of(const rollouter_actor& r) {
  return caf::actor_cast<caf::actor_addr>(r);
}

TEST(RolloutRoster, IncarnationsMapToTheirWorkerAndARemovedOneIsFenced) {
  // Fails if: an incarnation maps to the wrong worker (a swapped pair); a respawned worker's
  // old incarnation still counts as live or is fenced (a crash is not a loss: its messages were
  // handled before its exit); a removed one is not fenced or stays live.
  test::coordinated_system cs;
  rollouter_roster roster;
  auto a = test::fake_rollouter(cs, {});
  auto b = test::fake_rollouter(cs, {});
  roster.enlist(0, a);
  roster.enlist(1, b);
  EXPECT_EQ(roster.worker_of(addr_of(a)), 0);
  EXPECT_EQ(roster.worker_of(addr_of(b)), 1);
  EXPECT_EQ(roster.size(), 2u);

  // Worker 0 crashed: its exit is handled (forget), a new incarnation takes its id.
  roster.forget(addr_of(a));
  auto a2 = test::fake_rollouter(cs, {});
  roster.enlist(0, a2);
  EXPECT_FALSE(roster.worker_of(addr_of(a)).has_value());
  EXPECT_EQ(roster.worker_of(addr_of(a2)), 0);
  EXPECT_FALSE(roster.fenced(addr_of(a)));
  EXPECT_EQ(roster.live().at(0), a2);

  // Worker 1 is lost: fenced, no longer live, unknown as a worker.
  auto gone = roster.remove(1);
  ASSERT_TRUE(gone.has_value());
  EXPECT_EQ(*gone, b);
  EXPECT_TRUE(roster.fenced(addr_of(b)));
  EXPECT_FALSE(roster.has(1));
  EXPECT_FALSE(roster.worker_of(addr_of(b)).has_value());
  EXPECT_FALSE(roster.remove(1).has_value()) << "a second removal must find nothing";
  EXPECT_FALSE(roster.retired(1)) << "a lost local rollouter is restarted";
  EXPECT_FALSE(roster.gone_for_good(1));
  roster.retire(0);
  EXPECT_TRUE(roster.gone_for_good(0));
}

TEST(RolloutRoster, TheDeadKeepTheirTokensButLeaveTheLiveView) {
  // Fails if: a buried incarnation's tokens are lost from the run's total, counted twice (in
  // the live view and the dead), or a report after its burial is not counted on top; the busy
  // time of the dead stays in the live view; the groups of the dead are not added up.
  rollouter_roster roster;
  roster.report(roster_progress(0, 100, 5.0));
  roster.report(roster_progress(1, 40, 2.0));
  roster.report(roster_progress(0, 120, 6.0));  // a newer report replaces the older
  EXPECT_EQ(roster.tokens_generated(), 160);
  auto dead = roster.bury(0);
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(dead->tokens_generated, 120);
  EXPECT_EQ(roster.tokens_generated(), 160);
  EXPECT_EQ(roster.dead_tokens(), 120);
  EXPECT_EQ(roster.busy_ms().count(0), 0u);
  roster.report(roster_progress(0, 7, 1.0));  // its new incarnation starts from zero
  EXPECT_EQ(roster.tokens_generated(), 167);
  EXPECT_FALSE(roster.bury(5).has_value());
  roster.add_dead_groups(3);
  roster.add_dead_groups(2);
  EXPECT_EQ(roster.dead_groups(), 5);
}

TEST(RolloutRoster, LocalRollouterDevicesFollowTheListRemoteOnesAreTheirProcesss) {
  // Fails if: rollouter w is not on rollout.devices[w mod n] (an off-by-one, or the list
  // ignored for rollout.device); a remote rollouter claims a device of this machine; the ranks'
  // devices are reordered.
  rollouter_params rp;
  rp.device = "cpu";
  rp.devices = {"cuda:2", "cuda:3"};
  rollouter_roster roster(rp, {"cuda:0", "cuda:1"});
  EXPECT_EQ(roster.device(0), "cuda:2");
  EXPECT_EQ(roster.device(1), "cuda:3");
  EXPECT_EQ(roster.device(4), "cuda:2");
  EXPECT_EQ(roster.rank_devices(), (std::vector<std::string>{"cuda:0", "cuda:1"}));
  test::coordinated_system cs;
  auto agent = cs.sys().spawn([](caf::event_based_actor*) { return caf::behavior{[](int) {}}; });
  cs.track(agent);
  roster.nodes().start_ids_at(2);
  const auto first = roster.nodes().take_ids(1);
  roster.nodes().add(caf::actor_cast<caf::actor_addr>(agent), agent, "box", 7);
  roster.nodes().host(caf::actor_cast<caf::actor_addr>(agent), first);
  EXPECT_EQ(roster.device(first), "");
  EXPECT_EQ(roster.where(first), "box (pid 7)");
  EXPECT_TRUE(roster.gone_for_good(first));

  rp.devices.clear();
  rollouter_roster single(rp, {"cpu"});
  EXPECT_EQ(single.device(3), "cpu");
}

}  // namespace
