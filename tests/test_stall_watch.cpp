// The progress watchdog's rule (runtime/common/stall_watch): how many quiet ticks stall a run,
// what resets the count, and the tick's period.

#include <gtest/gtest.h>

#include "runtime/common/stall_watch.hpp"

using asyncrl::stall_watch;

namespace {

// Ticks `n` times; the number of ticks that reported a stall.
int stalls_in(stall_watch& w, int n, bool paused = false) {
  int stalls = 0;
  for (int i = 0; i < n; ++i)
    stalls += w.on_tick(paused) ? 1 : 0;
  return stalls;
}

}  // namespace

// Fails if: the fourth quiet tick does not stall (an off-by-one in the count, `>` for `>=`), or
// an earlier one does. The first tick only records the step it saw.
TEST(StallWatch, TheFourthQuietTickAfterTheFirstStalls) {
  stall_watch w(10.0);
  EXPECT_FALSE(w.on_tick(false));  // sees step 0 for the first time
  EXPECT_EQ(stalls_in(w, 3), 0);
  EXPECT_TRUE(w.on_tick(false));
}

// Fails if: a completed step does not reset the quiet ticks (a slow but live run would fail).
TEST(StallWatch, ACompletedStepResetsTheCount) {
  stall_watch w(10.0);
  EXPECT_EQ(stalls_in(w, 4), 0);  // the first tick, then 3 quiet ones
  w.step_done(1);
  EXPECT_FALSE(w.on_tick(false));  // a new step: the count starts over
  EXPECT_EQ(stalls_in(w, 3), 0);
  EXPECT_TRUE(w.on_tick(false));
  EXPECT_EQ(w.last_step(), 1);
}

// Fails if: a paused run (the console's pause holds admission, so no step is expected) counts
// towards a stall, or the count does not start over after the pause.
TEST(StallWatch, APausedRunNeverStalls) {
  stall_watch w(10.0);
  EXPECT_EQ(stalls_in(w, 3), 0);
  EXPECT_EQ(stalls_in(w, 20, /*paused=*/true), 0);
  EXPECT_EQ(stalls_in(w, 3), 0);  // resumed: three quiet ticks are not yet a stall
  EXPECT_TRUE(w.on_tick(false));
}

// Fails if: the period is not a quarter of the timeout (four ticks would not span it), a short
// timeout rounds to a 0 ms tick (a busy loop), or set_timeout misreports whether it was off
// (the console re-arms the ticks only when it was).
TEST(StallWatch, TicksAreAQuarterOfTheTimeoutAndSetTimeoutSaysIfItWasOff) {
  stall_watch w;
  EXPECT_FALSE(w.enabled());
  EXPECT_TRUE(w.set_timeout(2.0));
  EXPECT_TRUE(w.enabled());
  EXPECT_EQ(w.tick().count(), 500);
  EXPECT_FALSE(w.set_timeout(0.001));  // on before: the caller's ticks are still armed
  EXPECT_EQ(w.tick().count(), 1);      // 0.25 ms rounds to 0: at least 1 ms
  EXPECT_FALSE(w.set_timeout(0));
  EXPECT_FALSE(w.enabled());
  EXPECT_TRUE(w.set_timeout(60));
  EXPECT_EQ(w.tick().count(), 15000);
}
