// The console's views (actors/controller_views): what `status` and `workers` show, built from a
// controller state set up by hand, without an actor system.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "actors/controller_views.hpp"
#include "tests/role_fakes.hpp"

using namespace asyncrl;

namespace {

rollout_progress progress(int32_t worker, rollouter_state state, int64_t version) {
  rollout_progress p;
  p.worker = worker;
  p.state = state;
  p.version = version;
  p.tokens_generated = 100 + worker;
  p.groups_completed = 10 + worker;
  return p;
}

// A run with two rollouters: 0 reported (generating, v3), 1 not yet. Six prompts handed out:
// two trained, one dropped, two in flight on rollouter 0, one waiting to be generated again.
struct ControllerViews : ::testing::Test {
  controller_state st;
  std::vector<prompt_task> handed;
  ControllerViews() {
    st.args.env = test::tiny_env({"trainer.total_steps=9"});
    st.loader = prompt_loader({{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 9}, {8, 8}},
                              {"a", "b", "c", "d", "e", "f"}, 1);
    for (int i = 0; i < 6; ++i)
      handed.push_back(st.loader.next());
    for (int i = 0; i < 5; ++i)
      st.ledger.dispatched(handed[static_cast<size_t>(i)], 0);
    st.ledger.trained({handed[0].group_id, handed[1].group_id});
    st.ledger.dropped(handed[2].group_id, /*regenerate=*/false);
    st.loader.regenerate(handed[5]);  // the sixth went back before reaching a rollouter
    st.roster = rollouter_roster(st.args.env->params.rollouter, {"cpu", "cpu"});
    st.roster.enlist(0, rollouter_actor{});
    st.roster.enlist(1, rollouter_actor{});
    st.roster.report(progress(0, rollouter_state::generating, 3));
    st.watch.step_done(4);
  }
};

// Fails if: a rollouter's reported state, version or counts land on the wrong id (a swapped
// pair), one that has not reported is not shown as starting, or the prompts in flight are
// counted for the wrong rollouter.
TEST_F(ControllerViews, RollouterViewShowsEachRollouterAsItReported) {
  auto rs = console_rollouters_view(st);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0]["id"], 0);
  EXPECT_EQ(rs[0]["state"], "generating");
  EXPECT_EQ(rs[0]["weight_version"], 3);
  EXPECT_EQ(rs[0]["tokens_generated"], 100);
  EXPECT_EQ(rs[0]["prompts_in_flight"], 2);
  EXPECT_EQ(rs[0]["where"], "local");
  EXPECT_EQ(rs[0]["device"], "cpu");
  EXPECT_EQ(rs[1]["id"], 1);
  EXPECT_EQ(rs[1]["state"], "starting");
  EXPECT_EQ(rs[1]["prompts_in_flight"], 0);
}

// Fails if: the accounting does not add up from the ledger and the loader (a prompt counted
// twice or not at all), the step or total is off, or a missing queue answer is not marked.
TEST_F(ControllerViews, StatusAccountsForEveryPromptHandedOut) {
  auto j = console_status_view(st, nullptr, nullptr);
  EXPECT_EQ(j["run"]["state"], "running");
  EXPECT_EQ(j["run"]["step"], 4);
  EXPECT_EQ(j["run"]["total_steps"], 9);
  ASSERT_EQ(j["trainer"]["ranks"].size(), 2u);
  EXPECT_EQ(j["trainer"]["ranks"][1]["rank"], 1);
  EXPECT_EQ(j["trainer"]["ranks"][1]["device"], "cpu");
  const auto& a = j["accounting"];
  EXPECT_EQ(a["dispatched"], 6);
  EXPECT_EQ(a["trained"], 2);
  EXPECT_EQ(a["dropped"], 1);
  EXPECT_EQ(a["in_flight"], 2);
  EXPECT_EQ(a["to_regenerate"], 1);
  EXPECT_EQ(a["holds"], true);
  EXPECT_EQ(j["in_flight"]["queued_groups"], -1);  // the queue did not answer
  EXPECT_FALSE(j.contains("queue"));
  EXPECT_EQ(j["synchronizer"]["state"], "idle");
}

// Fails if: a lost prompt goes unnoticed (the check must be able to fail), the stopping or
// paused run is shown as running, or the synchronizer's or the trainer's reported state is not
// the one shown (a sync shown as idle, a join as a sync, an ended trainer as training).
TEST_F(ControllerViews, StatusShowsALostPromptAPauseASyncAndTheStop) {
  st.ledger.lost_with(0);  // taken out of the ledger and not given back to the loader
  EXPECT_EQ(console_status_view(st, nullptr, nullptr)["accounting"]["holds"], false);
  st.paused = true;
  st.roster.report(progress(1, rollouter_state::interrupted, 3));
  st.reported.sync = {sync_activity::syncing, 4};
  auto j = console_status_view(st, nullptr, nullptr);
  EXPECT_EQ(j["run"]["state"], "paused");
  EXPECT_EQ(j["synchronizer"]["state"], "syncing");
  EXPECT_EQ(j["synchronizer"]["weights_version"], 4);
  EXPECT_EQ(console_rollouters_view(st)[1]["state"], "interrupted");
  st.reported.sync = {sync_activity::joining, 3};
  EXPECT_EQ(console_status_view(st, nullptr, nullptr)["synchronizer"]["state"], "joining");
  st.stopping = shutdown_step::rollouters;
  j = console_status_view(st, nullptr, nullptr);
  EXPECT_EQ(j["run"]["state"], "stopping");
  EXPECT_EQ(j["trainer"]["state"], "stopping");
  st.reported.trainer = {trainer_phase::done, 9};
  EXPECT_EQ(console_status_view(st, nullptr, nullptr)["trainer"]["state"], "done");
}

