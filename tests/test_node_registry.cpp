// The controller's record of worker nodes (actors/node_registry): ids never reused, who hosts
// which rollouter, and what a lost node leaves behind.

#include <gtest/gtest.h>

#include <caf/all.hpp>

#include "actors/node_registry.hpp"
#include "tests/actor_harness.hpp"

namespace asyncrl {
namespace {

struct NodeRegistry : ::testing::Test {
  test::coordinated_system cs;
  caf::actor agent(caf::actor_system& sys) {
    return cs.track(
        sys.spawn([](caf::event_based_actor*) -> caf::behavior { return {[](int32_t) {}}; }));
  }
  caf::actor_addr addr(const caf::actor& a) { return caf::actor_cast<caf::actor_addr>(a); }
};

// Ids continue after the local rollouters and are never handed out twice, also across a node
// that left (a reused id would merge two rollouters' records).
TEST_F(NodeRegistry, IdsAreConsecutiveAndNeverReused) {
  node_registry r;
  r.start_ids_at(2);
  EXPECT_EQ(r.take_ids(3), 2);
  auto a = agent(cs.sys());
  r.add(addr(a), a, "h", 1);
  r.remove(addr(a));
  EXPECT_EQ(r.take_ids(1), 5);
  EXPECT_EQ(r.take_ids(2), 6);
}

// A node's rollouters are placed, leave one by one, and a remote one is never taken for local,
// even after its node is gone (the controller must not restart it here).
TEST_F(NodeRegistry, TracksWhereEachRollouterRunsAndWhatALostNodeHeld) {
  node_registry r;
  auto a = agent(cs.sys()), b = agent(cs.sys());
  r.add(addr(a), a, "alpha", 11);
  r.add(addr(b), b, "beta", 22);
  r.host(addr(a), 1);
  r.host(addr(a), 2);
  r.host(addr(b), 3);
  EXPECT_EQ(r.where(1), "alpha (pid 11)");
  EXPECT_EQ(r.where(3), "beta (pid 22)");
  EXPECT_EQ(r.where(0), "local");
  EXPECT_FALSE(r.is_remote(0));
  r.leave(1);
  auto gone = r.remove(addr(a));
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->workers, (std::vector<int32_t>{2}));
  EXPECT_EQ(gone->host, "alpha");
  EXPECT_FALSE(r.remove(addr(a)));  // a second loss of the same node is nothing
  EXPECT_FALSE(r.is_node(addr(a)));
  EXPECT_TRUE(r.is_node(addr(b)));
  EXPECT_TRUE(r.is_remote(2));     // still remote: never restarted locally
  EXPECT_EQ(r.where(2), "local");  // its node is gone: nowhere to name
  auto all = r.take_all();
  EXPECT_EQ(all.size(), 1u);
  EXPECT_FALSE(r.is_node(addr(b)));
}

}  // namespace
}  // namespace asyncrl
