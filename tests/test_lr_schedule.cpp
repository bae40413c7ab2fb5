// Learning-rate schedules against hand-computed values.

#include <gtest/gtest.h>

#include <cmath>

#include "runtime/train/lr_schedule.hpp"

using asyncrl::lr_schedule;
using asyncrl::lr_schedule_kind;

TEST(LrSchedule, Constant) {
  lr_schedule s{lr_schedule_kind::constant, 0.01, 5, 100, 0.1};
  EXPECT_EQ(s.at(0), 0.01);
  EXPECT_EQ(s.at(99), 0.01);
}

TEST(LrSchedule, LinearWarmupThenConstant) {
  lr_schedule s{lr_schedule_kind::warmup, 1.0, 4, 100, 0.0};
  EXPECT_DOUBLE_EQ(s.at(0), 0.25);
  EXPECT_DOUBLE_EQ(s.at(3), 1.0);
  EXPECT_DOUBLE_EQ(s.at(50), 1.0);
}

TEST(LrSchedule, CosineFromPeakToFloor) {
  lr_schedule s{lr_schedule_kind::cosine, 2.0, 10, 110, 0.1};
  EXPECT_DOUBLE_EQ(s.at(4), 1.0);   // warmup 5/10 of peak
  EXPECT_DOUBLE_EQ(s.at(10), 2.0);  // cosine starts at the peak
  // Halfway through the decay: floor + (peak - floor) / 2 = 0.2 + 0.9.
  EXPECT_NEAR(s.at(60), 1.1, 1e-12);
  EXPECT_NEAR(s.at(110), 0.2, 1e-12);
  EXPECT_NEAR(s.at(500), 0.2, 1e-12);  // clamped after the end
}
