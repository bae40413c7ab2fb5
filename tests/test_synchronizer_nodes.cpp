// The synchronizer with remote rollouters (worker nodes), against scripted fakes under CAF's
// test coordinator: a node joins (weights in chunks, then launch), every publish stages the new
// version on each node before anyone pauses, and a node that fails a step is dropped while the
// sync goes on with the others. No sleeps, no wall-clock waits: a deadline fires only when the
// test triggers it.

#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actors/env.hpp"
#include "actors/synchronizer.hpp"
#include "messages/cluster.hpp"
#include "runtime/cluster/weight_chunks.hpp"
#include "runtime/model/weight_blob.hpp"
#include "tests/actor_harness.hpp"
#include "tests/role_fakes.hpp"

using namespace asyncrl;

namespace {

constexpr int64_t chunk_bytes = 1024;  // cluster.chunk_bytes' minimum: many chunks per version

// Tells the fake agent to answer its oldest held chunk. The agent answers from inside its own
// handler: a response promise delivered from the test's thread would enqueue through the
// agent's execution unit, which under the test coordinator is a stack object that is gone once
// the agent's last job returned (use after scope, a crash).
using release_atom = caf::atom_constant<caf::atom("release")>;

// What the fakes saw, in the order they handled it (every actor runs in the test's thread).
struct log_t {
  std::vector<std::string> events;
  std::vector<std::pair<std::string, weight_snapshot>> loaded;  // rollouter name, snapshot
  std::vector<int64_t> synced;
  std::vector<std::pair<caf::actor, std::string>> lost;  // agent, why
  std::vector<std::string> failures;
};
using log_ptr = std::shared_ptr<log_t>;

/// Indices of the events that start with `prefix`.
std::vector<size_t> where(const log_ptr& log, const std::string& prefix) {
  std::vector<size_t> out;
  for (size_t i = 0; i < log->events.size(); ++i)
    if (log->events[i].rfind(prefix, 0) == 0) out.push_back(i);
  return out;
}

/// The rest of each event that starts with `prefix`.
std::vector<std::string> suffixes(const log_ptr& log, const std::string& prefix) {
  std::vector<std::string> out;
  for (auto i : where(log, prefix))
    out.push_back(log->events[i].substr(prefix.size()));
  return out;
}

size_t count(const log_ptr& log, const std::string& prefix) {
  return where(log, prefix).size();
}

controller_actor fake_controller(test::coordinated_system& cs, log_ptr log) {
  test::controller_hooks h;
  h.fail = [log](const std::string& why) { log->failures.push_back(why); };
  h.lost = [log](const caf::actor& agent, const std::string& why) {
    log->events.push_back("controller lost");
    log->lost.emplace_back(agent, why);
  };
  return test::fake_controller(cs, std::move(h));
}

queue_actor fake_queue(test::coordinated_system& cs, log_ptr log) {
  test::queue_hooks h;
  h.synced = [log](int64_t v) {
    log->events.push_back("queue synced v" + std::to_string(v));
    log->synced.push_back(v);
  };
  return test::fake_queue(cs, std::move(h));
}

// A rollouter (local, or one a node launched) that logs "<name> pause <token>",
// "<name> load v<version>", "<name> resume <token>"; with `hang` it never answers a pause.
rollouter_actor fake_rollouter(test::coordinated_system& cs, log_ptr log, std::string name,
                               bool hang = false) {
  test::rollouter_hooks h;
  h.pause = [=](int64_t token) { log->events.push_back(name + " pause " + std::to_string(token)); };
  h.load = [=](const weight_snapshot& w) {
    log->events.push_back(name + " load v" + std::to_string(w.version));
    log->loaded.emplace_back(name, w);
  };
  h.resume = [=](int64_t token) {
    log->events.push_back(name + " resume " + std::to_string(token));
  };
  h.hang = hang;
  return test::fake_rollouter(cs, std::move(h));
}

// How the fake node agent behaves, and what it reassembled. The test may change the switches
// between steps.
struct agent_ctl {
  bool hold_stage = false;  // keep every stage reply: the test releases them, or never does
  bool fail_load = false;   // answer load with an error
  bool hold_load = false;   // never answer a load (its node is lost before it would)
  std::vector<caf::typed_response_promise<int64_t>> held_loads;
  std::vector<caf::actor> launched;  // what launch answers
  // Unanswered chunks (index, promise), oldest first; release_atom answers the front one.
  std::vector<std::pair<int32_t, caf::typed_response_promise<int64_t>>> held;
  std::map<int64_t, std::vector<char>> staged;  // complete versions, as reassembled
  std::map<int64_t, std::string> digests;       // the digest their chunks carried
  std::vector<std::string> refusals;            // what the assembler refused
};
using ctl_ptr = std::shared_ptr<agent_ctl>;

// A node agent that really reassembles the chunks (a version counts only if the whole matches
// the digest) and logs "agent stage v<v> <index>/<count>", "agent launch v<v>",
// "agent load v<v>"; "ack <index>" when it answers a held chunk.
node_agent_actor fake_agent(test::coordinated_system& cs, log_ptr log, ctl_ptr ctl) {
  return cs.track(
      cs.sys().spawn([=](node_agent_actor::pointer self) -> node_agent_actor::behavior_type {
        auto assembler = std::make_shared<weight_assembler>();
        // release_atom is not part of the interface: it arrives untyped, here.
        self->set_default_handler(
            [=](caf::scheduled_actor*, caf::message_view& x) -> caf::result<caf::message> {
              if (!x.content().match_elements<release_atom>() || ctl->held.empty())
                return caf::sec::unexpected_message;
              auto [index, rp] = ctl->held.front();
              ctl->held.erase(ctl->held.begin());
              log->events.push_back("ack " + std::to_string(index));
              rp.deliver(int64_t{0});
              return caf::message{};
            });
        return {
            [=](stage_atom, weight_chunk& c) -> caf::result<int64_t> {
              log->events.push_back("agent stage v" + std::to_string(c.version) + " " +
                                    std::to_string(c.index) + "/" + std::to_string(c.count));
              auto why = assembler->add(c.version, c.index, c.count, c.offset, c.total_bytes,
                                        c.digest, c.bytes);
              if (!why.empty()) {
                ctl->refusals.push_back(why);
                return caf::make_error(caf::sec::invalid_argument, why);
              }
              const auto so_far = assembler->received();
              if (assembler->complete()) {
                ctl->staged[c.version] = assembler->take();
                ctl->digests[c.version] = c.digest;
              }
              if (ctl->hold_stage) {
                ctl->held.emplace_back(c.index, self->make_response_promise<int64_t>());
                return ctl->held.back().second;
              }
              return so_far;
            },
            // A node that declines the weights link (as a worker with
            // cluster.weights_transport=caf does): the synchronizer must fall back to chunks.
            [=](link_atom, std::string&, int32_t, int64_t) -> caf::result<bool> {
              log->events.push_back("agent declines the link");
              return false;
            },
            [=](stage_atom, weight_broadcast& wb) -> caf::result<int64_t> {
              log->events.push_back("agent broadcast v" + std::to_string(wb.version));
              return caf::make_error(caf::sec::invalid_argument, "fake agent: no link");
            },
            [](link_atom, std::string&) {},
            [](stage_atom, int64_t, std::string&) {},
            [=](launch_atom, int64_t v) -> caf::result<std::vector<caf::actor>> {
              log->events.push_back("agent launch v" + std::to_string(v));
              if (!ctl->staged.count(v))
                return caf::make_error(caf::sec::invalid_argument, "launch: v not staged");
              return ctl->launched;
            },
            [=](load_atom, int64_t v) -> caf::result<int64_t> {
              log->events.push_back("agent load v" + std::to_string(v));
              if (ctl->fail_load)
                return caf::make_error(caf::sec::runtime_error, "fake agent: load refused");
              if (ctl->hold_load) {
                ctl->held_loads.push_back(self->make_response_promise<int64_t>());
                return ctl->held_loads.back();
              }
              if (!ctl->staged.count(v))
                return caf::make_error(caf::sec::invalid_argument, "load: v not staged");
              return v;
            },
            [](stop_atom) {},
        };
      }));
}

env_ptr cluster_env(std::vector<std::string> overrides = {}) {
  overrides.push_back("cluster.chunk_bytes=" + std::to_string(chunk_bytes));
  return test::tiny_env(overrides);
}

// Weights built by hand (no model needed): 3,000 floats, about 12 KB packed, so a dozen chunks.
weight_snapshot make_weights(int64_t version, float seed) {
  auto b = std::make_shared<weight_blob>();
  b->names = {"embed", "head"};
  b->shapes = {{40, 50}, {1000}};
  b->resize(3000);
  for (int64_t i = 0; i < b->numel(); ++i)
    b->floats()[i] = seed + 0.001f * static_cast<float>(i);
  return weight_snapshot{version, b};
}

synchronizer_actor make_sync(test::coordinated_system& cs, const env_ptr& env, log_ptr log,
                             weight_snapshot initial, std::vector<rollouter_actor> local) {
  return cs.track(spawn_synchronizer(cs.sys(), synchronizer_args{env,
                                                                 std::move(initial),
                                                                 {},
                                                                 std::move(local),
                                                                 fake_queue(cs, log),
                                                                 fake_controller(cs, log)}));
}

// The requesters below are tracked (killed at the end) because a failing synchronizer may never
// answer them, and the actor system's destructor would then wait for them forever.
struct join_result {
  bool done = false;
  std::vector<caf::actor> handles;
  std::string error;
};

std::shared_ptr<join_result> request_join(test::coordinated_system& cs, synchronizer_actor sync,
                                          node_agent_actor agent, int32_t first, int32_t n) {
  auto out = std::make_shared<join_result>();
  auto a = caf::actor_cast<caf::actor>(agent);
  cs.track(cs.sys().spawn([=](caf::event_based_actor* self) {
    self->request(sync, caf::infinite, join_atom::value, a, first, n)
        .then(
            [=](std::vector<caf::actor>& hs) {
              out->done = true;
              out->handles = hs;
            },
            [=](caf::error& e) {
              out->done = true;
              out->error = self->system().render(e);
            });
  }));
  return out;
}

using report_ptr = std::shared_ptr<std::optional<sync_report>>;

report_ptr publish(test::coordinated_system& cs, synchronizer_actor sync, weight_snapshot w) {
  auto out = std::make_shared<std::optional<sync_report>>();
  cs.track(cs.sys().spawn([=](caf::event_based_actor* self) {
    self->request(sync, caf::infinite, publish_atom::value, w).then([=](sync_report& r) {
      *out = r;
    });
  }));
  return out;
}

// Joins a node whose agent answers every chunk at once; true once it is a member.
bool join_now(test::coordinated_system& cs, synchronizer_actor sync, node_agent_actor agent,
              int32_t first, int32_t n) {
  auto j = request_join(cs, sync, agent, first, n);
  if (!cs.run_until([&] { return j->done; }, 0)) return false;
  EXPECT_EQ(j->error, "");
  return j->error.empty();
}

// "0/12", "1/12", ... "11/12": every chunk of a version once, in order.
std::vector<std::string> in_order(int32_t n) {
  std::vector<std::string> out;
  for (int32_t i = 0; i < n; ++i)
    out.push_back(std::to_string(i) + "/" + std::to_string(n));
  return out;
}

int32_t chunks_of(const weight_snapshot& w) {
  return chunk_count(static_cast<int64_t>(pack_weights(w).size()), chunk_bytes);
}

// What every test sets up: the actor system, the log the fakes write, the fake node agent's
// switches, and (once start() has spawned them) the agent and the synchronizer. A test spawns
// its rollouters first, then calls start(), in the order the tests have always spawned them:
// the test coordinator runs the actors in that order.
class SynchronizerNodes : public ::testing::Test {
 protected:
  // A fake rollouter named `name` that writes to `log`; with `hang` it never answers a pause.
  rollouter_actor rollouter(std::string name, bool hang = false) {
    return fake_rollouter(cs, log, std::move(name), hang);
  }

