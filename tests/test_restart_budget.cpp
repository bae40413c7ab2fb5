// The restart intensity shared by the Reward and the controller (runtime/common/restart_budget).

#include <gtest/gtest.h>

#include "runtime/common/restart_budget.hpp"

namespace asyncrl {
namespace {

using namespace std::chrono_literals;
const restart_budget::time_point t0{};

// max 2 in 10 s: the third restart within the window fails (a >= for > would fail the second).
TEST(RestartBudget, MoreThanMaxWithinTheWindowFails) {
  restart_budget b(2, 10);
  EXPECT_TRUE(b.spend(t0));
  EXPECT_TRUE(b.spend(t0 + 1s));
  EXPECT_FALSE(b.spend(t0 + 2s));
  EXPECT_EQ(b.in_window(), 3);
}

// Restarts older than the window no longer count; one exactly `window` old still does.
TEST(RestartBudget, OldRestartsLeaveTheWindowAtItsEdge) {
  restart_budget b(2, 10);
  EXPECT_TRUE(b.spend(t0));
  EXPECT_TRUE(b.spend(t0 + 5s));
  EXPECT_FALSE(b.spend(t0 + 10s));  // t0 is exactly 10 s old: still in
  restart_budget c(2, 10);
  EXPECT_TRUE(c.spend(t0));
  EXPECT_TRUE(c.spend(t0 + 5s));
  EXPECT_TRUE(c.spend(t0 + 10s + 1ms));  // t0 has left
  EXPECT_EQ(c.in_window(), 2);
  EXPECT_TRUE(c.spend(t0 + 30s));  // both earlier ones have left
  EXPECT_EQ(c.in_window(), 1);
}

TEST(RestartBudget, ZeroRestartsFailsAtTheFirst) {
  restart_budget b(0, 60);
  EXPECT_FALSE(b.spend(t0));
}

}  // namespace
}  // namespace asyncrl
