// The discrete-event simulator: a hand-computed timeline, and the scheduling invariants it
// shares with the actors.

#include <gtest/gtest.h>

#include "runtime/config/params.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/scheduling/simulator.hpp"

using namespace asyncrl;

namespace {

sim_params small(const std::vector<std::string>& overrides) {
  std::vector<std::string> all{"data.train_batch_size=2",
                               "rollout.n=2",
                               "rollout.max_batch=8",
                               "rollout.chunk_tokens=1",
                               "workload.lengths=fixed",
                               "workload.median=5",
                               "trainer.total_steps=2",
                               "simulate.decode_base_ms=1",
                               "simulate.decode_per_seq_ms=0.5",
                               "simulate.prefill_per_token_ms=0.1",
                               "simulate.prompt_tokens=10",
                               "simulate.train_per_token_ms=0.01",
                               "simulate.train_step_ms=3",
                               "simulate.sync_ms=2",
                               "simulate.reward_ms=0.25",
                               "simulate.warmup_steps=1"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return sim_params_from(load_config("", all)->cfg);
}

// Decoupled sync, 1 rollout + 1 train device, 2 prompts x 2 responses of 5 tokens, all in the
// KV cache at once:
//   prefill 2 groups x 10 tokens x 0.1 = 2; 5 decode steps x (1 + 0.5 x 4 active) = 15
//   -> generated at 17, scored at 17.25; training 2 x 10 tokens x 0.01 + 3 (step) = 3.2
//   -> step 1 ends at 20.45. Then sync 2 and the same again: step 2 ends at 42.9.
TEST(Simulator, HandComputedTimeline) {
  auto p = small({"async_training.mode=sync", "async_training.colocate=false"});
  auto r = simulate(p);
  ASSERT_EQ(r.steps.size(), 2u);
  EXPECT_NEAR(r.steps[0].end_ms, 20.45, 1e-9);
  EXPECT_NEAR(r.steps[0].trainer_idle_ms, 17.25, 1e-9);
  EXPECT_NEAR(r.steps[1].end_ms, 42.9, 1e-9);
  EXPECT_NEAR(r.mean_step_ms, 22.45, 1e-9);  // step 2 only (one warm-up step)
  EXPECT_EQ(r.steps[0].tokens, 20);
  EXPECT_EQ(r.syncs, 1);
  // Periodic on this workload is the same timeline: both groups finish together, so there is
  // nothing to overlap.
  auto q = simulate(small({"async_training.mode=periodic"}));
  EXPECT_NEAR(q.steps[1].end_ms, 42.9, 1e-9);
}

TEST(Simulator, ColocatedSyncUsesEveryDeviceForBothPhases) {
  // 2 devices with room for one group each: each generates one group
  // (prefill 1 + 5 x (1 + 0.5 x 2) = 11), and training runs 2x faster with ideal scaling:
  // 20 tokens x 0.01 / 2 + 3 = 3.1. (With room for the whole batch, the first device's credit
  // request would take it all, as the real rollouters' requests do.)
  auto p = small({"async_training.mode=sync", "async_training.colocate=true", "simulate.devices=2",
                  "rollout.max_batch=2"});
  EXPECT_TRUE(p.colocated);
  EXPECT_EQ(p.rollout_devices, 2);
  EXPECT_EQ(p.train_devices, 2);
  auto r = simulate(p);
  EXPECT_NEAR(r.steps[0].end_ms, 11 + 0.25 + 3.1, 1e-9);
}

TEST(Simulator, FullyAsyncRespectsEtaAndPartialRolloutsMixVersions) {
  auto p = small({"async_training.mode=fully_async", "async_training.staleness_threshold=1",
                  "async_training.partial_rollout=true", "async_training.max_staleness=1",
                  "trainer.ppo_mini_batch_size=1", "trainer.total_steps=40",
                  "workload.lengths=lognormal", "workload.median=8", "workload.sigma=1",
                  "workload.max=64", "rollout.max_new_tokens=64", "rollout.max_batch=4"});
  auto r = simulate(p);
  ASSERT_EQ(r.steps.size(), 40u);
  int64_t span = 0;
  int64_t stale = 0;
  for (auto& s : r.steps) {
    EXPECT_LE(s.staleness_max, 1);
    span = std::max(span, s.max_partial_span);
    stale += s.stale_samples;
  }
  EXPECT_GT(r.interruptions, 0);
  EXPECT_GE(span, 1);
  EXPECT_GT(stale, 0);
  // Deterministic: the same inputs give the same timeline.
  auto again = simulate(p);
  EXPECT_EQ(again.total_ms, r.total_ms);
  EXPECT_EQ(again.interruptions, r.interruptions);
}

// The staleness drop's length bias, and stale_policy wait without it, on the same long-tailed
// workload: drop loses groups, and the trained responses are shorter than the generated ones;
// wait loses none, keeps eta in every step, and trains what was generated.
TEST(Simulator, StalePolicyWaitRemovesTheLengthBiasOfDrop) {
  const std::vector<std::string> base{"async_training.mode=fully_async",
                                      "async_training.staleness_threshold=1",
                                      "async_training.partial_rollout=true",
                                      "async_training.max_staleness=1",
                                      "trainer.ppo_mini_batch_size=1",
                                      "trainer.total_steps=200",
                                      "workload.lengths=lognormal",
                                      "workload.median=8",
                                      "workload.sigma=1",
                                      "workload.max=64",
                                      "rollout.max_new_tokens=64",
                                      "rollout.max_batch=4"};
  auto with = [&](const char* policy) {
    auto o = base;
    o.push_back(std::string("async_training.stale_policy=") + policy);
    return simulate(small(o));
  };
  auto drop = with("drop");
  ASSERT_GT(drop.groups_dropped, 0) << "nothing over eta: the workload does not exercise it";
  EXPECT_LT(drop.len_trained, 0.9 * drop.len_generated);
  auto wait = with("wait");
  EXPECT_EQ(wait.groups_dropped, 0);
  EXPECT_GT(wait.stale_waits, 0);
  for (auto& s : wait.steps)
    EXPECT_LE(s.staleness_max, 1);
  EXPECT_NEAR(wait.len_trained / wait.len_generated, 1.0, 0.05);
}

TEST(Simulator, OnPolicyModesNeverTrainStale) {
  for (auto mode : {"sync", "periodic"}) {
    auto r = simulate(small({std::string("async_training.mode=") + mode, "trainer.total_steps=6",
                             "workload.lengths=lognormal", "workload.sigma=1", "workload.max=40",
                             "rollout.max_new_tokens=40"}));
    for (auto& s : r.steps)
      EXPECT_EQ(s.staleness_max, 0) << mode;
  }
}

TEST(Simulator, PeriodicOverlapsWhenGroupsFinishAtDifferentTimes) {
  // One group in flight at a time (2 slots): training on a group overlaps generation of the
  // next, so periodic beats decoupled sync on the same devices.
  std::vector<std::string> common{"data.train_batch_size=8", "rollout.max_batch=2",
                                  "simulate.train_per_token_ms=0.5", "trainer.total_steps=4"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), common.begin(), common.end());
    return simulate(small(extra)).mean_step_ms;
  };
  double sync = with({"async_training.mode=sync", "async_training.colocate=false"});
  double periodic = with({"async_training.mode=periodic"});
  EXPECT_LT(periodic, 0.8 * sync);
}

}  // namespace