  // Spawns the node agent, which launches the `remote` rollouters, then the synchronizer with
  // the `local` rollouters, `env`, and `initial` as its current weights.
  void start(std::vector<rollouter_actor> local, const std::vector<rollouter_actor>& remote,
             const env_ptr& env = cluster_env(), weight_snapshot initial = make_weights(0, 1.f)) {
    for (const auto& r : remote)
      ctl->launched.push_back(caf::actor_cast<caf::actor>(r));
    agent = fake_agent(cs, log, ctl);
    sync = make_sync(cs, env, log, std::move(initial), std::move(local));
  }

  test::coordinated_system cs;  // first in, last out: it kills the tracked actors
  log_ptr log = std::make_shared<log_t>();
  ctl_ptr ctl = std::make_shared<agent_ctl>();
  node_agent_actor agent;
  synchronizer_actor sync;
};

TEST_F(SynchronizerNodes, JoinStagesTheCurrentWeightsInChunksThenLaunches) {
  // Fails if: the chunks are cut, ordered or numbered wrongly, or the digest is not that of
  // pack_weights(current) (the assembler refuses, or the bytes differ); more than 4 chunks are in
  // flight, or the window stalls; launch is sent before the last chunk is acknowledged (the node
  // would launch rollouters without weights), or names another version; the joiner gets
  // something other than the handles the agent launched.
  auto w0 = make_weights(3, 1.f);
  const auto packed = pack_weights(w0);
  const auto n = chunks_of(w0);
  ASSERT_GT(n, 4) << "the weights must need more chunks than the window holds";
  auto remote = rollouter("remote");
  ctl->hold_stage = true;
  start({}, {remote}, cluster_env(), w0);
  auto joined = request_join(cs, sync, agent, 0, 1);
  // Acknowledge the chunks one at a time, oldest first; between acks, count those in flight.
  size_t most = 0;
  int32_t acked = 0;
  for (;;) {
    cs.sched().run();
    if (acked == n) break;
    EXPECT_EQ(count(log, "agent launch"), 0u) << "launch before chunk " << acked << " was acked";
    EXPECT_LE(ctl->held.size(), 4u) << "more than 4 chunks in flight";
    most = std::max(most, ctl->held.size());
    if (ctl->held.empty()) break;  // stalled
    EXPECT_EQ(ctl->held.front().first, acked);
    caf::anon_send(caf::actor_cast<caf::actor>(agent), release_atom::value);
    ++acked;
  }
  EXPECT_EQ(acked, n) << "staging stalled with chunks unsent";
  EXPECT_EQ(most, 4u) << "the chunks are pipelined, 4 in flight";
  EXPECT_EQ(suffixes(log, "agent stage v3 "), in_order(n));
  EXPECT_TRUE(ctl->refusals.empty()) << ctl->refusals.front();
  ASSERT_EQ(ctl->staged.count(3), 1u) << "v3 was never complete on the node";
  EXPECT_TRUE(ctl->staged[3] == packed) << "the node reassembled other bytes";
  EXPECT_EQ(ctl->digests[3], sha256_hex(packed.data(), packed.size()));
  // Launch once, for v3, after the last chunk's ack.
  auto launches = where(log, "agent launch v3");
  ASSERT_EQ(launches.size(), 1u);
  auto last_ack = where(log, "ack " + std::to_string(n - 1));
  ASSERT_EQ(last_ack.size(), 1u);
  EXPECT_GT(launches[0], last_ack[0]);
  ASSERT_TRUE(joined->done);
  EXPECT_EQ(joined->error, "");
  EXPECT_EQ(joined->handles, ctl->launched);
  EXPECT_EQ(count(log, "agent load"), 0u);  // a join stages and launches; it loads nothing
  EXPECT_TRUE(log->lost.empty());
}

TEST_F(SynchronizerNodes, PublishStagesFirstThenPausesLoadsAndResumesLocalAndRemote) {
  // Fails if: a pause is sent before the node holds the whole new version (the pause would then
  // cover the transfer, or a load could find nothing staged); the two rollouters get different
  // tokens or a resume without their pause's token (a rollouter paused forever); the remote
  // rollouter gets the snapshot itself or the agent loads more than once (one copy per node);
  // the local rollouter gets another snapshot, or a copy; the queue hears of v1 before every
  // load is done (a new staleness window under old weights).
  auto local = rollouter("local");
  auto remote = rollouter("remote");
  start({local}, {remote});
  ASSERT_TRUE(join_now(cs, sync, agent, 1, 1));
  log->events.clear();

  auto w1 = make_weights(1, 2.f);
  const auto n = chunks_of(w1);
  auto report = publish(cs, sync, w1);
  ASSERT_TRUE(cs.run_until([&] { return report->has_value(); }, 0));
  cs.run_until([] { return false; }, 0);
  EXPECT_TRUE((*report)->ok) << (*report)->error;
  EXPECT_EQ((*report)->version, 1);
  EXPECT_EQ((*report)->workers, 2);

  // Staged in full, in order, before anyone paused.
  EXPECT_EQ(suffixes(log, "agent stage v1 "), in_order(n));
  ASSERT_EQ(ctl->staged.count(1), 1u);
  const auto packed = pack_weights(w1);
  EXPECT_TRUE(ctl->staged[1] == packed);
  EXPECT_EQ(ctl->digests[1], sha256_hex(packed.data(), packed.size()));
  auto stages = where(log, "agent stage v1 ");
  auto local_pause = where(log, "local pause ");
  auto remote_pause = where(log, "remote pause ");
  ASSERT_EQ(local_pause.size(), 1u);
  ASSERT_EQ(remote_pause.size(), 1u);
  ASSERT_FALSE(stages.empty());
  EXPECT_LT(stages.back(), std::min(local_pause[0], remote_pause[0]));

  // One token for the attempt, on every pause and every resume.
  const auto token = suffixes(log, "local pause ")[0];
  EXPECT_EQ(suffixes(log, "remote pause "), std::vector<std::string>{token});
  EXPECT_EQ(suffixes(log, "local resume "), std::vector<std::string>{token});
  EXPECT_EQ(suffixes(log, "remote resume "), std::vector<std::string>{token});

  // Loads after both pauses: the local rollouter gets the snapshot (shared, not copied), the
  // node's agent the version, once; the remote rollouter itself gets no snapshot.
  auto local_load = where(log, "local load v1");
  auto agent_load = where(log, "agent load v1");
  ASSERT_EQ(local_load.size(), 1u);
  ASSERT_EQ(agent_load.size(), 1u);
  EXPECT_EQ(count(log, "agent load"), 1u);
  EXPECT_EQ(count(log, "remote load"), 0u);
  const auto last_pause = std::max(local_pause[0], remote_pause[0]);
  EXPECT_GT(local_load[0], last_pause);
  EXPECT_GT(agent_load[0], last_pause);
  ASSERT_EQ(log->loaded.size(), 1u);
  EXPECT_EQ(log->loaded[0].second.version, 1);
  EXPECT_EQ(log->loaded[0].second.blob.get(), w1.blob.get());

  // The queue hears of v1 after every load; the resumes come after the loads too.
  auto synced = where(log, "queue synced v1");
  ASSERT_EQ(synced.size(), 1u);
  EXPECT_GT(synced[0], std::max(local_load[0], agent_load[0]));
  EXPECT_EQ(log->synced, std::vector<int64_t>{1});
  EXPECT_GT(where(log, "local resume ")[0], std::max(local_load[0], agent_load[0]));
  EXPECT_GT(where(log, "remote resume ")[0], std::max(local_load[0], agent_load[0]));
  EXPECT_TRUE(log->lost.empty());
  EXPECT_TRUE(log->failures.empty());
}

TEST_F(SynchronizerNodes, ANodeThatFailsItsLoadIsDroppedAndLeftOutOfTheNextSync) {
  // Fails if: a node's load error fails the whole sync (or the run) instead of dropping the
  // node; the controller is not told which agent was lost (its work would never be
  // regenerated); the dropped node stays a member and the next publish stages, pauses or loads
  // it again (every later sync would fail or hang on a dead node).
  auto local = rollouter("local");
  auto remote = rollouter("remote");
  ctl->fail_load = true;
  start({local}, {remote});
  ASSERT_TRUE(join_now(cs, sync, agent, 1, 1));
  log->events.clear();

  auto r1 = publish(cs, sync, make_weights(1, 2.f));
  ASSERT_TRUE(cs.run_until([&] { return r1->has_value(); }, 0));
  cs.run_until([] { return false; }, 0);
  EXPECT_TRUE((*r1)->ok) << (*r1)->error;
  EXPECT_EQ((*r1)->workers, 1);  // the remote rollouter went with its node
  EXPECT_EQ(count(log, "agent load v1"), 1u);
  ASSERT_EQ(log->lost.size(), 1u);
  EXPECT_EQ(log->lost[0].first, caf::actor_cast<caf::actor>(agent));
  EXPECT_NE(log->lost[0].second.find("load"), std::string::npos) << log->lost[0].second;
  EXPECT_EQ(count(log, "local load v1"), 1u);
  EXPECT_EQ(count(log, "local resume "), 1u);
  EXPECT_EQ(log->synced, std::vector<int64_t>{1});
  EXPECT_TRUE(log->failures.empty()) << log->failures.front();

  // The next publish does not contact the node at all.
  const auto mark = log->events.size();
  auto r2 = publish(cs, sync, make_weights(2, 3.f));
  ASSERT_TRUE(cs.run_until([&] { return r2->has_value(); }, 0));
  cs.run_until([] { return false; }, 0);
  EXPECT_TRUE((*r2)->ok) << (*r2)->error;
  EXPECT_EQ((*r2)->workers, 1);
  for (size_t i = mark; i < log->events.size(); ++i) {
    const auto& e = log->events[i];
    EXPECT_TRUE(e.rfind("agent", 0) != 0 && e.rfind("remote", 0) != 0)
        << "the dropped node was contacted: " << e;
  }
  EXPECT_EQ(count(log, "local load v2"), 1u);
  EXPECT_EQ(log->synced, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(log->lost.size(), 1u);
  EXPECT_TRUE(log->failures.empty());
}

TEST_F(SynchronizerNodes, ANodeThatNeverAcknowledgesAChunkIsDroppedAtTheDeadline) {
  // Fails if: stage requests carry no deadline (the sync waits forever for a silent node); a
  // stage failure does not move the sync on (it hangs after the drop) or fails it; the silent
  // node's rollouter is paused although the node never got the weights (it would stay paused).
  auto local = rollouter("local");
  auto remote = rollouter("remote");
  start({local}, {remote}, cluster_env({"cluster.request_timeout_ms=500"}));
  ASSERT_TRUE(join_now(cs, sync, agent, 1, 1));
  log->events.clear();
  ctl->hold_stage = true;  // from now on the node takes chunks and never answers

  auto report = publish(cs, sync, make_weights(1, 2.f));
  cs.sched().run();
  EXPECT_FALSE(report->has_value());
  EXPECT_GE(count(log, "agent stage v1 "), 1u);
  EXPECT_EQ(count(log, "local pause"), 0u) << "paused before the node held the new version";
  EXPECT_TRUE(log->lost.empty());
  // Fire deadlines (the join's stale ones first, if any) until the node is dropped.
  int fired = 0;
  while (log->lost.empty() && cs.sched().trigger_timeout()) {
    ++fired;
    cs.sched().run();
  }
  ASSERT_EQ(log->lost.size(), 1u) << "no deadline dropped the silent node (" << fired << " fired)";
  EXPECT_EQ(log->lost[0].first, caf::actor_cast<caf::actor>(agent));
  EXPECT_NE(log->lost[0].second.find("chunk"), std::string::npos) << log->lost[0].second;
  // The rest needs no further deadline.
  ASSERT_TRUE(cs.run_until([&] { return report->has_value(); }, 0));
  cs.run_until([] { return false; }, 0);
  EXPECT_TRUE((*report)->ok) << (*report)->error;
  EXPECT_EQ((*report)->workers, 1);
  auto pauses = suffixes(log, "local pause ");
  ASSERT_EQ(pauses.size(), 1u);
  EXPECT_EQ(suffixes(log, "local resume "), pauses);
  EXPECT_EQ(count(log, "local load v1"), 1u);
  EXPECT_EQ(count(log, "remote "), 0u);
  EXPECT_EQ(count(log, "agent load"), 0u);
  EXPECT_EQ(log->synced, std::vector<int64_t>{1});
  EXPECT_TRUE(log->failures.empty());
}

TEST_F(SynchronizerNodes, ARemoteRollouterThatNeverAnswersItsPauseDropsItsNode) {
  // Fails if: a remote rollouter's pause failure fails the sync (and, after the retries, the
  // run) as a local one does, instead of dropping its node; the dropped node's agent is still
  // asked to load; the local rollouter is not loaded and resumed with its pause's token.
  auto local = rollouter("local");
  auto remote = rollouter("remote", /*hang=*/true);
  start({local}, {remote}, cluster_env({"async_training.sync_retries=0"}));
  ASSERT_TRUE(join_now(cs, sync, agent, 1, 1));
  log->events.clear();

  auto report = publish(cs, sync, make_weights(1, 2.f));
  cs.sched().run();
  ASSERT_FALSE(report->has_value());
  ASSERT_EQ(count(log, "remote pause "), 1u);
  int fired = 0;
  while (log->lost.empty() && cs.sched().trigger_timeout()) {
    ++fired;
    cs.sched().run();
  }
  ASSERT_EQ(log->lost.size(), 1u) << "no deadline dropped the node (" << fired << " fired)";
  EXPECT_EQ(log->lost[0].first, caf::actor_cast<caf::actor>(agent));
  EXPECT_NE(log->lost[0].second.find("pause"), std::string::npos) << log->lost[0].second;
  ASSERT_TRUE(cs.run_until([&] { return report->has_value(); }, 0));
  cs.run_until([] { return false; }, 0);
  EXPECT_TRUE((*report)->ok) << (*report)->error;
  EXPECT_EQ((*report)->workers, 1);
  EXPECT_EQ(count(log, "local load v1"), 1u);
  EXPECT_EQ(count(log, "agent load"), 0u);
  EXPECT_EQ(suffixes(log, "local resume "), suffixes(log, "local pause "));
  EXPECT_EQ(log->synced, std::vector<int64_t>{1});
  EXPECT_TRUE(log->failures.empty()) << log->failures.front();
}

TEST_F(SynchronizerNodes, LeaveOfARemoteWorkerWaitingOnItsPauseLetsTheSyncComplete) {
  // A node with two rollouters; one never answers its pause and then leaves (its process lost
  // it). Fails if: leave does not take the worker out of the running sync (the sync waits for
  // its pause until the deadline, and then drops the whole node); the node's other rollouter is
  // not loaded (through the agent, once) or not resumed; the late failure of the departed
  // worker's pause, when its deadline fires after the sync, still drops the node.
  auto local = rollouter("local");
  auto ra = rollouter("ra", /*hang=*/true);
  auto rb = rollouter("rb");
  start({local}, {ra, rb});
  ASSERT_TRUE(join_now(cs, sync, agent, 1, 2));  // ra is worker 1, rb worker 2
  log->events.clear();

  auto report = publish(cs, sync, make_weights(1, 2.f));
  cs.sched().run();
  ASSERT_FALSE(report->has_value());
  ASSERT_EQ(count(log, "ra pause "), 1u);
  ASSERT_EQ(count(log, "rb pause "), 1u);
  ASSERT_EQ(count(log, "local pause "), 1u);
  EXPECT_EQ(count(log, "local load"), 0u);  // still waiting for ra
  EXPECT_EQ(count(log, "agent load"), 0u);

  caf::anon_send(sync, leave_atom::value, std::vector<int32_t>{1});
  cs.sched().run();  // no deadline fires
  ASSERT_TRUE(report->has_value()) << "the sync still waits for the departed worker";
  EXPECT_TRUE((*report)->ok) << (*report)->error;
  EXPECT_EQ((*report)->workers, 2);
  const auto token = suffixes(log, "local pause ")[0];
  EXPECT_EQ(suffixes(log, "rb pause "), std::vector<std::string>{token});
  EXPECT_EQ(count(log, "local load v1"), 1u);
  EXPECT_EQ(count(log, "agent load"), 1u);
  EXPECT_EQ(count(log, "agent load v1"), 1u);
  EXPECT_EQ(suffixes(log, "local resume "), std::vector<std::string>{token});
  EXPECT_EQ(suffixes(log, "rb resume "), std::vector<std::string>{token});
  EXPECT_EQ(log->synced, std::vector<int64_t>{1});
  EXPECT_TRUE(log->lost.empty());

  // The departed worker's pause now runs out: nothing may come of it.
  const auto seen = log->events.size();
  while (cs.sched().trigger_timeout())
    cs.sched().run();
  EXPECT_EQ(log->events.size(), seen);
  EXPECT_TRUE(log->lost.empty()) << log->lost.front().second;
  EXPECT_TRUE(log->failures.empty()) << log->failures.front();
}

TEST_F(SynchronizerNodes, LeaveOfANodesLastWorkerMidSyncSkipsTheNode) {
  // The node's only rollouter never answers its pause and leaves. Fails if: the node outlives
  // its last worker (its agent is still asked to load, or the sync waits for it); the sync does
  // not complete for the local rollouter without a deadline.
  auto local = rollouter("local");
  auto remote = rollouter("remote", /*hang=*/true);
  start({local}, {remote});
  ASSERT_TRUE(join_now(cs, sync, agent, 1, 1));
  log->events.clear();

  auto report = publish(cs, sync, make_weights(1, 2.f));
  cs.sched().run();
  ASSERT_FALSE(report->has_value());
  ASSERT_EQ(count(log, "remote pause "), 1u);
  caf::anon_send(sync, leave_atom::value, std::vector<int32_t>{1});
  cs.sched().run();
  ASSERT_TRUE(report->has_value()) << "the sync still waits for the departed worker";
  EXPECT_TRUE((*report)->ok) << (*report)->error;
  EXPECT_EQ((*report)->workers, 1);
  EXPECT_EQ(count(log, "local load v1"), 1u);
  EXPECT_EQ(count(log, "agent load"), 0u);
  EXPECT_EQ(suffixes(log, "local resume "), suffixes(log, "local pause "));
  EXPECT_EQ(log->synced, std::vector<int64_t>{1});

  // The next publish neither stages to nor pauses the node.
  const auto mark = log->events.size();
  auto r2 = publish(cs, sync, make_weights(2, 3.f));
  ASSERT_TRUE(cs.run_until([&] { return r2->has_value(); }, 0));
  EXPECT_TRUE((*r2)->ok) << (*r2)->error;
  for (size_t i = mark; i < log->events.size(); ++i)
    EXPECT_TRUE(log->events[i].rfind("agent", 0) != 0 && log->events[i].rfind("remote", 0) != 0)
        << log->events[i];
  while (cs.sched().trigger_timeout())
    cs.sched().run();
  EXPECT_TRUE(log->lost.empty());
  EXPECT_TRUE(log->failures.empty());
}

TEST_F(SynchronizerNodes, LeaveOfANodeWaitingOnItsLoadCompletesTheSync) {
  // The segfault of a SIGKILLed or cut-off worker (cluster_kill, the partition tests): the sync
  // waits only for the node's load when the node leaves. The leave completed the sync from
  // inside next_phase, and finish() reset the running attempt that next_phase held by reference
  // (a null dereference). Fails if: the synchronizer crashes; the sync does not complete for the
  // local rollouter without a deadline; the local rollouter is not resumed.
  auto local = rollouter("local");
  auto remote = rollouter("remote");
  start({local}, {remote});
  ASSERT_TRUE(join_now(cs, sync, agent, 1, 1));
  log->events.clear();
  ctl->hold_load = true;

  auto report = publish(cs, sync, make_weights(1, 2.f));
  cs.sched().run();
  ASSERT_FALSE(report->has_value());
  ASSERT_EQ(count(log, "local load v1"), 1u);
  ASSERT_EQ(count(log, "agent load v1"), 1u);  // held: the sync waits for the node alone

  caf::anon_send(sync, leave_atom::value, std::vector<int32_t>{1});
  cs.sched().run();
  ASSERT_TRUE(report->has_value()) << "the sync still waits for the departed node";
  EXPECT_TRUE((*report)->ok) << (*report)->error;
  EXPECT_EQ((*report)->workers, 1);
  EXPECT_EQ(suffixes(log, "local resume "), suffixes(log, "local pause "));
  EXPECT_EQ(log->synced, std::vector<int64_t>{1});
  EXPECT_TRUE(log->failures.empty()) << log->failures.front();
}

TEST_F(SynchronizerNodes, LeaveOfTheOnlyNodeMidStageCompletesTheSyncWithNobody) {
  // Every rollouter is remote on one node, and the node is partitioned away while its chunks
  // are unacknowledged (the controller cut from every worker). Fails if: the synchronizer
  // crashes (the same reset-under-reference as above, reached through the stage phase with no
  // member left to pause); the sync waits for a deadline; it reports a failure instead of a
  // version that no rollouter holds yet (the rejoining workers get it at their join).
  auto remote = rollouter("remote");
  start({}, {remote});
  ASSERT_TRUE(join_now(cs, sync, agent, 0, 1));
  log->events.clear();
  ctl->hold_stage = true;

  auto report = publish(cs, sync, make_weights(1, 2.f));
  cs.sched().run();
  ASSERT_FALSE(report->has_value());
  ASSERT_GE(count(log, "agent stage v1"), 1u);

  caf::anon_send(sync, leave_atom::value, std::vector<int32_t>{0});
  cs.sched().run();
  ASSERT_TRUE(report->has_value()) << "the sync still waits for the departed node";
  EXPECT_TRUE((*report)->ok) << (*report)->error;
  EXPECT_EQ((*report)->workers, 0);
  EXPECT_EQ(count(log, "remote pause"), 0u);
  EXPECT_EQ(log->synced, std::vector<int64_t>{1});
  EXPECT_TRUE(log->failures.empty()) << log->failures.front();
}

TEST_F(SynchronizerNodes, ANodeThatDeclinesTheWeightsLinkGetsChunks) {
  // cluster.weights_transport=collective, and the node declines its link (a worker started with
  // cluster.weights_transport=caf, or one that cannot reach the link's port). Fails if: the join
  // fails or waits instead of falling back; the synchronizer still sends the version over the
  // link (the agent would refuse it: "agent broadcast"); a later sync forgets the fallback.
  auto remote = rollouter("remote");
  start({}, {remote}, cluster_env({"cluster.weights_transport=collective"}));
  ASSERT_TRUE(join_now(cs, sync, agent, 0, 1));
  EXPECT_EQ(count(log, "agent declines the link"), 1u);
  EXPECT_EQ(count(log, "agent broadcast"), 0u);
  EXPECT_EQ(count(log, "agent stage v0"), static_cast<size_t>(chunks_of(make_weights(0, 1.f))));
  EXPECT_EQ(count(log, "agent launch v0"), 1u);

  auto report = publish(cs, sync, make_weights(1, 2.f));
  ASSERT_TRUE(cs.run_until([&] { return report->has_value(); }, 0));
  EXPECT_TRUE((*report)->ok) << (*report)->error;
  EXPECT_EQ(count(log, "agent broadcast"), 0u);
  EXPECT_EQ(count(log, "agent stage v1"), static_cast<size_t>(chunks_of(make_weights(1, 2.f))));
  EXPECT_EQ(count(log, "agent load v1"), 1u);
}

}  // namespace
