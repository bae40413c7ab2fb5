// The Trainer alone, under CAF's test coordinator, against scripted fakes: a queue that hands
// out the groups a test puts into it (a set number per delivery, holding a pull until a group
// comes), a synchronizer that records every publish, and the fake controller's hooks. Each test
// checks one rule of actors/trainer.cpp: the step boundary and the reports, the publish
// cadence, the deferred stop and its counts, live settings at the announced step, a checkpoint
// signal at the end of its sync window, and a step with nothing to train.

#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "actors/role_params.hpp"
#include "actors/trainer.hpp"
#include "runtime/model/model.hpp"
#include "runtime/model/model_io.hpp"
#include "runtime/model/weight_sync.hpp"
#include "tests/actor_harness.hpp"
#include "tests/role_fakes.hpp"

using namespace asyncrl;
using test::tiny_env;

namespace {

// Group `id`: 2 responses of differing length to one prompt, rewards 0 and 1, advantages -1 and
// +1 (a group with a training signal), one behaviour log-prob and version 0 per token.
scored_group make_group(uint64_t id, bool filtered = false) {
  scored_group g;
  g.group_id = id;
  g.prompt_index = id;
  g.seq = id;
  g.ground_truth = "3";
  g.filtered = filtered;
  for (uint32_t k = 0; k < 2; ++k) {
    scored_sample s;
    s.uid = id * 2 + k;
    s.group_id = id;
    s.index = k;
    s.prompt = {1, static_cast<int32_t>(5 + id % 10), 6};
    s.response = k == 0 ? std::vector<int32_t>{7, 8} : std::vector<int32_t>{9, 10, 11};
    s.logprobs.assign(s.response.size(), -1.5f);
    s.versions.assign(s.response.size(), 0);
    s.reward = k;
    s.advantage = k == 0 ? -1.0 : 1.0;
    g.samples.push_back(std::move(s));
  }
  return g;
}

// The scripted queue's state: the groups ready for the trainer, the pull it holds (when none is
// ready), and every pull it was asked (version, min, max).
struct queue_script {
  struct pull {
    int64_t version, min, max;
    bool operator==(const pull& o) const {
      return version == o.version && min == o.min && max == o.max;
    }
  };
  std::deque<scored_group> ready;
  int64_t per_delivery = 1;  // the most groups one delivery carries
  std::optional<caf::typed_response_promise<delivery>> waiting;
  int64_t waiting_min = 1, waiting_max = 1;
  std::vector<pull> pulls;
  int64_t delivered = 0;

  delivery take(int64_t max) {
    delivery d;
    const auto n = std::min<int64_t>({max, per_delivery, static_cast<int64_t>(ready.size())});
    for (int64_t i = 0; i < n; ++i) {
      d.groups.push_back(std::move(ready.front()));
      ready.pop_front();
    }
    d.stats.depth = static_cast<int64_t>(ready.size());
    delivered += n;
    return d;
  }
};

std::ostream& operator<<(std::ostream& os, const queue_script::pull& p) {
  return os << "(v" << p.version << ", " << p.min << ", " << p.max << ")";
}

// A queue that answers a pull from `q->ready` at once, or holds it until enough groups are put.
// The held pull is answered inside the queue's own put handler (a promise delivered from the
// test's thread, or from another actor, trips CAF 0.17's test coordinator).
queue_actor scripted_queue(test::coordinated_system& cs, std::shared_ptr<queue_script> q) {
  test::queue_hooks h;
  h.pull = [q](queue_actor::pointer self, int64_t version, int64_t min,
               int64_t max) -> caf::result<delivery> {
    q->pulls.push_back({version, min, max});
    if (static_cast<int64_t>(q->ready.size()) >= std::max<int64_t>(1, min)) return q->take(max);
    q->waiting = self->make_response_promise<delivery>();
    q->waiting_min = std::max<int64_t>(1, min);
    q->waiting_max = max;
    return *q->waiting;
  };
  h.put = [q](scored_group g) {
    q->ready.push_back(std::move(g));
    if (q->waiting && static_cast<int64_t>(q->ready.size()) >= q->waiting_min) {
      auto p = std::move(*q->waiting);
      q->waiting.reset();
      p.deliver(q->take(q->waiting_max));
    }
  };
  return test::fake_queue(cs, std::move(h));
}

constexpr double kSyncMs = 12.5;
constexpr int64_t kSyncBytes = 4321;

// A synchronizer that records the version of every publish and answers an ok report.
synchronizer_actor recording_sync(test::coordinated_system& cs,
                                  std::shared_ptr<std::vector<int64_t>> published) {
  test::sync_hooks h;
  h.publish = [published](const weight_snapshot& w) {
    published->push_back(w.version);
    sync_report r;
    r.version = w.version;
    r.time_ms = kSyncMs;
    r.bytes = kSyncBytes;
    r.workers = 1;
    return r;
  };
  return test::fake_synchronizer(cs, std::move(h));
}

// What the controller saw, in order.
struct seen_t {
  std::vector<step_report> reports;
  std::vector<trainer_checkpoint> checkpoints;
  std::vector<std::string> events;  // "report <step>", "checkpoint <step>"
  std::vector<std::string> failures;
};

// One trainer wired to the fakes. The trainer is tracked (killed at the end of the test if it
// has not quit), and a monitor records why it went down.
struct rig {
  test::coordinated_system cs;
  env_ptr env;
  std::shared_ptr<queue_script> q = std::make_shared<queue_script>();
  std::shared_ptr<std::vector<int64_t>> published = std::make_shared<std::vector<int64_t>>();
  std::shared_ptr<seen_t> seen = std::make_shared<seen_t>();
  std::shared_ptr<std::optional<caf::error>> down = std::make_shared<std::optional<caf::error>>();
  CausalLM model{nullptr};
  queue_actor queue;
  trainer_actor trainer;

