// Single roles against scripted fakes, under CAF's test coordinator: the synchronizer's
// watchdog, the rollouter's state machine, the queue's credits and staleness drops.

#include <gtest/gtest.h>

#include <spdlog/spdlog.h>
#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include "actors/message_queue.hpp"
#include "actors/reward.hpp"
#include "actors/rollouter.hpp"
#include "actors/synchronizer.hpp"
#include "runtime/model/model.hpp"
#include "runtime/model/weight_sync.hpp"
#include "runtime/text/char_tokenizer.hpp"
#include "tests/actor_harness.hpp"
#include "tests/role_fakes.hpp"

using namespace asyncrl;
using test::tiny_env;

namespace {

// What the fakes saw.
struct log_t {
  std::vector<std::string> events;
  std::vector<scored_group> groups;
  std::vector<std::string> failures;
  std::vector<std::pair<uint64_t, bool>> dropped;  // group id, regenerate
  std::vector<int64_t> synced;
  int64_t credits_asked = 0;
};
using log_ptr = std::shared_ptr<log_t>;

controller_actor fake_controller(test::coordinated_system& cs, log_ptr log,
                                 std::vector<int32_t> prompt) {
  test::controller_hooks h;
  // Every task is `prompt`; group ids count from 0 for each controller.
  h.prompts = [next = std::make_shared<uint64_t>(0), prompt](int64_t n) {
    std::vector<prompt_task> out;
    for (int64_t i = 0; i < n; ++i) {
      prompt_task t;
      t.group_id = (*next)++;
      t.prompt = prompt;
      t.ground_truth = "3";
      out.push_back(t);
    }
    return out;
  };
  h.dropped = [log](uint64_t id, bool regen) { log->dropped.emplace_back(id, regen); };
  h.fail = [log](const std::string& why) { log->failures.push_back(why); };
  return test::fake_controller(cs, std::move(h));
}

// Grants every credit request, up to `budget` groups in total.
queue_actor fake_queue(test::coordinated_system& cs, log_ptr log, int64_t budget) {
  test::queue_hooks h;
  h.credit = [log, left = std::make_shared<int64_t>(budget)](queue_actor::pointer, int32_t,
                                                             int64_t want) -> caf::result<int64_t> {
    ++log->credits_asked;
    auto n = std::min(want, *left);
    *left -= n;
    return n;
  };
  h.synced = [log](int64_t v) { log->synced.push_back(v); };
  return test::fake_queue(cs, std::move(h));
}

reward_actor fake_reward(test::coordinated_system& cs, log_ptr log) {
  return cs.track(cs.sys().spawn([log](reward_actor::pointer self) -> reward_actor::behavior_type {
    return {
        [log](score_atom, scored_group& g) { log->groups.push_back(std::move(g)); },
        [](settle_atom, caf::actor_addr&, int32_t) -> caf::result<std::vector<uint64_t>, int64_t> {
          return {std::vector<uint64_t>{}, int64_t{0}};
        },
        [](stats_atom) -> caf::result<reward_counts, std::vector<int64_t>> {
          return {reward_counts{}, std::vector<int64_t>{}};
        },
        [](hang_atom) {},
        [](kill_atom) { return int32_t{0}; },
        [](watchdog_atom) {},
        [self](stop_atom, int64_t) -> reward_counts {
          self->quit();
          return {};
        },
    };
  }));
}

// A rollouter that logs "<name> pause", "<name> load v<version>", "<name> resume"; with `hang`
// it never answers the pause.
rollouter_actor fake_rollouter(test::coordinated_system& cs, log_ptr log, std::string name,
                               bool hang) {
  test::rollouter_hooks h;
  h.pause = [=](int64_t) { log->events.push_back(name + " pause"); };
  h.load = [=](const weight_snapshot& w) {
    log->events.push_back(name + " load v" + std::to_string(w.version));
  };
  h.resume = [=](int64_t) { log->events.push_back(name + " resume"); };
  h.hang = hang;
  return test::fake_rollouter(cs, std::move(h));
}

weight_snapshot tiny_weights(const env_ptr& env, int64_t version, uint64_t seed) {
  auto m = init_causal_lm(env->model, 0.1, seed, torch::kCPU);
  return snapshot_weights(*m, version);
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(SynchronizerUnit, PausesLoadsAndResumesEveryRollouterInOrder) {
  test::coordinated_system cs;
  auto log = std::make_shared<log_t>();
  auto env = tiny_env({});
  auto a = fake_rollouter(cs, log, "a", false);
  auto b = fake_rollouter(cs, log, "b", false);
  auto sync = cs.track(spawn_synchronizer(
      cs.sys(), synchronizer_args{
                    env, {}, {}, {a, b}, fake_queue(cs, log, 0), fake_controller(cs, log, {1})}));
  auto report = std::make_shared<std::optional<sync_report>>();
  auto w = tiny_weights(env, 4, 1);
  cs.sys().spawn([=](caf::event_based_actor* self) {
    self->request(sync, caf::infinite, publish_atom::value, w).then([=](sync_report& r) {
      *report = r;
    });
  });
  ASSERT_TRUE(cs.run_until([&] { return report->has_value(); }, 0));
  cs.run_until([] { return false; }, 0);
  EXPECT_TRUE((*report)->ok);
  EXPECT_EQ((*report)->version, 4);
  EXPECT_EQ((*report)->workers, 2);
  EXPECT_EQ((*report)->bytes, w.blob->bytes());
  // Every load comes after both pauses; every resume after both loads; the queue hears of v4.
  auto& e = log->events;
  ASSERT_EQ(e.size(), 6u);
  EXPECT_TRUE(contains({e[0], e[1]}, "a pause") && contains({e[0], e[1]}, "b pause"));
  EXPECT_TRUE(contains({e[2], e[3]}, "a load v4") && contains({e[2], e[3]}, "b load v4"));
  EXPECT_TRUE(contains({e[4], e[5]}, "a resume") && contains({e[4], e[5]}, "b resume"));
  EXPECT_EQ(log->synced, std::vector<int64_t>{4});
  EXPECT_TRUE(log->failures.empty());
}

TEST(SynchronizerUnit, WatchdogFailsLoudlyAndStillResumes) {
  test::coordinated_system cs;
  auto log = std::make_shared<log_t>();
  // No retries: this is the bound of one attempt (FaultInjection tests the retries).
  auto env = tiny_env({"async_training.sync_timeout_ms=50", "async_training.sync_retries=0"});
  auto a = fake_rollouter(cs, log, "a", false);
  auto stuck = fake_rollouter(cs, log, "stuck", true);
  auto sync = cs.track(spawn_synchronizer(
      cs.sys(),
      synchronizer_args{
          env, {}, {}, {a, stuck}, fake_queue(cs, log, 0), fake_controller(cs, log, {1})}));
  auto report = std::make_shared<std::optional<sync_report>>();
  auto w = tiny_weights(env, 2, 1);
  cs.sys().spawn([=](caf::event_based_actor* self) {
    self->request(sync, caf::infinite, publish_atom::value, w).then([=](sync_report& r) {
      *report = r;
    });
  });
  // Nothing moves until the watchdog fires: without it the sync would wait forever.
  cs.sched().run();
  EXPECT_FALSE(report->has_value());
  ASSERT_TRUE(cs.run_until([&] { return report->has_value(); }, 5));
  cs.run_until([] { return false; }, 0);
  EXPECT_FALSE((*report)->ok);
  EXPECT_NE((*report)->error.find("pause failed"), std::string::npos) << (*report)->error;
  ASSERT_EQ(log->failures.size(), 1u);  // the controller is told, and fails the run
  EXPECT_NE(log->failures[0].find("weight sync v2"), std::string::npos);
  // Pause and resume stay paired even though the sync failed; nothing was loaded.
  EXPECT_TRUE(contains(log->events, "a resume"));
  EXPECT_TRUE(contains(log->events, "stuck resume"));
  EXPECT_FALSE(contains(log->events, "a load v2"));
  EXPECT_TRUE(log->synced.empty());
}

TEST(RollouterUnit, PartialRolloutIsInterruptedSyncedAndResumed) {
  test::coordinated_system cs;
  auto log = std::make_shared<log_t>();
  auto env = tiny_env({"async_training.mode=fully_async", "async_training.staleness_threshold=1",
                       "async_training.partial_rollout=true", "rollout.max_new_tokens=20",
                       "rollout.chunk_tokens=1", "rollout.max_batch=4"});
  auto tok = char_tokenizer::builtin();
  std::vector<int32_t> prompt{tok.bos_id()};
  for (auto id : tok.encode("1+2=?\n"))
    prompt.push_back(id);
  auto r = cs.track(spawn_rollouter(cs.sys(), rollouter_args{0,
                                                             env,
                                                             tiny_weights(env, 0, 1),
                                                             fake_queue(cs, log, 1),
                                                             fake_reward(cs, log),
                                                             fake_controller(cs, log, prompt),
                                                             {}}));
  auto& sched = cs.sched();
  caf::anon_send(r, start_atom::value);
  // Credit, prompts, then a few decode chunks: the group is mid-generation.
  for (int i = 0; i < 12; ++i)
    sched.try_run_once();
  ASSERT_TRUE(log->groups.empty());

  auto step = std::make_shared<std::vector<std::string>>();
  auto w1 = tiny_weights(env, 1, 2);
  // A load while generating is deferred (skip), not applied under the running requests...
  cs.sys().spawn([=](caf::event_based_actor* self) {
    self->request(r, caf::infinite, load_atom::value, w1).then([=](int64_t v) {
      step->push_back("loaded v" + std::to_string(v));
    });
  });
  for (int i = 0; i < 4; ++i)
    sched.try_run_once();
  ASSERT_TRUE(step->empty());
  // ...until a pause has stopped generation at a token boundary.
  cs.sys().spawn([=](caf::event_based_actor* self) {
    self->request<caf::message_priority::high>(r, caf::infinite, pause_atom::value, int64_t{1})
        .then([=](int64_t held) { step->push_back("paused with " + std::to_string(held)); });
  });
  ASSERT_TRUE(cs.run_until([&] { return step->size() == 2; }, 0));
  // The unfinished responses are held (a response that already hit EOS is not).
  int64_t held = std::stoll(step->at(0).substr(std::string("paused with ").size()));
  EXPECT_GE(held, 1);
  EXPECT_EQ((*step)[1], "loaded v1");
  cs.sched().run();
  EXPECT_TRUE(log->groups.empty()) << "a paused rollouter must not generate";
  caf::anon_send(r, resume_atom::value, int64_t{1});
  ASSERT_TRUE(cs.run_until([&] { return log->groups.size() == 1; }, 0));
  const auto& g = log->groups[0];
  ASSERT_EQ(g.samples.size(), 4u);
  int64_t interrupted = 0;
  for (auto& s : g.samples) {
    ASSERT_FALSE(s.versions.empty());
    EXPECT_EQ(s.versions.front(), 0);  // every response started under v0
    EXPECT_TRUE(std::is_sorted(s.versions.begin(), s.versions.end()));
    EXPECT_LE(s.response.size(), 20u);  // partial tokens counted against the limit
    if (s.interruptions == 0) {
      EXPECT_EQ(s.versions.back(), 0);  // finished before the pause
      continue;
    }
    ++interrupted;
    EXPECT_EQ(s.interruptions, 1);
    EXPECT_EQ(s.versions.back(), 1);  // resumed under the new weights
  }
  EXPECT_EQ(interrupted, held);
  caf::anon_send_exit(r, caf::exit_reason::kill);
  cs.run_until([] { return false; }, 0);
}

TEST(QueueUnit, HoldsCreditsUntilTheNextSyncAndDropsStaleGroups) {
  test::coordinated_system cs;
  auto log = std::make_shared<log_t>();
  // fully_async with k R = 1, s = 3 (a window of 4 new groups), eta = 1 (B = 1).
  auto env = tiny_env({"async_training.mode=fully_async", "async_training.staleness_threshold=3",
                       "async_training.max_staleness=1", "async_training.stale_policy=regenerate",
                       "trainer.ppo_mini_batch_size=1"});
  auto q = cs.track(
      spawn_message_queue(cs.sys(), queue_args{env, fake_controller(cs, log, {1}), {}, 0}));
  auto got = std::make_shared<std::vector<int64_t>>();
  auto delivered = std::make_shared<std::optional<delivery>>();
  cs.sys().spawn([=](caf::event_based_actor* self) {
    self->request(q, caf::infinite, credit_atom::value, int32_t{0}, int64_t{5})
        .then([=](int64_t n) {
          got->push_back(n);
          // eta is spent: this request is held, not refused...
          self->request(q, caf::infinite, credit_atom::value, int32_t{0}, int64_t{5})
              .then([=](int64_t m) { got->push_back(m); });
          self->send(q, put_atom::value, test::one_sample_group(0, 0));
          self->send(q, put_atom::value, test::one_sample_group(1, 1));
          self->send(q, synced_atom::value, int64_t{1});
          // ...a trainer at version 2 takes what is fresh enough: group 0 (v0) is 2 > eta old.
          self->request(q, caf::infinite, pull_atom::value, int64_t{2}, int64_t{1}, int64_t{5})
              .then([=](delivery& d) { *delivered = d; });
        });
  });
  ASSERT_TRUE(cs.run_until([&] { return got->size() == 2 && delivered->has_value(); }, 0));
  // First grant: min(window 4, AReaL (eta + v + 1) B - (accepted + running) = (1 + 0 + 1) - 0).
  EXPECT_EQ((*got)[0], 2);
  // After the sync the 2 queued groups are carried (window budget 4 - 2 = 2). Once the trainer
  // reports version 2, AReaL allows (1 + 2 + 1) - 1 = 3: the dropped group no longer counts as
  // accepted, the delivered one does. So the window binds: 2.
  EXPECT_EQ((*got)[1], 2);
  auto& d = **delivered;
  ASSERT_EQ(d.groups.size(), 1u);
  EXPECT_EQ(d.groups[0].group_id, 1u);
  EXPECT_EQ(d.stats.dropped_stale, 1);
  EXPECT_EQ(d.stats.regenerated, 1);
  EXPECT_EQ(d.stats.max_delivered_staleness, 1);
  cs.sched().run();
  // The stale group goes back to the loader (the controller owns its prompt), marked for
  // regeneration.
  ASSERT_EQ(log->dropped.size(), 1u);
  EXPECT_EQ(log->dropped[0], (std::pair<uint64_t, bool>{0, true}));
}

// --- issue 9: defects found by reading the actors; each test failed before its fix ---------

// Publishes `versions` back to back from one requester; the reports land in `out` by version.
void publish_all(test::coordinated_system& cs, synchronizer_actor sync, const env_ptr& env,
                 std::vector<int64_t> versions,
                 std::shared_ptr<std::map<int32_t, sync_report>> out) {
  std::vector<weight_snapshot> ws;
  for (auto v : versions)
    ws.push_back(tiny_weights(env, v, static_cast<uint64_t>(v) + 1));
  cs.sys().spawn([=](caf::event_based_actor* self) {
    for (auto& w : ws)
      self->request(sync, caf::infinite, publish_atom::value, w).then([=](sync_report& r) {
        (*out)[r.version] = r;
      });
  });
}

TEST(SynchronizerUnit, BackToBackPublishesDoNotWedgeARealRollouter) {
  // Before the fix: finish() sent resume at normal priority, the next sync's pause (high)
  // overtook it, the late resume moved the rollouter to generating, and the second load was
  // skipped forever: v2 failed on the watchdog.
  test::coordinated_system cs;
  auto log = std::make_shared<log_t>();
  auto env = tiny_env({"async_training.sync_timeout_ms=50"});
  auto r = cs.track(spawn_rollouter(cs.sys(), rollouter_args{0,
                                                             env,
                                                             tiny_weights(env, 0, 1),
                                                             fake_queue(cs, log, 0),
                                                             fake_reward(cs, log),
                                                             fake_controller(cs, log, {1}),
                                                             {}}));
  auto sync = cs.track(spawn_synchronizer(
      cs.sys(),
      synchronizer_args{env, {}, {}, {r}, fake_queue(cs, log, 0), fake_controller(cs, log, {1})}));
  auto reports = std::make_shared<std::map<int32_t, sync_report>>();
  publish_all(cs, sync, env, {1, 2}, reports);
  ASSERT_TRUE(cs.run_until([&] { return reports->size() == 2; }, 10));
  for (auto v : {1, 2}) {
    EXPECT_TRUE(reports->at(v).ok) << "v" << v << ": " << reports->at(v).error;
    EXPECT_FALSE(reports->at(v).superseded);
  }
  EXPECT_TRUE(log->failures.empty()) << log->failures.front();
}

TEST(SynchronizerUnit, SupersededPublishIsNotReportedAsASuccess) {
  test::coordinated_system cs;
  auto log = std::make_shared<log_t>();
  auto env = tiny_env({});
  auto a = fake_rollouter(cs, log, "a", false);
  auto sync = cs.track(spawn_synchronizer(
      cs.sys(),
      synchronizer_args{env, {}, {}, {a}, fake_queue(cs, log, 0), fake_controller(cs, log, {1})}));
  auto reports = std::make_shared<std::map<int32_t, sync_report>>();
  // v1 starts at once, v2 waits behind it, v3 replaces v2 before it starts.
  publish_all(cs, sync, env, {1, 2, 3}, reports);
  ASSERT_TRUE(cs.run_until([&] { return reports->size() == 3; }, 0));
  EXPECT_TRUE(reports->at(1).ok);
  EXPECT_TRUE(reports->at(3).ok);
  const auto& skipped = reports->at(2);
  EXPECT_FALSE(skipped.ok);
  EXPECT_TRUE(skipped.superseded);
  EXPECT_NE(skipped.error.find("superseded by v3"), std::string::npos) << skipped.error;
  EXPECT_FALSE(contains(log->events, "a load v2"));  // never loaded
  EXPECT_TRUE(log->failures.empty());                // a superseded sync is not a run failure
}

TEST(SynchronizerUnit, DrainHasItsOwnBoundApartFromTheLoadWatchdog) {
  // Without partial rollout a pause waits for the in-flight responses to finish. Before the
  // fix that drain ran under sync_timeout_ms (meant for one load) and a long but healthy drain
  // failed the run.
  test::coordinated_system cs;
  auto log = std::make_shared<log_t>();
  auto env = tiny_env({"async_training.sync_timeout_ms=100", "async_training.drain_timeout_ms=5000",
                       "async_training.sync_retries=0"});
  auto slow = fake_rollouter(cs, log, "slow", /*hang=*/true);
  auto sync = cs.track(spawn_synchronizer(
      cs.sys(), synchronizer_args{
                    env, {}, {}, {slow}, fake_queue(cs, log, 0), fake_controller(cs, log, {1})}));
  auto reports = std::make_shared<std::map<int32_t, sync_report>>();
  publish_all(cs, sync, env, {1}, reports);
  cs.sched().run();
  cs.sched().advance_time(std::chrono::milliseconds(1000));  // 10x the load watchdog
  cs.sched().run();
  EXPECT_TRUE(reports->empty()) << "a drain shorter than drain_timeout_ms failed the sync";
  cs.sched().advance_time(std::chrono::milliseconds(4100));  // past the drain bound
  cs.sched().run();
  ASSERT_EQ(reports->size(), 1u);
  EXPECT_FALSE(reports->at(1).ok);
  EXPECT_NE(reports->at(1).error.find("drain"), std::string::npos) << reports->at(1).error;
}

TEST(RollouterUnit, AResumeThatOvertakesItsPauseStillEndsIt) {
  // Issue 11: a sync attempt that fails (a rollouter crashed) resumes everyone at once; seen
  // from a live rollouter that resume can come before the attempt's pause. With a pause count
  // the late pause then paused it forever; tokens pair them in either order.
  test::coordinated_system cs;
  auto log = std::make_shared<log_t>();
  auto env = tiny_env({});
  auto r = cs.track(spawn_rollouter(cs.sys(), rollouter_args{0,
                                                             env,
                                                             tiny_weights(env, 0, 1),
                                                             fake_queue(cs, log, 1),
                                                             fake_reward(cs, log),
                                                             fake_controller(cs, log, {1}),
                                                             {}}));
  cs.sys().spawn([=](caf::event_based_actor* self) {
    self->send<caf::message_priority::high>(r, resume_atom::value, int64_t{7});
    self->request<caf::message_priority::high>(r, caf::infinite, pause_atom::value, int64_t{7})
        .then([](int64_t) {});
    self->send(r, start_atom::value);
  });
  ASSERT_TRUE(cs.run_until([&] { return log->groups.size() == 1; }, 0))
      << "the rollouter stayed paused by a pause whose resume had already come";
}

TEST(RollouterUnit, ResumeOfOneSyncArrivingAfterThePauseOfTheNextDoesNotWedgeIt) {
  // Back-to-back syncs as a rollouter can see them: sync 1's resume arrives after sync 2's
  // pause. Before the fix that late resume moved the rollouter to generating, where sync 2's
  // load was deferred forever (and the run failed on the sync watchdog). Sent from one actor at
  // one priority, so the order below is the order of arrival.
  test::coordinated_system cs;
  auto log = std::make_shared<log_t>();
  auto env = tiny_env({});
  auto r = cs.track(spawn_rollouter(cs.sys(), rollouter_args{0,
                                                             env,
                                                             tiny_weights(env, 0, 1),
                                                             fake_queue(cs, log, 0),
                                                             fake_reward(cs, log),
                                                             fake_controller(cs, log, {1}),
                                                             {}}));
  auto loaded = std::make_shared<std::vector<int64_t>>();
  auto w1 = tiny_weights(env, 1, 2);
  auto w2 = tiny_weights(env, 2, 3);
  cs.sys().spawn([=](caf::event_based_actor* self) {
    auto on_load = [=](int64_t v) { loaded->push_back(v); };
    self->request(r, caf::infinite, pause_atom::value, int64_t{1}).then([](int64_t) {});
    self->request(r, caf::infinite, load_atom::value, w1).then(on_load);
    self->request(r, caf::infinite, pause_atom::value, int64_t{2}).then([](int64_t) {});
    self->send(r, resume_atom::value, int64_t{1});  // sync 1's resume, after sync 2's pause
    self->request(r, caf::infinite, load_atom::value, w2).then(on_load);
    self->send(r, resume_atom::value, int64_t{2});
  });
  ASSERT_TRUE(cs.run_until([&] { return loaded->size() == 2; }, 0))
      << "sync 2's load was never applied";
  EXPECT_EQ(*loaded, (std::vector<int64_t>{1, 2}));
}

TEST(RollouterUnit, ResumeWithoutALoadContinuesUnderTheOldWeights) {
  // A sync whose load failed still sends resume (pause and resume are paired). Before the fix
  // an interrupted rollouter ignored it and stayed paused forever.
  test::coordinated_system cs;
  auto log = std::make_shared<log_t>();
  auto env = tiny_env({"async_training.mode=fully_async", "async_training.staleness_threshold=1",
                       "async_training.partial_rollout=true", "rollout.max_new_tokens=20",
                       "rollout.chunk_tokens=1", "rollout.max_batch=4"});
  auto r = cs.track(spawn_rollouter(cs.sys(), rollouter_args{0,
                                                             env,
                                                             tiny_weights(env, 0, 1),
                                                             fake_queue(cs, log, 1),
                                                             fake_reward(cs, log),
                                                             fake_controller(cs, log, {1, 10, 11}),
                                                             {}}));
  caf::anon_send(r, start_atom::value);
  for (int i = 0; i < 8; ++i)
    cs.sched().try_run_once();
  auto held = std::make_shared<std::optional<int64_t>>();
  cs.sys().spawn([=](caf::event_based_actor* self) {
    self->request<caf::message_priority::high>(r, caf::infinite, pause_atom::value, int64_t{1})
        .then([=](int64_t n) { *held = n; });
  });
  ASSERT_TRUE(cs.run_until([&] { return held->has_value(); }, 0));
  ASSERT_TRUE(log->groups.empty());
  caf::anon_send<caf::message_priority::high>(r, resume_atom::value, int64_t{1});
  ASSERT_TRUE(cs.run_until([&] { return log->groups.size() == 1; }, 0))
      << "the rollouter stayed paused after a resume";
  for (auto& s : log->groups[0].samples)
    for (auto v : s.versions)
      EXPECT_EQ(v, 0);  // nothing new was loaded
}

// A queue that answers the first credit request and holds every later one until the test
// releases it.
struct held_credits {
  std::vector<caf::typed_response_promise<int64_t>> promises;
};

queue_actor holding_queue(test::coordinated_system& cs, log_ptr log,
                          std::shared_ptr<held_credits> held) {
  test::queue_hooks h;
  h.credit = [=](queue_actor::pointer self, int32_t, int64_t) -> caf::result<int64_t> {
    if (log->credits_asked++ == 0) return int64_t{1};
    held->promises.push_back(self->make_response_promise<int64_t>());
    return held->promises.back();
  };
  h.synced = [log](int64_t v) { log->synced.push_back(v); };
  return test::fake_queue(cs, std::move(h));
}

TEST(RollouterUnit, CreditArrivingDuringADrainStartsNoNewTask) {
  test::coordinated_system cs;
  auto log = std::make_shared<log_t>();
  auto held = std::make_shared<held_credits>();
  // No partial rollout: a pause drains. Room for two groups, one granted at once.
  auto env =
      tiny_env({"rollout.max_new_tokens=12", "rollout.chunk_tokens=1", "rollout.max_batch=8"});
  auto r = cs.track(spawn_rollouter(cs.sys(), rollouter_args{0,
                                                             env,
                                                             tiny_weights(env, 0, 1),
                                                             holding_queue(cs, log, held),
                                                             fake_reward(cs, log),
                                                             fake_controller(cs, log, {1, 10, 11}),
                                                             {}}));
  caf::anon_send(r, start_atom::value);
  ASSERT_TRUE(cs.run_until([&] { return held->promises.size() == 1; }, 0));
  auto paused = std::make_shared<bool>(false);
  cs.sys().spawn([=](caf::event_based_actor* self) {
    self->request<caf::message_priority::high>(r, caf::infinite, pause_atom::value, int64_t{1})
        .then([=](int64_t) { *paused = true; });
  });
  // The pause (high priority) is handled first; then the held credit comes through.
  held->promises.front().deliver(int64_t{1});
  ASSERT_TRUE(cs.run_until([&] { return *paused; }, 0));
  cs.sched().run();  // everything the paused rollouter would still do
  EXPECT_EQ(log->groups.size(), 1u)
      << "a group admitted during the drain was generated under the old weights";
  // The held group starts after the sync.
  auto w1 = tiny_weights(env, 1, 2);
  cs.sys().spawn([=](caf::event_based_actor* self) {
    self->request(r, caf::infinite, load_atom::value, w1).then([=](int64_t) {
      self->send<caf::message_priority::high>(r, resume_atom::value, int64_t{1});
    });
  });
  ASSERT_TRUE(cs.run_until([&] { return log->groups.size() == 2; }, 0));
  for (auto& s : log->groups[1].samples)
    EXPECT_EQ(s.versions.front(), 1);  // generated under the new weights
}

TEST(QueueUnit, CreditsAreSharedAcrossWorkers) {
  // Before the fix the first rollouter to ask took the whole window and the second waited.
  test::coordinated_system cs;
  auto log = std::make_shared<log_t>();
  // periodic: a window of B = 4 groups; each worker has room for 16 / G = 4.
  auto env =
      tiny_env({"async_training.mode=periodic", "rollout.num_workers=2", "rollout.max_batch=16"});
  auto q = cs.track(
      spawn_message_queue(cs.sys(), queue_args{env, fake_controller(cs, log, {1}), {}, 0}));
  auto got = std::make_shared<std::map<int32_t, int64_t>>();
  cs.sys().spawn([=](caf::event_based_actor* self) {
    for (int32_t w : {0, 1})
      self->request(q, caf::infinite, credit_atom::value, w, int64_t{4}).then([=](int64_t n) {
        (*got)[w] = n;
      });
  });
  ASSERT_TRUE(cs.run_until([&] { return got->size() == 2; }, 0));
  EXPECT_EQ(got->at(0), 2);
  EXPECT_EQ(got->at(1), 2);
}

// stale_policy wait, eta = 1, B = 2. Group 0 began under policy 0, groups 1 and 2 under 1. At
// trainer version 1 group 0 is at its last chance (at 2 it would be 2 > eta old): the first pull
// of the step takes one young group and keeps a place; the second waits for group 0 and takes
// it instead of group 2. With drop, the step takes 1 and 2 and group 0 is dropped at version 2
// (the long response lost: the length bias).
TEST(QueueUnit, WaitKeepsAPlaceForAGroupAtItsLastChanceAndWaitsForIt) {
  test::coordinated_system cs;
  auto log = std::make_shared<log_t>();
  auto env = tiny_env({"async_training.mode=fully_async", "async_training.staleness_threshold=3",
                       "async_training.max_staleness=1", "async_training.stale_policy=wait",
                       "trainer.ppo_mini_batch_size=2"});
  auto q = cs.track(
      spawn_message_queue(cs.sys(), queue_args{env, fake_controller(cs, log, {1}), {}, 0}));
  auto granted = std::make_shared<int64_t>(-1);
  cs.sys().spawn([=](caf::event_based_actor* self) {
    self->request(q, caf::infinite, credit_atom::value, int32_t{0}, int64_t{3})
        .then([=](int64_t n) {
          *granted = n;
          self->send(q, started_atom::value, int32_t{0}, uint64_t{0}, int64_t{0});
          self->send(q, started_atom::value, int32_t{0}, uint64_t{1}, int64_t{1});
          self->send(q, started_atom::value, int32_t{0}, uint64_t{2}, int64_t{1});
          self->send(q, put_atom::value, test::one_sample_group(1, 1));
          self->send(q, put_atom::value, test::one_sample_group(2, 1));
        });
  });
  ASSERT_TRUE(cs.run_until([&] { return *granted >= 0; }, 0));
  cs.sched().run();
  ASSERT_EQ(*granted, 3);
  auto pull = [&](int64_t max) {
    auto out = std::make_shared<std::optional<delivery>>();
    cs.sys().spawn([=](caf::event_based_actor* self) {
      self->request(q, caf::infinite, pull_atom::value, int64_t{1}, int64_t{1}, max)
          .then([=](delivery& d) { *out = std::move(d); });
    });
    return out;
  };
  auto first = pull(2);
  cs.sched().run();
  ASSERT_TRUE(first->has_value());
  ASSERT_EQ((*first)->groups.size(), 1u);  // a place kept for group 0
  EXPECT_EQ((*first)->groups[0].group_id, 1u);
  auto second = pull(1);
  cs.sched().run();
  EXPECT_FALSE(second->has_value());  // group 2 is there, but the last place is group 0's
  auto stats = std::make_shared<std::optional<queue_stats>>();
  cs.sys().spawn([=](caf::event_based_actor* self) {
    self->request(q, caf::infinite, stats_atom::value).then([=](queue_stats& s) { *stats = s; });
  });
  cs.sched().run();
  ASSERT_TRUE(stats->has_value());
  EXPECT_EQ((*stats)->pull_waiting_old, 1);
  EXPECT_EQ((*stats)->stale_waits, 1);
  cs.sys().spawn([=](caf::event_based_actor* self) {
    self->send(q, put_atom::value, test::one_sample_group(0, 0));
  });
  cs.sched().run();
  ASSERT_TRUE(second->has_value());
  ASSERT_EQ((*second)->groups.size(), 1u);
  EXPECT_EQ((*second)->groups[0].group_id, 0u);  // the old one first, group 2 stays queued
  EXPECT_EQ((*second)->stats.dropped_stale, 0);
  EXPECT_EQ((*second)->stats.max_delivered_staleness, 1);
  EXPECT_EQ((*second)->stats.depth, 1);
  EXPECT_EQ((*second)->stats.received_tokens, 3);
}

// A pull waiting for groups at their last chance is released when their rollouter says it
// stops (start version -1) or is declared lost; nothing waits on a group that will never come.
TEST(QueueUnit, WaitIsReleasedByAStoppedOrLostRollouter) {
  test::coordinated_system cs;
  auto log = std::make_shared<log_t>();
  auto env = tiny_env({"async_training.mode=fully_async", "async_training.staleness_threshold=3",
                       "async_training.max_staleness=1", "async_training.stale_policy=wait",
                       "trainer.ppo_mini_batch_size=2"});
  auto q = cs.track(
      spawn_message_queue(cs.sys(), queue_args{env, fake_controller(cs, log, {1}), {}, 0}));
  // Two rollouter incarnations, each with one group begun under policy 0, and a young group 2.
  auto a = std::make_shared<caf::actor_addr>(), b = std::make_shared<caf::actor_addr>();
  auto rollouter = [&](uint64_t id, std::shared_ptr<caf::actor_addr> addr) {
    cs.sys().spawn([=](caf::event_based_actor* self) {
      *addr = self->address();
      self->send(q, started_atom::value, int32_t(id), id, int64_t{0});
    });
  };
  auto granted = std::make_shared<int64_t>(-1);
  cs.sys().spawn([=](caf::event_based_actor* self) {
    self->request(q, caf::infinite, credit_atom::value, int32_t{0}, int64_t{3})
        .then([=](int64_t n) { *granted = n; });
  });
  ASSERT_TRUE(cs.run_until([&] { return *granted >= 0; }, 0));
  ASSERT_EQ(*granted, 3);
  rollouter(0, a);
  rollouter(1, b);
  cs.sys().spawn([=](caf::event_based_actor* self) {
    self->send(q, put_atom::value, test::one_sample_group(2, 1));
  });
  cs.sched().run();
  auto got = std::make_shared<std::optional<delivery>>();
  cs.sys().spawn([=](caf::event_based_actor* self) {
    self->request(q, caf::infinite, pull_atom::value, int64_t{1}, int64_t{1}, int64_t{1})
        .then([=](delivery& d) { *got = std::move(d); });
  });
  cs.sched().run();
  EXPECT_FALSE(got->has_value());
  // Rollouter a stops: its group will not be finished. Group 1 still holds the only place.
  cs.sys().spawn([=](caf::event_based_actor* self) {
    self->send(q, started_atom::value, int32_t{0}, uint64_t{0}, int64_t{-1});
  });
  cs.sched().run();
  EXPECT_FALSE(got->has_value());
  // Rollouter b is lost (the controller's message); its records go, and the pull is served.
  cs.sys().spawn([=](caf::event_based_actor* self) {
    self->send(q, lost_atom::value, int32_t{1}, int64_t{0}, *b);
  });
  cs.sched().run();
  ASSERT_TRUE(got->has_value());
  ASSERT_EQ((*got)->groups.size(), 1u);
  EXPECT_EQ((*got)->groups[0].group_id, 2u);
}

TEST(RewardUnit, AStopThatOvertakesQueuedGroupsStillCountsThem) {
  // The controller's stop used to overtake score messages still in the Reward's mailbox, so
  // generated != trained + dropped + in flight. A stop now names how many groups were sent and
  // is answered only once all of them have arrived.
  test::coordinated_system cs;
  auto log = std::make_shared<log_t>();
  auto env = tiny_env({});
  auto reward = cs.track(spawn_reward(cs.sys(), reward_args{env, fake_queue(cs, log, 0)}));
  auto counts = std::make_shared<std::optional<reward_counts>>();
  auto group = [](uint64_t id) {
    scored_group g;
    g.group_id = id;
    g.ground_truth = "3";
    for (uint32_t k = 0; k < 2; ++k) {
      scored_sample s;
      s.uid = id * 2 + k;
      s.index = k;
      s.response = {};
      g.samples.push_back(s);
    }
    return g;
  };
  cs.sys().spawn([=](caf::event_based_actor* self) {
    // The stop is sent first and at high priority: it is handled before both groups.
    self->request<caf::message_priority::high>(reward, caf::infinite, stop_atom::value, int64_t{2})
        .then([=](reward_counts& c) { *counts = c; });
    self->send(reward, score_atom::value, group(0));
    self->send(reward, score_atom::value, group(1));
  });
  ASSERT_TRUE(cs.run_until([&] { return counts->has_value(); }, 0));
  EXPECT_EQ((*counts)->received, 2);
  // Neither was scored after the stop: both are in flight, none forwarded.
  EXPECT_EQ((*counts)->forwarded + (*counts)->in_progress, 2);
}

}  // namespace

namespace {

// An environment pool the test controls: the answers to first model turns are held until a
// due(0) releases them (an observation "5\n", not done); later turns end the episode at once
// with reward 1.
struct held_env_log {
  std::vector<env_call> calls;
  std::vector<caf::typed_response_promise<env_answer>> held;
};

env_pool_actor holding_env(test::coordinated_system& cs, std::shared_ptr<held_env_log> log) {
  return cs.track(
      cs.sys().spawn([log](env_pool_actor::pointer self) -> env_pool_actor::behavior_type {
        return {
            [self, log](env_atom, env_call& c) -> caf::result<env_answer> {
              log->calls.push_back(c);
              if (c.turn >= 2) {
                env_answer a;
                a.done = a.has_reward = true;
                a.reward = 1;
                return a;
              }
              log->held.push_back(self->make_response_promise<env_answer>());
              return log->held.back();
            },
            [log](due_atom, uint64_t) {
              env_answer a;
              a.observations = {"5\n"};
              for (auto& rp : log->held)
                rp.deliver(a);
              log->held.clear();
            },
            [self](stop_atom) -> int64_t {
              self->quit();
              return 0;
            },
        };
      }));
}

// Episodes of up to 2 turns of at most 8 tokens each.
env_ptr episode_env(bool sync_waits_for_tools) {
  return tiny_env(
      {"async_training.mode=fully_async", "async_training.staleness_threshold=1",
       "async_training.partial_rollout=true", "rollout.max_new_tokens=8", "rollout.max_turns=2",
       "rollout.max_episode_tokens=30", "env.kind=calculator", "rollout.chunk_tokens=1",
       "rollout.max_batch=4",
       std::string("env.sync_waits_for_tools=") + (sync_waits_for_tools ? "true" : "false")});
}

// A rollouter with `env`, whose pool is `pool`; its queue grants one group.
rollouter_actor episode_rollouter(test::coordinated_system& cs, log_ptr log, env_pool_actor pool,
                                  const env_ptr& env) {
  auto tok = char_tokenizer::builtin();
  std::vector<int32_t> prompt{tok.bos_id()};
  for (auto id : tok.encode("1+2=?\n"))
    prompt.push_back(id);
  return cs.track(spawn_rollouter(
      cs.sys(), rollouter_args{0, env, tiny_weights(env, 0, 1), fake_queue(cs, log, 1),
                               fake_reward(cs, log), fake_controller(cs, log, prompt), pool}));
}

// Sends pause(1) at high priority; `answered` is set once the rollouter answers it.
void send_pause(test::coordinated_system& cs, rollouter_actor r, std::shared_ptr<bool> answered) {
  cs.sys().spawn([=](caf::event_based_actor* self) {
    self->request<caf::message_priority::high>(r, caf::infinite, pause_atom::value, int64_t{1})
        .then([=](int64_t) { *answered = true; });
  });
}

}  // namespace

// Issue 38 item 4. Catches: a sync that waits for a tool call (the pause must be answered while
// an episode is at its environment), an episode that does not continue after the sync, and
// per-token versions that lose the change of weights between turns.
TEST(RollouterEpisodes, ASyncDoesNotWaitForAToolAndTheNextTurnRunsUnderTheNewWeights) {
  test::coordinated_system cs;
  auto log = std::make_shared<log_t>();
  auto envlog = std::make_shared<held_env_log>();
  auto pool = holding_env(cs, envlog);
  auto env = episode_env(/*sync_waits_for_tools=*/false);
  auto r = episode_rollouter(cs, log, pool, env);
  caf::anon_send(r, start_atom::value);
  // Generate until an episode's first turn is at the environment, whose answer is held.
  ASSERT_TRUE(cs.run_until([&] { return !envlog->held.empty(); }, 0));
  auto paused = std::make_shared<bool>(false);
  send_pause(cs, r, paused);
  ASSERT_TRUE(cs.run_until([&] { return *paused; }, 0))
      << "the pause waited for the tool call to answer";
  EXPECT_FALSE(envlog->held.empty()) << "the tool answered before the pause; nothing was shown";
  // Load v1 and resume; every response that had not yet reached its environment finishes its
  // first turn under v1 and waits there too.
  auto loaded = std::make_shared<int64_t>(-1);
  auto w1 = tiny_weights(env, 1, 2);
  cs.sys().spawn([=](caf::event_based_actor* self) {
    self->request(r, caf::infinite, load_atom::value, w1).then([=](int64_t v) { *loaded = v; });
  });
  ASSERT_TRUE(cs.run_until([&] { return *loaded == 1; }, 0));
  caf::anon_send(r, resume_atom::value, int64_t{1});
  ASSERT_TRUE(cs.run_until([&] { return envlog->held.size() == 4; }, 0));
  caf::anon_send(pool, due_atom::value, uint64_t{0});
  ASSERT_TRUE(cs.run_until([&] { return log->groups.size() == 1; }, 0));

  const auto tok = char_tokenizer::builtin();
  const auto obs = tok.encode("5\n");
  for (auto& s : log->groups[0].samples) {
    SCOPED_TRACE("sample " + std::to_string(s.index));
    ASSERT_EQ(s.loss_mask.size(), s.response.size());
    EXPECT_EQ(s.turns, 2);
    EXPECT_TRUE(s.has_env_reward);
    EXPECT_TRUE(std::is_sorted(s.versions.begin(), s.versions.end()));
    // The environment's turn: its tokens, out of the loss, right after the first model turn.
    size_t first = 0;
    while (first < s.loss_mask.size() && s.loss_mask[first] == 1)
      ++first;
    ASSERT_LT(first + obs.size(), s.response.size());
    for (size_t j = 0; j < obs.size(); ++j) {
      EXPECT_EQ(s.loss_mask[first + j], 0);
      EXPECT_EQ(s.response[first + j], obs[j]);
      EXPECT_EQ(s.logprobs[first + j], 0.f);
      EXPECT_EQ(s.versions[first + j], s.versions[first - 1]);  // the model token's before it
    }
    // The second turn is the model's, sampled after the sync: under v1.
    for (size_t j = first + obs.size(); j < s.response.size(); ++j) {
      EXPECT_EQ(s.loss_mask[j], 1);
      EXPECT_EQ(s.versions[j], 1);
    }
  }
  // The environment saw each first turn once, with the task and nothing earlier.
  size_t first_turns = 0;
  for (auto& c : envlog->calls)
    if (c.turn == 1) {
      ++first_turns;
      EXPECT_TRUE(c.earlier.empty());
      EXPECT_EQ(c.task, "1+2=?\n");
    } else {
      EXPECT_EQ(c.earlier.size(), 1u);
    }
  EXPECT_EQ(first_turns, 4u);
}

// The control: with env.sync_waits_for_tools (verl's behaviour) the same pause is answered only
// after the tool call returns, so the test above can tell the two apart.
TEST(RollouterEpisodes, WithSyncWaitsForToolsThePauseWaitsForTheTool) {
  test::coordinated_system cs;
  auto log = std::make_shared<log_t>();
  auto envlog = std::make_shared<held_env_log>();
  auto pool = holding_env(cs, envlog);
  auto r = episode_rollouter(cs, log, pool, episode_env(/*sync_waits_for_tools=*/true));
  caf::anon_send(r, start_atom::value);
  ASSERT_TRUE(cs.run_until([&] { return !envlog->held.empty(); }, 0));
  auto paused = std::make_shared<bool>(false);
  send_pause(cs, r, paused);
  cs.sched().run();
  EXPECT_FALSE(*paused) << "the pause was answered while a tool call was outstanding";
  caf::anon_send(pool, due_atom::value, uint64_t{0});
  ASSERT_TRUE(cs.run_until([&] { return *paused; }, 0));
}

namespace {

// An environment pool that ends every episode at its first turn (done, reward 1).
env_pool_actor ending_env(test::coordinated_system& cs) {
  return cs.track(cs.sys().spawn([](env_pool_actor::pointer self) -> env_pool_actor::behavior_type {
    return {
        [](env_atom, env_call&) -> caf::result<env_answer> {
          env_answer a;
          a.done = a.has_reward = true;
          a.reward = 1;
          return a;
        },
        [](due_atom, uint64_t) {},
        [self](stop_atom) -> int64_t {
          self->quit();
          return 0;
        },
    };
  }));
}

}  // namespace

// Catches a rollouter that asks for work only after decode chunks: with room for one group
// (rollout.max_batch 4 = one group of 4) and every episode ending at its environment, the group
// completes on the environment's answers, after the last chunk; without a request then, the
// second group the queue would grant is never asked for and the run stalls (found by
// chaos_every_config's env_fault round on gsm8k_tiny_hf).
TEST(RollouterEpisodes, AGroupCompletedByItsEnvironmentAsksForMoreWork) {
  test::coordinated_system cs;
  auto log = std::make_shared<log_t>();
  auto env = episode_env(/*sync_waits_for_tools=*/false);
  auto tok = char_tokenizer::builtin();
  std::vector<int32_t> prompt{tok.bos_id()};
  for (auto id : tok.encode("1+2=?\n"))
    prompt.push_back(id);
  auto r = cs.track(spawn_rollouter(
      cs.sys(),
      rollouter_args{0, env, tiny_weights(env, 0, 1), fake_queue(cs, log, 2), fake_reward(cs, log),
                     fake_controller(cs, log, prompt), ending_env(cs)}));
  caf::anon_send(r, start_atom::value);
  ASSERT_TRUE(cs.run_until([&] { return log->groups.size() == 2; }, 0))
      << log->groups.size() << " group(s) generated of the 2 the queue grants";
  for (auto& g : log->groups)
    for (auto& s : g.samples) {
      EXPECT_EQ(s.turns, 1);
      EXPECT_TRUE(s.has_env_reward);
    }
}
