#pragma once

// Checks shared by the tests of whole runs.

#include <gtest/gtest.h>

#include "messages/run_result.hpp"

namespace asyncrl::test {

/// Every generated group is trained, dropped or still in flight, every hop agrees, and the run
/// trained something.
inline void expect_nothing_lost(const run_result& r) {
  EXPECT_EQ(r.groups_generated, r.groups_trained + r.groups_dropped + r.groups_in_flight)
      << "generated " << r.groups_generated << " trained " << r.groups_trained << " dropped "
      << r.groups_dropped << " in flight " << r.groups_in_flight;
  EXPECT_EQ(r.reward.received, r.groups_generated);  // rollouters -> reward
  EXPECT_EQ(r.reward.forwarded, r.queue.received);   // reward -> queue
  EXPECT_EQ(r.queue.delivered, r.trainer.received);  // queue -> trainer
  EXPECT_GT(r.groups_trained + r.groups_filtered, 0);
}

}  // namespace asyncrl::test