TEST(Simulator, TrainerPaysForPaddingToTheLongestResponseInAMicroBatch) {
  // One step of 2 groups x 2 responses with long-tailed lengths; only training costs
  // (1 ms per padded token). Busy time = step time - trainer idle time.
  std::vector<std::string> o{"async_training.mode=sync",   "async_training.colocate=false",
                             "trainer.total_steps=1",      "simulate.warmup_steps=0",
                             "workload.lengths=lognormal", "workload.median=8",
                             "workload.sigma=1",           "workload.max=64",
                             "rollout.max_new_tokens=64",  "simulate.train_per_token_ms=1",
                             "simulate.train_step_ms=0",   "trainer.micro_batch_size=4",
                             "trainer.padding_free=false"};
  workload_section w;
  w.lengths = workload_lengths::lognormal;
  w.median = 8;
  w.sigma = 1;
  w.max = 64;
  int32_t len[2][2];
  for (uint32_t g = 0; g < 2; ++g)
    for (uint32_t k = 0; k < 2; ++k)
      len[g][k] = workload_length(w, 1, g, k);
  const double g0 = std::max(len[0][0], len[0][1]), g1 = std::max(len[1][0], len[1][1]);
  auto busy = [](const sim_result& r) { return r.steps[0].step_ms - r.steps[0].trainer_idle_ms; };
  // Across groups: one micro-batch of 4, padded to the longest of all four.
  o.push_back("trainer.group_aligned_micro_batches=false");
  auto spanning = simulate(small(o));
  EXPECT_NEAR(busy(spanning), 4 * std::max(g0, g1), 1e-9);
  // Group-aligned: one micro-batch per group, each padded to its own longest.
  o.back() = "trainer.group_aligned_micro_batches=true";
  auto aligned = simulate(small(o));
  EXPECT_NEAR(busy(aligned), 2 * g0 + 2 * g1, 1e-9);
  ASSERT_NE(g0, g1);  // so that the two expectations differ
  // Padding-free (the trainer's default): every real token once, however the batches fall.
  o.push_back("trainer.padding_free=true");
  auto packed = simulate(small(o));
  EXPECT_NEAR(busy(packed), double(len[0][0] + len[0][1] + len[1][0] + len[1][1]), 1e-9);
}