// Fails if: the queue's and the reward's answers are not shown, or the trainer's wait is not
// read from the queue's waiting pull.
TEST_F(ControllerViews, StatusShowsTheQueueAndTheRewardWhenTheyAnswer) {
  queue_stats q;
  q.depth = 5;
  q.pull_waiting_min = 2;
  q.published_version = 3;
  reward_counts rc;
  rc.in_progress = 4;
  auto j = console_status_view(st, &q, &rc);
  EXPECT_EQ(j["queue"]["depth"], 5);
  EXPECT_EQ(j["trainer"]["state"], "waiting for 2 group(s)");
  EXPECT_EQ(j["weights"]["published_version"], 3);
  EXPECT_EQ(j["reward"]["state"], "scoring");
  EXPECT_EQ(j["in_flight"]["scoring_groups"], 4);
  EXPECT_EQ(j["in_flight"]["queued_groups"], 5);
}

// A paused run (the report: "8 prompts in flight on an idle rollouter, no progress"). Rollouter
// 0 finished both of its prompts and went idle; one group is queued and the other is in the
// trainer's open step, which waits for groups that the held admission does not let start.
// Fails if: a finished group is still counted at its rollouter, a prompt in flight is not
// shown where it is (generating, scoring, queued, with the trainer), or counted twice.
TEST_F(ControllerViews, FinishedGroupsAreShownWithTheTrainerNotAtTheirIdleRollouter) {
  st.ledger.completed(handed[3].group_id);
  st.ledger.completed(handed[4].group_id);
  st.paused = true;
  st.roster.report(progress(0, rollouter_state::idle, 3));
  queue_stats q;
  q.depth = 1;
  q.held = true;
  reward_counts rc;
  auto j = console_status_view(st, &q, &rc);
  EXPECT_EQ(j["run"]["state"], "paused");
  EXPECT_EQ(j["rollouters"][0]["state"], "idle");
  EXPECT_EQ(j["rollouters"][0]["prompts_in_flight"], 0);
  const auto& f = j["in_flight"];
  EXPECT_EQ(f["prompts"], 2);
  EXPECT_EQ(f["generating"], 0);
  EXPECT_EQ(f["scoring_groups"], 0);
  EXPECT_EQ(f["queued_groups"], 1);
  EXPECT_EQ(f["trainer_groups"], 1);
  EXPECT_EQ(j["accounting"]["holds"], true);
  // Without the queue's or the Reward's answer the trainer's share is unknown, not guessed.
  EXPECT_EQ(console_status_view(st, nullptr, &rc)["in_flight"]["trainer_groups"], -1);
  EXPECT_EQ(console_status_view(st, &q, nullptr)["in_flight"]["trainer_groups"], -1);
}

// One of rollouter 0's prompts finished and is being scored, the other is still generated.
// Fails if: the rollouter's count includes the finished one, or the scored one is also
// counted as with the trainer.
TEST_F(ControllerViews, ARolloutersCountIsWhatItIsStillGenerating) {
  st.ledger.completed(handed[3].group_id);
  queue_stats q;
  reward_counts rc;
  rc.in_progress = 1;
  auto j = console_status_view(st, &q, &rc);
  EXPECT_EQ(j["rollouters"][0]["prompts_in_flight"], 1);
  EXPECT_EQ(j["in_flight"]["generating"], 1);
  EXPECT_EQ(j["in_flight"]["scoring_groups"], 1);
  EXPECT_EQ(j["in_flight"]["trainer_groups"], 0);
}

// Fails if: a reward slot's load is shown for the wrong slot, or the reward's counts are
// mislabelled.
TEST_F(ControllerViews, WorkersShowsEachRewardSlotAndTheCounts) {
  reward_counts rc;
  rc.received = 7;
  rc.failures = 2;
  auto j = console_workers_view(st, rc, {3, 0, 1});
  ASSERT_EQ(j["reward_workers"].size(), 3u);
  EXPECT_EQ(j["reward_workers"][0]["calls_in_flight"], 3);
  EXPECT_EQ(j["reward_workers"][2]["slot"], 2);
  EXPECT_EQ(j["reward_workers"][2]["calls_in_flight"], 1);
  EXPECT_EQ(j["reward"]["received"], 7);
  EXPECT_EQ(j["reward"]["failures"], 2);
  EXPECT_EQ(j["rollouters"].size(), 2u);
}

}  // namespace
