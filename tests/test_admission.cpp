// admission_control: verl's staleness window, AReaL's eta capacity and the queue bound, checked
// against hand-derived numbers and a long seeded random sequence against a shadow model.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/scheduling/admission.hpp"

namespace asyncrl {
namespace {

admission_params make_params(int64_t window, double s, int64_t batch, int64_t eta,
                             int64_t capacity) {
  admission_params p;
  p.window = window;
  p.staleness_threshold = s;
  p.consumer_batch = batch;
  p.max_staleness = eta;
  p.capacity = capacity;
  return p;
}

// Moves `n` running groups into the queue.
void put(admission_control& a, int n) {
  for (int i = 0; i < n; ++i)
    a.on_put();
}

// Delivers `n` queued groups to the trainer.
void deliver(admission_control& a, int n) {
  for (int i = 0; i < n; ++i)
    a.on_delivered();
}

TEST(Admission, WindowBudgetIsFloorOfOnePlusSTimesWindow) {
  // k * R = 4, s = 0.5: floor(1.5 * 4) = 6 per window; eta off, capacity not binding.
  admission_control a{make_params(4, 0.5, 1, -1, 100)};
  EXPECT_EQ(a.window_budget(), 6);
  EXPECT_EQ(a.carried(), 0);
  EXPECT_EQ(a.grant(10), 6);
  EXPECT_EQ(a.last_limit(), "window");
  EXPECT_EQ(a.running(), 6);
  EXPECT_EQ(a.admitted_in_window(), 6);
  EXPECT_EQ(a.grant(1), 0);
  EXPECT_EQ(a.last_limit(), "window");
  EXPECT_EQ(a.running(), 6);
}

TEST(Admission, SyncChargesTheNewWindowWithCarriedGroups) {
  admission_control a{make_params(4, 0.5, 1, -1, 100)};
  ASSERT_EQ(a.grant(6), 6);
  put(a, 3);         // running 3, queued 3
  deliver(a, 2);     // queued 1
  a.on_abandoned();  // running 2
  ASSERT_EQ(a.running(), 2);
  ASSERT_EQ(a.queued(), 1);
  a.on_sync();
  EXPECT_EQ(a.carried(), 3);
  EXPECT_EQ(a.admitted_in_window(), 0);
  EXPECT_EQ(a.window_budget(), 6 - 3);
  EXPECT_EQ(a.grant(5), 3);
  EXPECT_EQ(a.last_limit(), "window");
  EXPECT_EQ(a.admitted_in_window(), 3);
  EXPECT_EQ(a.running(), 5);
  // The budget stays fixed within a window, however the counters move.
  put(a, 5);
  deliver(a, 6);
  EXPECT_EQ(a.window_budget(), 3);
  EXPECT_EQ(a.grant(1), 0);
  // Nothing in flight at the next sync: the full budget again.
  a.on_sync();
  EXPECT_EQ(a.carried(), 0);
  EXPECT_EQ(a.window_budget(), 6);
  EXPECT_EQ(a.grant(6), 6);
  EXPECT_EQ(a.last_limit(), "");
}

TEST(Admission, ZeroStalenessAllowsExactlyOneWindow) {
  admission_control a{make_params(4, 0.0, 1, -1, 100)};
  EXPECT_EQ(a.window_budget(), 4);
  EXPECT_EQ(a.grant(4), 4);
  EXPECT_EQ(a.last_limit(), "");  // asked for exactly the budget: not limited
  a.on_put();                     // running 3, queued 1
  a.on_sync();
  EXPECT_EQ(a.carried(), 4);
  EXPECT_EQ(a.window_budget(), 0);
  EXPECT_EQ(a.grant(1), 0);
  EXPECT_EQ(a.last_limit(), "window");
  // Finishing the carried groups does not reopen this window; the next sync does.
  put(a, 3);
  deliver(a, 4);
  EXPECT_EQ(a.grant(1), 0);
  a.on_sync();
  EXPECT_EQ(a.carried(), 0);
  EXPECT_EQ(a.window_budget(), 4);
  EXPECT_EQ(a.grant(3), 3);
  a.on_sync();  // 3 running carried: 4 - 3 = 1
  EXPECT_EQ(a.window_budget(), 1);
  EXPECT_EQ(a.grant(2), 1);
}

TEST(Admission, WindowBudgetRoundsDownWithoutFloatingPointLoss) {
  EXPECT_EQ(admission_control{make_params(3, 0.5, 1, -1, 100)}.window_budget(), 4);  // 4.5
  EXPECT_EQ(admission_control{make_params(10, 0.1, 1, -1, 100)}.window_budget(), 11);
  // (1 + 0.15) * 20 is 22.999999999999996 in double; it means 23.
  EXPECT_EQ(admission_control{make_params(20, 0.15, 1, -1, 100)}.window_budget(), 23);
  EXPECT_EQ(admission_control{make_params(7, 2.0, 1, -1, 100)}.window_budget(), 21);
}

TEST(Admission, EtaCapacityFollowsTrainerVersion) {
  // eta = 1, B = 2, v = 0: (1 + 0 + 1) * 2 - (accepted + running) = 4.
  admission_control a{make_params(1000, 0.0, 2, 1, 1000)};
  EXPECT_EQ(a.grant(10), 4);
  EXPECT_EQ(a.last_limit(), "eta");
  put(a, 2);  // accepted 2, running 2: still 4 - 4 = 0
  EXPECT_EQ(a.accepted(), 2);
  EXPECT_EQ(a.grant(1), 0);
  EXPECT_EQ(a.last_limit(), "eta");
  deliver(a, 2);  // delivery does not un-accept
  EXPECT_EQ(a.accepted(), 2);
  EXPECT_EQ(a.grant(1), 0);
  a.on_trainer_version(1);  // 6 - (2 + 2) = 2
  EXPECT_EQ(a.grant(5), 2);
  EXPECT_EQ(a.last_limit(), "eta");
  a.on_trainer_version(0);  // an older version never lowers v
  EXPECT_EQ(a.grant(1), 0);
  a.on_trainer_version(3);  // (1 + 3 + 1) * 2 - (2 + 4) = 4
  EXPECT_EQ(a.grant(3), 3);
  EXPECT_EQ(a.last_limit(), "");
  EXPECT_EQ(a.grant(3), 1);
  EXPECT_EQ(a.last_limit(), "eta");
  EXPECT_EQ(a.accepted() + a.running(), 10);
}

TEST(Admission, EtaZeroAndAbandonedGroups) {
  // eta = 0, B = 3: one batch ahead at most.
  admission_control a{make_params(1000, 0.0, 3, 0, 1000)};
  EXPECT_EQ(a.grant(5), 3);
  EXPECT_EQ(a.last_limit(), "eta");
  a.on_abandoned();  // never accepted: frees its slot
  EXPECT_EQ(a.running(), 2);
  EXPECT_EQ(a.accepted(), 0);
  EXPECT_EQ(a.grant(5), 1);
}

TEST(Admission, NegativeEtaDisablesTheCapacityRule) {
  admission_control a{make_params(1000, 0.0, 1, -1, 1000)};
  EXPECT_EQ(a.grant(500), 500);
  EXPECT_EQ(a.last_limit(), "");
  put(a, 500);
  EXPECT_EQ(a.grant(500), 500);
  EXPECT_EQ(a.last_limit(), "");
  EXPECT_EQ(a.accepted() + a.running(), 1000);
}

TEST(Admission, QueueCapacityBoundsRunningPlusQueued) {
  admission_control a{make_params(100, 0.0, 1, -1, 5)};
  EXPECT_EQ(a.grant(3), 3);
  EXPECT_EQ(a.grant(3), 2);
  EXPECT_EQ(a.last_limit(), "capacity");
  put(a, 2);  // running 3, queued 2: still full
  EXPECT_EQ(a.grant(1), 0);
  EXPECT_EQ(a.last_limit(), "capacity");
  a.on_delivered();  // 4 in use
  EXPECT_EQ(a.grant(4), 1);
  EXPECT_EQ(a.last_limit(), "capacity");
  a.on_dropped();    // 4 in use
  a.on_abandoned();  // 3 in use
  EXPECT_EQ(a.running(), 3);
  EXPECT_EQ(a.queued(), 0);
  EXPECT_EQ(a.grant(2), 2);
  EXPECT_EQ(a.last_limit(), "");
  EXPECT_EQ(a.running() + a.queued(), 5);
}

TEST(Admission, LastLimitNamesTheTightestRule) {
  admission_control cap{make_params(4, 0.0, 1, -1, 2)};  // window 4, capacity 2
  EXPECT_EQ(cap.grant(10), 2);
  EXPECT_EQ(cap.last_limit(), "capacity");
  admission_control win{make_params(2, 0.0, 1, -1, 4)};  // window 2, capacity 4
  EXPECT_EQ(win.grant(10), 2);
  EXPECT_EQ(win.last_limit(), "window");
  admission_control eta{make_params(10, 0.0, 3, 0, 5)};  // window 10, eta 3, capacity 5
  EXPECT_EQ(eta.grant(10), 3);
  EXPECT_EQ(eta.last_limit(), "eta");
  // A limited grant followed by an unlimited one clears the reason.
  EXPECT_EQ(cap.grant(0), 0);
  EXPECT_EQ(cap.last_limit(), "");
  EXPECT_EQ(cap.grant(-5), 0);
  EXPECT_EQ(cap.last_limit(), "");
  EXPECT_EQ(cap.running(), 2);
}

TEST(Admission, Bookkeeping) {
  admission_control a{make_params(10, 0.0, 1, -1, 10)};
  ASSERT_EQ(a.grant(5), 5);
  a.on_put();
  EXPECT_EQ(a.running(), 4);
  EXPECT_EQ(a.queued(), 1);
  EXPECT_EQ(a.accepted(), 1);
  a.on_abandoned();
  EXPECT_EQ(a.running(), 3);
  EXPECT_EQ(a.queued(), 1);
  EXPECT_EQ(a.accepted(), 1);
  a.on_put();
  a.on_put();
  EXPECT_EQ(a.queued(), 3);
  EXPECT_EQ(a.accepted(), 3);
  a.on_delivered();
  EXPECT_EQ(a.queued(), 2);
  a.on_dropped();  // dropped groups stop counting as accepted
  EXPECT_EQ(a.queued(), 1);
  EXPECT_EQ(a.running(), 1);
  EXPECT_EQ(a.accepted(), 2);
  EXPECT_EQ(a.admitted_in_window(), 5);
  EXPECT_EQ(a.params().window, 10);
  EXPECT_EQ(a.params().capacity, 10);
}

TEST(Admission, MisuseThrowsLogicErrorAndKeepsCounters) {
  admission_control a{make_params(10, 0.0, 1, -1, 10)};
  EXPECT_THROW(a.on_put(), std::logic_error);
  EXPECT_THROW(a.on_abandoned(), std::logic_error);
  EXPECT_THROW(a.on_delivered(), std::logic_error);
  EXPECT_THROW(a.on_dropped(), std::logic_error);
  EXPECT_EQ(a.running(), 0);
  EXPECT_EQ(a.queued(), 0);
  EXPECT_EQ(a.accepted(), 0);
  ASSERT_EQ(a.grant(1), 1);
  a.on_put();
  EXPECT_THROW(a.on_put(), std::logic_error);  // the one running group is already queued
  a.on_delivered();
  EXPECT_THROW(a.on_delivered(), std::logic_error);
  EXPECT_EQ(a.running(), 0);
  EXPECT_EQ(a.queued(), 0);
  EXPECT_EQ(a.accepted(), 1);
}

TEST(Admission, ConstructorRejectsBadParameters) {
  EXPECT_THROW(admission_control{make_params(0, 0.0, 1, -1, 1)}, std::invalid_argument);
  EXPECT_THROW(admission_control{make_params(-4, 0.0, 1, -1, 1)}, std::invalid_argument);
  EXPECT_THROW(admission_control{make_params(1, 0.0, 0, -1, 1)}, std::invalid_argument);
  EXPECT_THROW(admission_control{make_params(1, 0.0, 1, -1, 0)}, std::invalid_argument);
  EXPECT_THROW(admission_control{make_params(1, -0.1, 1, -1, 1)}, std::invalid_argument);
  EXPECT_NO_THROW(admission_control{admission_params{}});
  EXPECT_NO_THROW(admission_control{make_params(1, 0.0, 1, 0, 1)});
}

// A group dropped as too stale will never be trained, so it must not keep using AReaL's
// (eta + v + 1) * B allowance; otherwise the trainer can never get the B groups of its next step.
// Sequence as the MessageQueue runs it with eta = 0, B = 1 and weights synced every 2 steps.
TEST(Admission, DroppedGroupsDoNotConsumeEtaCapacity) {
  admission_control a{make_params(1000, 0.0, 1, 0, 1000)};
  ASSERT_EQ(a.grant(1), 1);  // generated with weights v0
  a.on_put();
  a.on_delivered();  // trained: the trainer is now at v1
  a.on_trainer_version(1);
  ASSERT_EQ(a.grant(1), 1);  // still generated with v0 (no sync yet)
  a.on_put();
  a.on_dropped();  // staleness 1 - 0 > eta: dropped, the trainer still needs one group
  EXPECT_EQ(a.grant(1), 1) << "limited by '" << a.last_limit() << "': accepted=" << a.accepted()
                           << " running=" << a.running() << "; nothing can reach the trainer";
}

// splitmix64: a tiny PRNG with a fixed seed, so the sequence is the same on every machine.
struct splitmix64 {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
};

TEST(Admission, RandomSequencesKeepInvariantsAndMatchModel) {
  splitmix64 rng{0x5eed2024};
  const double thresholds[] = {0.0, 0.25, 0.5, 1.0, 1.5};
  int64_t grants = 0, limited[3] = {0, 0, 0};
  for (int config = 0; config < 60; ++config) {
    auto p = make_params(1 + rng.below(8), thresholds[rng.below(5)], 1 + rng.below(4),
                         rng.below(5) - 1, 1 + rng.below(20));
    admission_control a{p};
    // Shadow model.
    int64_t running = 0, queued = 0, accepted = 0, admitted = 0, v = 0;
    int64_t budget = a.window_budget();
    SCOPED_TRACE("config " + std::to_string(config));
    for (int op = 0; op < 2000; ++op) {
      auto r = rng.below(100);
      if (r < 35) {
        auto want = rng.below(8) - 1;
        int64_t expect = std::max<int64_t>(0, want);
        expect = std::min(expect, budget - admitted);
        if (p.max_staleness >= 0)
          expect =
              std::min(expect, (p.max_staleness + v + 1) * p.consumer_batch - (accepted + running));
        expect = std::min(expect, p.capacity - (running + queued));
        expect = std::max<int64_t>(0, expect);
        auto n = a.grant(want);
        ASSERT_EQ(n, expect) << "op " << op;
        running += n;
        admitted += n;
        ++grants;
        // Invariants after every grant.
        ASSERT_LE(a.admitted_in_window(), budget);
        ASSERT_LE(a.running() + a.queued(), p.capacity);
        if (p.max_staleness >= 0) {
          ASSERT_LE(a.accepted() + a.running(), (p.max_staleness + v + 1) * p.consumer_batch);
        }
        // The reason is empty exactly when the grant was whole, and names a rule that binds.
        const auto& why = a.last_limit();
        if (n == std::max<int64_t>(0, want)) {
          ASSERT_EQ(why, "");
        } else if (why == "window") {
          ASSERT_EQ(a.admitted_in_window(), budget);
          ++limited[0];
        } else if (why == "eta") {
          ASSERT_EQ(a.accepted() + a.running(), (p.max_staleness + v + 1) * p.consumer_batch);
          ++limited[1];
        } else {
          ASSERT_EQ(why, "capacity");
          ASSERT_EQ(a.running() + a.queued(), p.capacity);
          ++limited[2];
        }
      } else if (r < 55) {
        if (running > 0) {
          a.on_put();
          --running, ++queued, ++accepted;
        } else {
          ASSERT_THROW(a.on_put(), std::logic_error);
        }
      } else if (r < 62) {
        if (running > 0) {
          a.on_abandoned();
          --running;
        } else {
          ASSERT_THROW(a.on_abandoned(), std::logic_error);
        }
      } else if (r < 78) {
        if (queued > 0) {
          if (r % 4 == 0) {
            a.on_dropped();
            --accepted;  // a dropped group is no longer accepted
          } else {
            a.on_delivered();
          }
          --queued;
        } else {
          ASSERT_THROW(a.on_delivered(), std::logic_error);
        }
      } else if (r < 88) {
        v += rng.below(3) - 1 >= 0 ? 1 : 0;
        a.on_trainer_version(v - rng.below(3));  // stale reports must not lower v
        a.on_trainer_version(v);
      } else {
        a.on_sync();
        admitted = 0;
        ASSERT_EQ(a.carried(), running + queued);
        budget = std::max<int64_t>(
            0, static_cast<int64_t>((1.0 + p.staleness_threshold) * p.window + 1e-9) -
                   (running + queued));
        ASSERT_EQ(a.window_budget(), budget);
      }
      ASSERT_EQ(a.running(), running);
      ASSERT_EQ(a.queued(), queued);
      ASSERT_EQ(a.accepted(), accepted);
      ASSERT_EQ(a.admitted_in_window(), admitted);
    }
  }
  // The sequence exercised every rule, not just the happy path.
  EXPECT_GT(grants, 30000);
  EXPECT_GT(limited[0], 100);
  EXPECT_GT(limited[1], 100);
  EXPECT_GT(limited[2], 100);
}

// The delivery rule: staleness == eta is kept, eta + 1 dropped; eta < 0 keeps everything.
TEST(Admission, StalenessBoundKeepsEtaAndDropsEtaPlusOne) {
  EXPECT_FALSE(over_staleness_bound(5, 3, 2));
  EXPECT_TRUE(over_staleness_bound(5, 2, 2));
  EXPECT_FALSE(over_staleness_bound(5, 5, 0));
  EXPECT_TRUE(over_staleness_bound(5, 4, 0));
  EXPECT_FALSE(over_staleness_bound(100, 0, -1));
}

// Queue entries are {id, oldest version}; the trainer is at version 10 with eta = 2.
TEST(Admission, DropStaleErasesInOrderAndKeepsTheOrderOfSurvivors) {
  struct group {
    int id;
    int64_t oldest;
  };
  std::deque<group> q{{0, 8}, {1, 7}, {2, 9}, {3, 6}, {4, 10}, {5, 8}};
  std::vector<int> dropped;
  std::vector<int64_t> staleness;
  drop_stale(
      q, 10, 2, [](const group& g) { return g.oldest; },
      [&](const group& g, int64_t s) {
        dropped.push_back(g.id);
        staleness.push_back(s);
      });
  EXPECT_EQ(dropped, (std::vector<int>{1, 3}));
  EXPECT_EQ(staleness, (std::vector<int64_t>{3, 4}));
  std::vector<int> kept;
  for (auto& g : q)
    kept.push_back(g.id);
  EXPECT_EQ(kept, (std::vector<int>{0, 2, 4, 5}));
}

TEST(Admission, DropStaleWithNegativeEtaKeepsEverything) {
  std::deque<int64_t> q{0, -5, 3};
  int calls = 0;
  drop_stale(
      q, 1000, -1, [](int64_t v) { return v; }, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(q, (std::deque<int64_t>{0, -5, 3}));
}

}  // namespace
}  // namespace asyncrl

namespace asyncrl {
namespace {

// algorithm.refill: a refill is admitted beyond the window's budget, exactly once per group
// asked, and is not charged to the window (a second window would otherwise shrink by it).
TEST(Admission, RefillAdmitsBeyondTheWindowOnce) {
  admission_control a(make_params(4, 0.0, 4, -1, 100));
  EXPECT_EQ(a.grant(10), 4);
  EXPECT_EQ(a.grant(1), 0);
  EXPECT_EQ(a.last_limit(), "window");
  a.on_filtered(2, 2);
  EXPECT_EQ(a.owed(), 2);
  EXPECT_EQ(a.grant(10), 2);
  EXPECT_EQ(a.owed(), 0);
  EXPECT_EQ(a.grant(1), 0);
  EXPECT_EQ(a.admitted_in_window(), 4);
  EXPECT_THROW(a.on_filtered(-1, 0), std::invalid_argument);
  EXPECT_THROW(a.on_filtered(1, 2), std::invalid_argument);
}

// A refill asked just before a sync is still owed after it: the step that asked waits for it
// while the next window opens (forgetting it would deadlock the step and the sync).
TEST(Admission, RefillOwedSurvivesASync) {
  admission_control a(make_params(4, 0.0, 4, -1, 100));
  EXPECT_EQ(a.grant(4), 4);
  put(a, 4);
  deliver(a, 4);
  a.on_filtered(1, 1);
  a.on_sync();
  EXPECT_EQ(a.grant(10), 5);  // the new window's 4 and the refill
  EXPECT_EQ(a.admitted_in_window(), 4);
}

// A filtered group gives its AReaL capacity back: with eta = 0 and B = 2, a refill of a
// filtered group must fit, or the step that waits for it would hang.
TEST(Admission, RefillFreesTheFilteredGroupsEtaCapacity) {
  admission_control a(make_params(100, 0.0, 2, 0, 100));
  EXPECT_EQ(a.grant(10), 2);  // (eta + v + 1) * B = 2
  put(a, 2);
  deliver(a, 2);
  EXPECT_EQ(a.grant(1), 0);
  EXPECT_EQ(a.last_limit(), "eta");
  a.on_filtered(1, 1);
  EXPECT_EQ(a.accepted(), 1);
  EXPECT_EQ(a.grant(10), 1);
  EXPECT_EQ(a.grant(1), 0);
  // Without a replacement (refill off, or its rounds spent) the capacity still comes back.
  admission_control b(make_params(100, 0.0, 2, 0, 100));
  EXPECT_EQ(b.grant(10), 2);
  put(b, 2);
  deliver(b, 2);
  b.on_filtered(1, 0);
  EXPECT_EQ(b.owed(), 0);
  EXPECT_EQ(b.grant(10), 1);
}

// stale_policy wait. A group begun under policy `start` is at its last chance at trainer version
// v when at v + 1 it would be over eta: v + 1 - start > eta. Catches the bound taken at v (one
// version late: the group is already lost at v + 1) or at v - 1 (the trainer waits a step early).
TEST(Admission, LastChanceIsTheLastVersionWithinEta) {
  EXPECT_TRUE(last_chance(5, 3, 2));   // 6 - 3 = 3 > 2
  EXPECT_FALSE(last_chance(5, 4, 2));  // 6 - 4 = 2: still fine at 6
  EXPECT_FALSE(last_chance(4, 3, 2));
  EXPECT_TRUE(last_chance(0, 0, 0));    // eta 0: every group must go in the step it began at
  EXPECT_FALSE(last_chance(9, 0, -1));  // eta off
}

// A pull of at most `max` keeps one place per running group at its last chance, takes queued
// ones at their last chance first, and fills the rest with younger groups.
TEST(Admission, DeliverableKeepsAPlaceForEachGroupAtItsLastChance) {
  // max, old queued, young queued, old running -> groups the pull may take now
  EXPECT_EQ(deliverable_keeping_bound(4, 0, 3, 2), 2);  // 2 places kept
  EXPECT_EQ(deliverable_keeping_bound(4, 1, 5, 1), 3);  // 1 old + 2 young, 1 kept
  EXPECT_EQ(deliverable_keeping_bound(4, 0, 3, 0), 3);  // nothing old: as many as there are
  EXPECT_EQ(deliverable_keeping_bound(1, 0, 3, 1), 0);  // the last place is kept: wait
  EXPECT_EQ(deliverable_keeping_bound(2, 0, 3, 3), 0);  // more old running than places: wait
  EXPECT_EQ(deliverable_keeping_bound(4, 6, 2, 1), 4);  // more old queued than places: max
  EXPECT_EQ(deliverable_keeping_bound(4, 2, 0, 1), 2);  // the old queued do not wait
}

}  // namespace
}  // namespace asyncrl