TEST(Simulator, ReplayedLengthsAreSampledExactlyInOrder) {
  // Decoupled sync, 2 groups x 2 responses, lengths replayed from {3, 7}: response k of group g
  // gets lengths[(2g + k) % 2], so each group is {3, 7}.
  //   prefill 2 x 10 x 0.1 = 2; 3 decode steps with 4 active x (1 + 0.5 x 4) = 9 -> 11;
  //   4 more with 2 active x (1 + 0.5 x 2) = 8 -> 19; scored at 19.25;
  //   training 20 tokens x 0.01 + 3 = 3.2 (no micro-batch padding) -> step 1 ends at 22.45.
  auto p = small({"async_training.mode=sync", "async_training.colocate=false"});
  p.replay_lengths = {3, 7};
  p.micro_batch = 0;
  auto r = simulate(p);
  ASSERT_EQ(r.steps.size(), 2u);
  EXPECT_EQ(r.steps[0].tokens, 20);
  EXPECT_EQ(r.steps[0].samples, 4);
  EXPECT_NEAR(r.steps[0].end_ms, 22.45, 1e-9);
  // Replay overrides the workload's own lengths.
  p.workload.lengths = workload_lengths::lognormal;
  EXPECT_NEAR(simulate(p).steps[0].end_ms, 22.45, 1e-9);
}

TEST(Simulator, ContentionNeverAppliesWhenPhasesDoNotOverlap) {
  // Decoupled sync alternates generation and training: the hand-computed timeline of
  // HandComputedTimeline is unchanged by any contention factor.
  auto p = small({"async_training.mode=sync", "async_training.colocate=false"});
  p.costs.gen_contention = 3;
  p.costs.train_contention = 2;
  auto r = simulate(p);
  EXPECT_NEAR(r.steps[0].end_ms, 20.45, 1e-9);
  EXPECT_NEAR(r.steps[1].end_ms, 42.9, 1e-9);
  EXPECT_EQ(r.trainer_overlap_ms, 0);
  EXPECT_EQ(r.rollout_overlap_ms, 0);
  EXPECT_NEAR(r.trainer_busy_ms, 2 * 3.2, 1e-9);
  EXPECT_NEAR(r.rollout_busy_ms, 2 * 17, 1e-9);
}

TEST(Simulator, ContentionStretchesOverlappedTrainingByExactlyC) {
  // Fully async with a staleness budget that never stops generation and instant syncs: one
  // group in flight (2 slots) takes 11 ms, its training 0.5 ms (+3 at the step's end), so the
  // rollout device is mid-decode whenever a training chunk starts. Every chunk is overlapped
  // and costs exactly c times its uncontended cost.
  auto p = small({"async_training.mode=fully_async", "async_training.staleness_threshold=8",
                  "async_training.max_staleness=100", "trainer.total_steps=6",
                  "rollout.max_batch=2", "simulate.train_per_token_ms=0.05", "simulate.sync_ms=0"});
  auto base = simulate(p);
  ASSERT_GT(base.trainer_busy_ms, 0);
  EXPECT_NEAR(base.trainer_overlap_ms, base.trainer_busy_ms, 1e-9);
  p.costs.train_contention = 2.5;
  auto slow = simulate(p);
  EXPECT_NEAR(slow.trainer_busy_ms, 2.5 * base.trainer_busy_ms, 1e-9);
  EXPECT_NEAR(slow.trainer_overlap_ms, slow.trainer_busy_ms, 1e-9);
}