  explicit rig(std::vector<std::string> overrides) {
    env = tiny_env(overrides);
    queue = scripted_queue(cs, q);
    test::controller_hooks ch;
    auto s = seen;
    ch.report = [s](const step_report& r) {
      s->reports.push_back(r);
      s->events.push_back("report " + std::to_string(r.step));
    };
    ch.checkpoint = [s](const trainer_checkpoint& c) {
      s->checkpoints.push_back(c);
      s->events.push_back("checkpoint " + std::to_string(c.step));
    };
    ch.fail = [s](const std::string& why) { s->failures.push_back(why); };
    auto ctrl = test::fake_controller(cs, std::move(ch));
    model = init_causal_lm(env->model, 0.1, 7, torch::kCPU);
    trainer = cs.track(spawn_trainer(
        cs.sys(),
        trainer_args{
            env, snapshot_weights(*model, 0), queue, recording_sync(cs, published), ctrl, {}, {}}));
    auto t = trainer;
    auto d = down;
    cs.track(cs.sys().spawn([t, d](caf::event_based_actor* self) -> caf::behavior {
      self->monitor(t);
      self->set_down_handler([d](caf::down_msg& dm) { *d = dm.reason; });
      return {[](int32_t) {}};  // stays alive to see the trainer go down
    }));
  }

  /// Groups ready in the queue before the trainer starts (no message: the queue is idle).
  void preload(const std::vector<uint64_t>& ids) {
    for (auto id : ids)
      q->ready.push_back(make_group(id));
  }
  /// Groups the queue receives while the trainer runs (a held pull is answered with them).
  void put(const std::vector<uint64_t>& ids) {
    for (auto id : ids)
      caf::anon_send(queue, put_atom::value, make_group(id));
  }
  void start() { caf::anon_send(trainer, start_atom::value); }

  /// Sends a stop naming `expected` delivered groups; the answer lands in the returned slot.
  std::shared_ptr<std::optional<trainer_counts>> stop(int64_t expected) {
    auto out = std::make_shared<std::optional<trainer_counts>>();
    auto t = trainer;
    cs.track(cs.sys().spawn([t, out, expected](caf::event_based_actor* self) {
      self->request(t, caf::infinite, stop_atom::value, expected).then([out](trainer_counts& c) {
        *out = c;
      });
    }));
    return out;
  }

