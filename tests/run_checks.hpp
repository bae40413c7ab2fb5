#pragma once

// Checks shared by the tests of whole runs.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

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

/// The steps (metrics.jsonl lines) after `from_step` whose update changed the weights
/// (grad_norm > 0). Two runs that end with equal weights prove something only if this is not 0:
/// with all-zero advantages (a reward nobody earns) every run ends where it started.
inline int64_t steps_that_updated(const std::vector<std::string>& metrics, int64_t from_step = 0) {
  int64_t n = 0;
  for (auto& line : metrics) {
    auto m = nlohmann::json::parse(line);
    n += m["step"].get<int64_t>() > from_step && m["grad_norm"].get<double>() > 0;
  }
  return n;
}

}  // namespace asyncrl::test