  /// Why the trainer went down; empty while it lives.
  std::string died() { return down->has_value() ? cs.sys().render(**down) : std::string(); }
};

void expect_counts(const trainer_counts& c, const trainer_counts& want) {
  EXPECT_EQ(c.deliveries, want.deliveries);
  EXPECT_EQ(c.received, want.received);
  EXPECT_EQ(c.trained, want.trained);
  EXPECT_EQ(c.filtered, want.filtered);
  EXPECT_EQ(c.held, want.held);
  EXPECT_EQ(c.steps, want.steps);
  EXPECT_EQ(c.skipped_steps, want.skipped_steps);
  EXPECT_EQ(c.version, want.version);
}

using pull = queue_script::pull;

// Bug: an off-by-one at the step boundary, a wrong pull size, or a step/pull past total_steps.
TEST(TrainerUnit, StepsEveryMiniBatchReportsGroupsInArrivalOrderAndStopsAtTotalSteps) {
  // periodic: 2 groups per step, 2 steps per sync, 3 steps in all.
  rig r({"data.train_batch_size=4", "trainer.ppo_mini_batch_size=2", "rollout.n=2",
         "trainer.total_steps=3", "checkpoint.every_steps=0"});
  r.q->per_delivery = 1;  // one group per delivery: every step streams in over two pulls
  r.preload({1, 0, 3, 2, 5, 4, 7, 6});
  r.start();
  r.cs.run_until([] { return false; }, 0);
  EXPECT_TRUE(r.died().empty()) << "the trainer died: " << r.died();
  const auto& rep = r.seen->reports;
  ASSERT_EQ(rep.size(), 3u);
  const std::vector<std::vector<uint64_t>> ids{{1, 0}, {3, 2}, {5, 4}};
  for (size_t i = 0; i < rep.size(); ++i) {
    SCOPED_TRACE("step " + std::to_string(i + 1));
    EXPECT_EQ(rep[i].step, static_cast<int64_t>(i + 1));
    EXPECT_EQ(rep[i].policy_version, static_cast<int64_t>(i + 1));
    EXPECT_EQ(rep[i].group_ids, ids[i]);
    EXPECT_EQ(rep[i].groups_trained, 2);
    EXPECT_EQ(rep[i].filtered_groups, 0);
    EXPECT_EQ(rep[i].samples, 4);
    EXPECT_EQ(rep[i].out_of_order_groups, 1);
    EXPECT_FALSE(rep[i].update.skipped);
  }
  // The old model is set at the start of each sync window (steps 1 and 3), not every step.
  EXPECT_EQ(rep[0].prox_version, 0);
  EXPECT_EQ(rep[1].prox_version, 0);
  EXPECT_EQ(rep[2].prox_version, 2);
  // Each pull asks for what the step still lacks, under the current version; none after the
  // last step (done): groups 7 and 6 stay in the queue.
  EXPECT_EQ(r.q->pulls,
            (std::vector<pull>{{0, 1, 2}, {0, 1, 1}, {1, 1, 2}, {1, 1, 1}, {2, 1, 2}, {2, 1, 1}}));
  EXPECT_EQ(r.q->ready.size(), 2u);
  EXPECT_EQ(*r.published, (std::vector<int64_t>{2}));  // after step 2; step 3 ends the run
  EXPECT_TRUE(r.seen->checkpoints.empty());
  EXPECT_TRUE(r.seen->failures.empty());
  // Everything delivered was trained: the stop is answered at once.
  auto counts = r.stop(6);
  ASSERT_TRUE(r.cs.run_until([&] { return counts->has_value(); }, 0));
  expect_counts(**counts, trainer_counts{6, 6, 6, 0, 0, 3, 0, 3});
}

// Bug: publishing at the wrong cadence (not every k steps), or a publish after the last step.
TEST(TrainerUnit, PublishesEveryTriggerParameterSyncStepSteps) {
  // fully_async, 1 group per step, k = 3: publishes after steps 3 and 6 of 7.
  rig r({"async_training.mode=fully_async", "async_training.trigger_parameter_sync_step=3",
         "trainer.ppo_mini_batch_size=1", "rollout.n=2", "trainer.total_steps=7",
         "checkpoint.every_steps=0"});
  r.q->per_delivery = 1;
  r.preload({0, 1, 2, 3, 4, 5, 6, 7, 8});
  r.start();
  r.cs.run_until([] { return false; }, 0);
  EXPECT_TRUE(r.died().empty()) << "the trainer died: " << r.died();
  const auto& rep = r.seen->reports;
  ASSERT_EQ(rep.size(), 7u);
  for (size_t i = 0; i < rep.size(); ++i) {
    EXPECT_EQ(rep[i].step, static_cast<int64_t>(i + 1));
    EXPECT_EQ(rep[i].policy_version, static_cast<int64_t>(i + 1));
    EXPECT_EQ(rep[i].group_ids, (std::vector<uint64_t>{i}));
  }
  EXPECT_EQ(*r.published, (std::vector<int64_t>{3, 6}));
  // A step's report is built before its own publish: step 3 knows of no sync yet; by the last
  // step the first sync's report has come back.
  EXPECT_EQ(rep[2].sync_time_ms, 0.0);
  EXPECT_EQ(rep[6].sync_time_ms, kSyncMs);
  EXPECT_EQ(rep[6].sync_bytes, kSyncBytes);
  EXPECT_EQ(r.q->pulls.size(), 7u);  // done after step 7: no eighth pull
  EXPECT_EQ(r.q->ready.size(), 2u);
  EXPECT_TRUE(r.seen->failures.empty());
}

// Bug: a stop answered before the groups in flight arrive, or groups after it trained, not held.
TEST(TrainerUnit, AStopWaitsForTheGroupsInFlightAndHoldsThem) {
  rig r({"data.train_batch_size=4", "trainer.ppo_mini_batch_size=2", "rollout.n=2",
         "trainer.total_steps=3", "checkpoint.every_steps=0"});
  r.q->per_delivery = 1;
  r.preload({0, 1, 2});
  r.start();
  // Step 1 is groups 0 and 1; group 2 opens step 2, whose next pull is held (nothing ready).
  r.cs.run_until([] { return false; }, 0);
  ASSERT_EQ(r.seen->reports.size(), 1u);
  ASSERT_TRUE(r.q->waiting.has_value());
  ASSERT_EQ(r.q->delivered, 3);
  // The queue has delivered 4: the 4th is still on its way.
  auto counts = r.stop(4);
  r.cs.run_until([] { return false; }, 0);
  EXPECT_FALSE(counts->has_value()) << "the stop was answered with a delivered group missing";
  r.put({3});
  ASSERT_TRUE(r.cs.run_until([&] { return counts->has_value(); }, 0));
  r.cs.run_until([] { return false; }, 0);
  // Groups 2 (consumed into a step that never ran) and 3 (arrived after the stop) are held;
  // the post-stop delivery is not counted as a delivery; nothing more was trained.
  expect_counts(**counts, trainer_counts{3, 4, 2, 0, 2, 1, 0, 1});
  EXPECT_EQ(r.seen->reports.size(), 1u) << "the trainer trained after its stop";
  EXPECT_EQ(r.q->pulls.size(), 4u) << "the trainer pulled after its stop";
  EXPECT_TRUE(r.seen->failures.empty());
}

// Bug: live settings adopted mid-step, or an announced step that ignores the outstanding pull.
TEST(TrainerUnit, LiveSettingsTakeEffectAtTheAnnouncedStep) {
  rig r({"data.train_batch_size=4", "trainer.ppo_mini_batch_size=2", "rollout.n=2",
         "trainer.total_steps=3", "checkpoint.every_steps=0", "trainer.lr=0.001"});
  r.q->per_delivery = 1;
  r.start();
  // The first pull (up to 2 groups: all of step 1) is held: the queue is empty.
  r.cs.run_until([] { return false; }, 0);
  ASSERT_TRUE(r.q->waiting.has_value());
  ASSERT_EQ(r.q->pulls, (std::vector<pull>{{0, 1, 2}}));
  auto s = live_settings_of(r.env->params.trainer);
  ASSERT_DOUBLE_EQ(s.lr, 0.001);
  s.lr = 0.004;
  auto announced = std::make_shared<std::optional<int64_t>>();
  auto t = r.trainer;
  r.cs.track(r.cs.sys().spawn([t, s, announced](caf::event_based_actor* self) {
    self->request(t, caf::infinite, set_atom::value, s).then([announced](int64_t step) {
      *announced = step;
    });
  }));
  ASSERT_TRUE(r.cs.run_until([&] { return announced->has_value(); }, 0));
  // The groups of the outstanding pull fill step 1: the new settings start with step 2.
  EXPECT_EQ(**announced, 2);
  r.put({0, 1, 2, 3, 4, 5});
  r.cs.run_until([] { return false; }, 0);
  EXPECT_TRUE(r.died().empty()) << "the trainer died: " << r.died();
  const auto& rep = r.seen->reports;
  ASSERT_EQ(rep.size(), 3u);
  EXPECT_DOUBLE_EQ(rep[0].update.lr, 0.001);
  EXPECT_DOUBLE_EQ(rep[1].update.lr, 0.004);
  EXPECT_DOUBLE_EQ(rep[2].update.lr, 0.004);
  EXPECT_EQ(rep[1].step, **announced);
  EXPECT_TRUE(r.seen->failures.empty());
}

// Bug: a checkpoint signal taken mid-step or mid-window (not at the window's end), or twice.
TEST(TrainerUnit, ACheckpointSignalWaitsForTheEndOfTheSyncWindow) {
  // periodic: 2 groups per step, 2 steps per sync window.
  rig r({"data.train_batch_size=4", "trainer.ppo_mini_batch_size=2", "rollout.n=2",
         "trainer.total_steps=3", "checkpoint.every_steps=0"});
  r.q->per_delivery = 1;
  r.preload({0});
  r.start();
  r.cs.run_until([] { return false; }, 0);
  ASSERT_TRUE(r.q->waiting.has_value());  // group 0 is in step 1, which waits for group 1
  caf::anon_send(r.trainer, checkpoint_atom::value);
  r.cs.run_until([] { return false; }, 0);
  EXPECT_TRUE(r.seen->checkpoints.empty()) << "a checkpoint was taken inside a step";
  r.put({1, 2, 3, 4, 5});
  r.cs.run_until([] { return false; }, 0);
  EXPECT_TRUE(r.died().empty()) << "the trainer died: " << r.died();
  // Step 1 ends inside the window; step 2 closes it (publish v2), and the checkpoint follows.
  EXPECT_EQ(r.seen->events,
            (std::vector<std::string>{"report 1", "report 2", "checkpoint 2", "report 3"}));
  ASSERT_EQ(r.seen->checkpoints.size(), 1u);
  const auto& c = r.seen->checkpoints[0];
  EXPECT_EQ(c.step, 2);
  EXPECT_EQ(c.steps_in_sync, 0);
  EXPECT_EQ(c.prox_version, 0);
  EXPECT_EQ(c.counts.received, 4);
  EXPECT_EQ(c.counts.trained, 4);
  EXPECT_EQ(c.counts.steps, 2);
  EXPECT_EQ(c.counts.version, 2);
  EXPECT_TRUE(c.held.empty());
  EXPECT_FALSE(c.state.empty());
  EXPECT_EQ(c.rollout_weights.version, 2);
  EXPECT_EQ(*r.published, (std::vector<int64_t>{2}));
  EXPECT_TRUE(r.seen->failures.empty());
}

// Bug: an all-filtered step stepped anyway (version bump, throw) or its groups counted trained.
TEST(TrainerUnit, AStepOfOnlyFilteredGroupsIsSkippedAndLeavesTheWeights) {
  rig r({"data.train_batch_size=4", "trainer.ppo_mini_batch_size=2", "rollout.n=2",
         "trainer.total_steps=3", "checkpoint.every_steps=0"});
  r.q->per_delivery = 2;  // a whole step per delivery
  r.q->ready.push_back(make_group(0, /*filtered=*/true));
  r.q->ready.push_back(make_group(1, /*filtered=*/true));
  r.preload({2, 3, 4, 5});
  const double initial_checksum = params_checksum(*r.model);
  r.start();
  r.cs.run_until([] { return false; }, 0);
  EXPECT_TRUE(r.died().empty()) << "the trainer died: " << r.died();
  const auto& rep = r.seen->reports;
  ASSERT_EQ(rep.size(), 3u);
  EXPECT_TRUE(rep[0].update.skipped);
  EXPECT_EQ(rep[0].policy_version, 0);
  EXPECT_EQ(rep[0].groups_trained, 0);
  EXPECT_EQ(rep[0].filtered_groups, 2);
  EXPECT_EQ(rep[0].samples, 0);
  EXPECT_EQ(rep[0].group_ids, (std::vector<uint64_t>{0, 1}));
  EXPECT_DOUBLE_EQ(rep[0].params_checksum, initial_checksum);
  EXPECT_FALSE(rep[1].update.skipped);
  EXPECT_EQ(rep[1].policy_version, 1);
  EXPECT_EQ(rep[1].groups_trained, 2);
  EXPECT_NE(rep[1].params_checksum, initial_checksum);
  EXPECT_EQ(rep[2].policy_version, 2);
  // The pull after the skipped step still names version 0.
  EXPECT_EQ(r.q->pulls, (std::vector<pull>{{0, 1, 2}, {0, 1, 2}, {1, 1, 2}}));
  EXPECT_EQ(*r.published, (std::vector<int64_t>{1}));  // after step 2, the window's end
  auto counts = r.stop(6);
  ASSERT_TRUE(r.cs.run_until([&] { return counts->has_value(); }, 0));
  expect_counts(**counts, trainer_counts{3, 6, 4, 2, 0, 3, 1, 2});
  EXPECT_TRUE(r.seen->failures.empty());
}

}  // namespace
