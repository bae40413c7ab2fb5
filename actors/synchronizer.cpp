#include "actors/synchronizer.hpp"

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include "actors/errors.hpp"
#include "actors/weight_stage.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>

#include "runtime/cluster/weight_chunks.hpp"
#include "runtime/dist/weight_link.hpp"
#include "runtime/model/weight_sync.hpp"

namespace asyncrl {

namespace {

using clock = std::chrono::steady_clock;

struct pending_publish {
  weight_snapshot weights;
  caf::typed_response_promise<sync_report> promise;
};

/// A worker process admitted with join; its rollouters are members with this agent.
struct pending_join {
  caf::actor agent;
  int32_t first = 0, count = 0;
  caf::typed_response_promise<std::vector<caf::actor>> promise;
};

struct member {
  rollouter_actor r;
  caf::actor agent;  // its node's agent; null for a rollouter in this process
};

struct node {
  caf::actor agent;
  int64_t staged = -1;  // the newest version the agent holds complete
  std::set<int32_t> workers;
  std::shared_ptr<weight_link> link;  // cluster.weights_transport=collective; null: CAF chunks
};

// Progress of one sync attempt: who has yet to answer the current phase.
enum class sync_phase { stage, pause, load, done };

struct sync_run {
  pending_publish job;
  clock::time_point t0 = clock::now();
  sync_phase phase = sync_phase::stage;
  std::set<int32_t> workers;        // local rollouters, or every rollouter in the pause phase
  std::set<caf::actor_addr> nodes;  // remote nodes in the stage and load phases
  bool failed = false;
  int64_t attempt = 0;
  int64_t token = 0;  // pairs each rollouter's pause with its resume (see the interface)
  std::shared_ptr<const std::vector<char>> packed;  // the weights as remote nodes get them
  std::string digest;
};

struct sync_state {
  static inline const char* name = "synchronizer";
  synchronizer_args args;
  std::map<int32_t, member> members;
  std::map<caf::actor_addr, node> nodes;
  sync_activity activity = sync_activity::idle;
  std::optional<pending_publish> next;
  std::vector<pending_join> joins;
  std::shared_ptr<sync_run> running;   // the attempt in progress
  std::shared_ptr<sync_run> retrying;  // a failed attempt waiting for its retry
  weight_snapshot current;             // the weights of the last completed sync
  // Sends over weights links in flight, by id: what to call with their outcome.
  std::map<int64_t, std::function<void(const std::string&)>> link_sends;
  int64_t link_ids = 0;
  std::map<const weight_link*, int64_t> link_sent;  // versions sent per link (a fault counts them)
  // Links of nodes that are gone, kept until their call in progress ends (within the link's
  // timeout): destroying a busy link would block this actor until then.
  std::vector<std::shared_ptr<weight_link>> retired;
  int64_t syncs = 0;
  int64_t retries = 0;
  int64_t tokens = 0;

  std::chrono::milliseconds remote_timeout() const {
    return std::chrono::milliseconds(args.env->params.sync.request_timeout_ms);
  }
};

using sync_ptr = synchronizer_actor::stateful_pointer<sync_state>;

void start_sync(sync_ptr self, pending_publish job);
void start_attempt(sync_ptr self, std::shared_ptr<sync_run> run);
void next_phase(sync_ptr self, std::shared_ptr<sync_run> run);
void idle_again(sync_ptr self);

// `run` by value, as in next_phase: the caller's handle may be st.running, which this resets.
void finish(sync_ptr self, std::shared_ptr<sync_run> run, bool ok, const std::string& why) {
  auto& st = self->state;
  run->phase = sync_phase::done;
  st.running.reset();
  // Always paired with the pause, and sent at the pause's priority: a resume at normal priority
  // could be overtaken by the next sync's pause (the rollouter also counts pauses, see there).
  for (auto& [w, m] : st.members)
    self->send<caf::message_priority::high>(m.r, resume_atom::value, run->token);
  if (!ok && run->attempt < st.args.env->params.sync.retries) {
    // Retried after a short pause: a crashed rollouter's replacement has time to arrive.
    ++run->attempt;
    ++st.retries;
    spdlog::warn("synchronizer: {}; retry {} of {}", why, run->attempt,
                 st.args.env->params.sync.retries);
    st.retrying = run;
    self->delayed_send(self, std::chrono::milliseconds(100 * run->attempt), retry_atom::value);
    return;
  }
  sync_report rep;
  rep.version = run->job.weights.version;
  rep.time_ms = std::chrono::duration<double, std::milli>(clock::now() - run->t0).count();
  rep.bytes = run->job.weights.blob ? run->job.weights.blob->bytes() : 0;
  rep.workers = static_cast<int32_t>(st.members.size());
  rep.ok = ok;
  rep.error = why;
  if (ok) {
    ++st.syncs;
    st.current = run->job.weights;
  } else {
    spdlog::error("synchronizer: {}", why);
    self->send(st.args.controller, fail_atom::value, why);
  }
  run->job.promise.deliver(rep);
  idle_again(self);
}

// A link no one uses any more: freed now if it is idle, else once its call is over.
void retire(sync_state& st, std::shared_ptr<weight_link> link) {
  // Its fault counter goes with it: the address may belong to a later link once this one is freed.
  if (link) st.link_sent.erase(link.get());
  auto& r = st.retired;
  r.erase(std::remove_if(r.begin(), r.end(), [](const auto& l) { return l->idle(); }), r.end());
  if (link && !link->idle()) r.push_back(std::move(link));
}

// A remote node failed a step (a deadline, an error, a lost connection): it leaves the run,
// the controller regenerates its work, and the sync goes on with the others.
void drop_node(sync_ptr self, const caf::actor_addr& addr, const std::string& why) {
  auto& st = self->state;
  auto it = st.nodes.find(addr);
  if (it == st.nodes.end()) return;
  auto n = std::move(it->second);
  st.nodes.erase(it);
  retire(st, std::move(n.link));
  for (auto w : n.workers)
    st.members.erase(w);
  spdlog::warn("synchronizer: dropping worker node with rollouter(s) {}: {}",
               fmt::join(n.workers, ","), why);
  self->send(st.args.controller, lost_atom::value, n.agent, why);
  if (auto run = st.running) {
    run->nodes.erase(addr);
    for (auto w : n.workers)
      run->workers.erase(w);
    next_phase(self, run);
  }
}

// Replies of an earlier, failed attempt, or of a phase already left, are ignored.
bool stale(const sync_run& run, int64_t attempt, sync_phase p) {
  return run.failed || run.attempt != attempt || run.phase != p;
}

// A rollouter of this process failed a step: the attempt fails (and may be retried).
void fail_attempt(sync_ptr self, std::shared_ptr<sync_run> run, const std::string& step,
                  const caf::error& e) {
  run->failed = true;
  finish(self, run, false,
         "weight sync v" + std::to_string(run->job.weights.version) + ": " + step + ": " +
             self->system().render(e));
}

// Phase stage -> pause. Every node holds the new version: pause everyone. With partial rollout
// a pause stops at the next token boundary; without, it drains the responses in flight, which
// gets its own, larger bound. Returns false when there is nobody to pause.
bool enter_pause(sync_ptr self, std::shared_ptr<sync_run> run) {
  auto& st = self->state;
  run->phase = sync_phase::pause;
  const auto& at = st.args.env->params.sync;
  const bool drains = !st.args.env->plan.partial_rollout;
  const auto timeout = std::chrono::milliseconds(drains ? at.drain_timeout_ms : at.sync_timeout_ms);
  for (auto& [w, m] : st.members)
    run->workers.insert(w);
  if (run->workers.empty()) return false;
  const auto a = run->attempt;
  for (auto& [w, m] : st.members)
    self->request<caf::message_priority::high>(m.r, timeout, pause_atom::value, run->token)
        .then(
            [self, run, a, w = w](int64_t) {
              if (stale(*run, a, sync_phase::pause)) return;
              run->workers.erase(w);
              next_phase(self, run);
            },
            [self, run, a, w = w, agent = m.agent, drains](const caf::error& e) {
              if (stale(*run, a, sync_phase::pause)) return;
              if (agent) {
                drop_node(self, caf::actor_cast<caf::actor_addr>(agent),
                          "pause of rollouter " + std::to_string(w) +
                              " failed: " + self->system().render(e));
                return;
              }
              fail_attempt(self, run,
                           drains ? "pause failed (the drain of the responses in flight "
                                    "exceeded async_training.drain_timeout_ms)"
                                  : "pause failed",
                           e);
            });
  return true;
}

// Phase pause -> load. Everyone is paused: a local rollouter gets the snapshot itself (shared,
// no copy); a node's agent loads the version it staged into all of its rollouters. Returns
// false when there is nobody to load.
bool enter_load(sync_ptr self, std::shared_ptr<sync_run> run) {
  auto& st = self->state;
  run->phase = sync_phase::load;
  const auto v = run->job.weights.version;
  const auto timeout = std::chrono::milliseconds(st.args.env->params.sync.sync_timeout_ms);
  for (auto& [w, m] : st.members)
    if (!m.agent) run->workers.insert(w);
  for (auto& [addr, n] : st.nodes)
    run->nodes.insert(addr);
  if (run->workers.empty() && run->nodes.empty()) return false;
  const auto a = run->attempt;
  for (auto& [w, m] : st.members) {
    if (m.agent) continue;
    self->request(m.r, timeout, load_atom::value, run->job.weights)
        .then(
            [self, run, a, w = w](int64_t) {
              if (stale(*run, a, sync_phase::load)) return;
              run->workers.erase(w);
              next_phase(self, run);
            },
            [self, run, a](const caf::error& e) {
              if (!stale(*run, a, sync_phase::load)) fail_attempt(self, run, "load failed", e);
            });
  }
  for (auto& [addr, n] : st.nodes)
    self->request(caf::actor_cast<node_agent_actor>(n.agent), st.remote_timeout(), load_atom::value,
                  v)
        .then(
            [self, run, a, addr = addr](int64_t) {
              if (stale(*run, a, sync_phase::load)) return;
              run->nodes.erase(addr);
              next_phase(self, run);
            },
            [self, run, a, addr = addr](const caf::error& e) {
              if (!stale(*run, a, sync_phase::load))
                drop_node(self, addr, "load failed: " + self->system().render(e));
            });
  return true;
}

// Phase load -> done. Every rollouter holds the new weights: a new staleness window opens.
void complete_sync(sync_ptr self, std::shared_ptr<sync_run> run) {
  self->send(self->state.args.queue, synced_atom::value, run->job.weights.version);
  finish(self, run, true, "");
}

// Called after every answer: moves to the next phase once nobody is left to answer. A phase
// with nobody to ask (no rollouter, or no node) is passed through at once.
void next_phase(sync_ptr self, std::shared_ptr<sync_run> run) {
  if (run->failed || run->phase == sync_phase::done || !run->workers.empty() || !run->nodes.empty())
    return;
  switch (run->phase) {
    case sync_phase::stage:
      if (enter_pause(self, run)) return;
      [[fallthrough]];
    case sync_phase::pause:
      if (enter_load(self, run)) return;
      [[fallthrough]];
    case sync_phase::load:
      complete_sync(self, run);
      return;
    case sync_phase::done:
      return;
  }
}

// Sends one version over a node's weights link: the number, size and digest by CAF, the bytes
// by the link's broadcast. Staged when both ends report success; the agent checks the digest.
void stage_over_link(sync_ptr self, caf::actor agent, const std::shared_ptr<weight_link>& link,
                     int64_t version, std::shared_ptr<const std::vector<char>> packed,
                     std::string digest, std::function<void(const std::string&)> done) {
  auto& st = self->state;
  struct both {
    int left = 2;
    bool over = false;
  };
  auto b = std::make_shared<both>();
  auto one_done = [b, done = std::move(done)](const std::string& why) {
    if (b->over) return;
    if (why.empty() && --b->left > 0) return;
    b->over = true;
    done(why);
  };
  const auto id = ++st.link_ids;
  st.link_sends[id] = [one_done, version](const std::string& e) {
    one_done(e.empty() ? e : "weights v" + std::to_string(version) + " over the link: " + e);
  };
  const auto every = st.args.env->params.sync.corrupt_link_every;
  if (every > 0 && ++st.link_sent[link.get()] % every == 0) {
    // faults.corrupt_link_every: the bytes the link carries, not the digest, are damaged; the
    // node must refuse them.
    auto damaged = std::make_shared<std::vector<char>>(*packed);
    if (!damaged->empty()) (*damaged)[damaged->size() / 2] ^= 0x10;
    spdlog::warn("injected fault: v{} crosses the weights link damaged", version);
    packed = std::move(damaged);
  }
  // The link's thread reports to this actor through its address: a link outliving the
  // synchronizer must not keep it alive.
  link->send(packed, [addr = caf::actor_cast<caf::actor_addr>(self), id](const std::string& e) {
    if (auto me = caf::actor_cast<caf::actor>(addr)) caf::anon_send(me, stage_atom::value, id, e);
  });
  const weight_broadcast wb{version, static_cast<int64_t>(packed->size()), std::move(digest)};
  // The agent answers once every byte arrived and matched the digest; the link's own timeout
  // bounds the broadcast, and the request gets as long again.
  self->request(caf::actor_cast<node_agent_actor>(agent), 2 * st.remote_timeout(),
                stage_atom::value, wb)
      .then([one_done](int64_t) { one_done(""); },
            [self, one_done, version](const caf::error& e) {
              one_done("weights v" + std::to_string(version) +
                       " over the link: " + self->system().render(e));
            });
}

// Sends one version to a node's agent, over its link if it has one, else in chunks
// (actors/weight_stage.hpp); `done` gets "" or why not.
void stage_node(sync_ptr self, caf::actor agent, const std::shared_ptr<weight_link>& link,
                int64_t version, std::shared_ptr<const std::vector<char>> packed,
                std::string digest, std::function<void(const std::string&)> done) {
  if (link) {
    stage_over_link(self, std::move(agent), link, version, std::move(packed), std::move(digest),
                    std::move(done));
    return;
  }
  stage_params sp;
  sp.version = version;
  sp.packed = std::move(packed);
  sp.digest = std::move(digest);
  sp.chunk_bytes = self->state.args.env->params.sync.chunk_bytes;
  sp.timeout = self->state.remote_timeout();
  stage_weights(self, caf::actor_cast<node_agent_actor>(agent), std::move(sp), std::move(done));
}

// What remote nodes get: the packed bytes of `w` and their SHA-256.
void pack_with_digest(const weight_snapshot& w, std::shared_ptr<const std::vector<char>>& packed,
                      std::string& digest) {
  // A device snapshot (a GPU trainer's) is copied to the host once, for every node.
  auto bytes = std::make_shared<std::vector<char>>(pack_weights(host_snapshot(w)));
  digest = sha256_hex(bytes->data(), bytes->size());
  packed = std::move(bytes);
}

// Made once per version, and only if there are remote nodes.
void pack_for_nodes(sync_state& st, sync_run& run) {
  if (st.nodes.empty() || run.packed || !run.job.weights.blob) return;
  pack_with_digest(run.job.weights, run.packed, run.digest);
}

void start_attempt(sync_ptr self, std::shared_ptr<sync_run> run) {
  auto& st = self->state;
  run->workers.clear();
  run->nodes.clear();
  run->failed = false;
  run->phase = sync_phase::stage;
  run->token = ++st.tokens;
  st.running = run;
  // Stage first, while everyone still generates: the pause then covers only the load.
  pack_for_nodes(st, *run);
  const auto v = run->job.weights.version;
  struct target {
    caf::actor_addr addr;
    caf::actor agent;
    std::shared_ptr<weight_link> link;
  };
  std::vector<target> to_stage;
  for (auto& [addr, n] : st.nodes)
    if (n.staged != v) to_stage.push_back({addr, n.agent, n.link});
  if (!to_stage.empty() && !run->packed) {  // an empty snapshot: nothing a node could load
    finish(self, run, false, "weight sync v" + std::to_string(v) + ": no weights to send");
    return;
  }
  for (auto& t : to_stage)
    run->nodes.insert(t.addr);
  const auto a = run->attempt;
  for (auto& t : to_stage)
    stage_node(self, t.agent, t.link, v, run->packed, run->digest,
               [self, run, a, addr = t.addr, v](const std::string& why) {
                 if (stale(*run, a, sync_phase::stage)) return;
                 if (!why.empty()) {
                   drop_node(self, addr, why);
                   return;
                 }
                 if (auto it = self->state.nodes.find(addr); it != self->state.nodes.end())
                   it->second.staged = v;
                 run->nodes.erase(addr);
                 next_phase(self, run);
               });
  next_phase(self, run);
}

synchronizer_actor::behavior_type idle(sync_ptr self);
synchronizer_actor::behavior_type busy(sync_ptr self);

// Every change of activity goes through here, so that the log names each one and the controller
// knows it (its watchdog diagnosis and the console's status); idle and busy (syncing or joining)
// are behaviours of their own. `version`: the weights the activity moves.
void set_activity(sync_ptr self, sync_activity a, int64_t version) {
  auto& st = self->state;
  spdlog::debug("synchronizer: {} -> {} (v{})", to_string(st.activity), to_string(a), version);
  self->send(st.args.controller, activity_atom::value, sync_status{a, version});
  const bool was_idle = st.activity == sync_activity::idle;
  st.activity = a;
  if (was_idle != (a == sync_activity::idle))
    self->become(a == sync_activity::idle ? idle(self) : busy(self));
}

void start_sync(sync_ptr self, pending_publish job) {
  set_activity(self, sync_activity::syncing, job.weights.version);
  auto run = std::make_shared<sync_run>();
  run->job = std::move(job);
  start_attempt(self, std::move(run));
}

// cluster.weights_transport=collective: forms the weights link of a joining node, then calls
// `next` with it, or with nothing (the node takes CAF chunks, and the logs say why).
template <class Next>
void open_link(sync_ptr self, const pending_join& j, Next next) {
  auto& st = self->state;
  const auto& sp = st.args.env->params.sync;
  if (sp.transport != weights_transport::collective) {
    next(nullptr);
    return;
  }
  const auto who =
      "rollouter(s) " + std::to_string(j.first) + ".." + std::to_string(j.first + j.count - 1);
  weight_link_options o;
  o.host = sp.link_host;
  o.sender = true;
  o.timeout = st.remote_timeout();
  o.bucket_bytes = sp.chunk_bytes;
  o.peer = "the worker of " + who;
  // The outcome of the rendezvous reaches this side with the first send (a failed link fails it).
  auto link = std::make_shared<weight_link>(o, [](const std::string&) {});
  if (link->port() == 0) {
    spdlog::warn(
        "synchronizer: cannot listen for a weights link at {}; the worker of {} gets "
        "CAF chunks",
        o.host, who);
    retire(st, std::move(link));
    next(nullptr);
    return;
  }
  auto fallback = [self, link, who](const std::string& why) mutable {
    spdlog::warn("synchronizer: no weights link to the worker of {} ({}); it gets CAF chunks", who,
                 why);
    retire(self->state, std::move(link));
  };
  self->request(caf::actor_cast<node_agent_actor>(j.agent), 2 * st.remote_timeout(),
                link_atom::value, o.host, static_cast<int32_t>(link->port()),
                static_cast<int64_t>(o.timeout.count()))
      .then(
          [self, link, next, fallback, who, o](bool formed) mutable {
            if (!formed) {
              fallback(
                  "the worker declined: cluster.weights_transport=caf on its command line, "
                  "or it could not reach " +
                  o.host + ":" + std::to_string(link->port()));
              next(nullptr);
              return;
            }
            spdlog::info(
                "synchronizer: weights reach the worker of {} over a collective link "
                "(Gloo, {}:{})",
                who, o.host, link->port());
            next(link);
          },
          [self, next, fallback](const caf::error& e) mutable {
            fallback(self->system().render(e));
            next(nullptr);
          });
}

// The node holds the current weights: its agent starts its rollouters, which become members.
void launch_node(sync_ptr self, pending_join j, int64_t v, std::shared_ptr<weight_link> link,
                 std::function<void(const std::string&)> fail) {
  auto& st = self->state;
  self->request(caf::actor_cast<node_agent_actor>(j.agent), st.remote_timeout(), launch_atom::value,
                v)
      .then(
          [self, j, v, fail, link](std::vector<caf::actor>& rs) mutable {
            auto& st = self->state;
            if (static_cast<int32_t>(rs.size()) != j.count) {
              retire(st, link);
              fail("the node launched " + std::to_string(rs.size()) + " rollouters, not " +
                   std::to_string(j.count));
              return;
            }
            node n{j.agent, v, {}, std::move(link)};
            for (int32_t i = 0; i < j.count; ++i) {
              st.members[j.first + i] =
                  member{caf::actor_cast<rollouter_actor>(rs[static_cast<size_t>(i)]), j.agent};
              n.workers.insert(j.first + i);
            }
            st.nodes[caf::actor_cast<caf::actor_addr>(j.agent)] = std::move(n);
            j.promise.deliver(std::move(rs));
            idle_again(self);
          },
          [self, fail, link](const caf::error& e) mutable {
            retire(self->state, link);
            fail("launch failed: " + self->system().render(e));
          });
}

// A worker process's agent gets the current weights, then launches its rollouters; they
// become members before any sync can miss them (the synchronizer is busy meanwhile).
void start_join(sync_ptr self, pending_join j) {
  auto& st = self->state;
  const auto v = st.current.version;
  set_activity(self, sync_activity::joining, v);
  auto fail = [self, j](const std::string& why) mutable {
    spdlog::warn("synchronizer: a worker node could not join: {}", why);
    j.promise.deliver(caf::make_error(errc::join_failed, why));
    idle_again(self);
  };
  if (!st.current.blob) {
    fail("no weights to send");
    return;
  }
  if (!j.agent) {  // the console's add-rollouter: local rollouters, with the shared snapshot
    std::vector<caf::actor> rs;
    for (int32_t i = 0; i < j.count; ++i) {
      auto r = st.args.respawn(j.first + i, st.current);
      st.members[j.first + i] = member{r, caf::actor{}};
      rs.push_back(caf::actor_cast<caf::actor>(r));
    }
    j.promise.deliver(std::move(rs));
    idle_again(self);
    return;
  }
  std::shared_ptr<const std::vector<char>> packed;
  std::string digest;
  pack_with_digest(st.current, packed, digest);
  auto stage_and_launch = [self, j, v, fail, packed,
                           digest](std::shared_ptr<weight_link> link) mutable {
    stage_node(self, j.agent, link, v, packed, digest,
               [self, j, v, fail, link](const std::string& why) mutable {
                 if (!why.empty()) {
                   retire(self->state, link);
                   fail(why);
                   return;
                 }
                 launch_node(self, std::move(j), v, std::move(link), std::move(fail));
               });
  };
  open_link(self, j, std::move(stage_and_launch));
}

// The sync or join in progress is over: start what waited for it. Joins first, so that a
// new node is part of the next sync.
void idle_again(sync_ptr self) {
  auto& st = self->state;
  set_activity(self, sync_activity::idle, st.current.version);
  if (!st.joins.empty()) {
    auto j = std::move(st.joins.front());
    st.joins.erase(st.joins.begin());
    start_join(self, std::move(j));
    return;
  }
  if (st.next) {
    auto job = std::move(*st.next);
    st.next.reset();
    start_sync(self, std::move(job));
  }
}

// The handlers that are the same in every activity.
auto on_respawn(sync_ptr self) {
  return [self](respawn_atom, int32_t worker) -> caf::result<caf::actor> {
    // The last completed sync's weights; a sync in flight reaches the new rollouter on its
    // retry (the attempt that included the dead one fails).
    auto& st = self->state;
    auto it = st.members.find(worker);
    if (it == st.members.end() || it->second.agent)
      return caf::make_error(errc::bad_request,
                             "respawn: no local rollouter " + std::to_string(worker));
    auto r = st.args.respawn(worker, st.current);
    it->second.r = r;
    return caf::actor_cast<caf::actor>(r);
  };
}

auto on_leave(sync_ptr self) {
  return [self](leave_atom, std::vector<int32_t>& workers) {
    auto& st = self->state;
    for (auto w : workers) {
      auto it = st.members.find(w);
      if (it == st.members.end()) continue;
      if (it->second.agent) {
        auto addr = caf::actor_cast<caf::actor_addr>(it->second.agent);
        if (auto n = st.nodes.find(addr); n != st.nodes.end()) {
          n->second.workers.erase(w);
          if (n->second.workers.empty()) {
            retire(st, std::move(n->second.link));
            st.nodes.erase(n);
            if (st.running) st.running->nodes.erase(addr);
          }
        }
      }
      st.members.erase(it);
      if (st.running) st.running->workers.erase(w);
    }
    // A copy: next_phase may finish the sync, and finish() resets st.running.
    if (auto run = st.running) next_phase(self, run);
  };
}

auto on_retry(sync_ptr self) {
  return [self](retry_atom) {
    auto& st = self->state;
    if (!st.retrying) return;
    auto run = std::move(st.retrying);
    st.retrying.reset();
    start_attempt(self, std::move(run));
  };
}

// A send over a weights link is over (reported from the link's thread).
auto on_link_sent(sync_ptr self) {
  return [self](stage_atom, int64_t id, std::string& error) {
    auto& st = self->state;
    auto it = st.link_sends.find(id);
    if (it == st.link_sends.end()) return;
    auto done = std::move(it->second);
    st.link_sends.erase(it);
    done(error);
    retire(st, nullptr);  // frees retired links that became idle
  };
}

auto on_stop(sync_ptr self) {
  return [self](stop_atom) -> caf::result<int64_t, int64_t> {
    auto& st = self->state;
    const auto n = st.syncs, retries = st.retries;
    for (auto& j : st.joins)
      j.promise.deliver(caf::make_error(errc::run_over, "the run is over"));
    st.joins.clear();
    self->quit();
    return {n, retries};
  };
}

// An activity's behaviour: its own publish and join, then the shared handlers.
template <class OnPublish, class OnJoin>
synchronizer_actor::behavior_type with_shared(sync_ptr self, OnPublish publish, OnJoin join) {
  return {std::move(publish), std::move(join),    on_respawn(self), on_leave(self),
          on_retry(self),     on_link_sent(self), on_stop(self)};
}

// Idle: a publish starts a sync and a join starts the join, at once.
synchronizer_actor::behavior_type idle(sync_ptr self) {
  return with_shared(
      self,
      [self](publish_atom, weight_snapshot& w) -> caf::result<sync_report> {
        auto rp = self->make_response_promise<sync_report>();
        start_sync(self, pending_publish{std::move(w), rp});
        return rp;
      },
      [self](join_atom, caf::actor agent, int32_t first,
             int32_t count) -> caf::result<std::vector<caf::actor>> {
        auto rp = self->make_response_promise<std::vector<caf::actor>>();
        start_join(self, pending_join{std::move(agent), first, count, rp});
        return rp;
      });
}

// Syncing or joining (a failed attempt waiting for its retry included): a publish waits, and
// replaces one that waited before it; a join waits its turn.
synchronizer_actor::behavior_type busy(sync_ptr self) {
  return with_shared(
      self,
      [self](publish_atom, weight_snapshot& w) -> caf::result<sync_report> {
        auto& st = self->state;
        auto rp = self->make_response_promise<sync_report>();
        if (st.next) {  // superseded before it started
          sync_report skipped;
          skipped.version = st.next->weights.version;
          skipped.ok = false;  // nothing was loaded: not a success, and not a failure of the run
          skipped.superseded = true;
          skipped.error = "superseded by v" + std::to_string(w.version);
          st.next->promise.deliver(skipped);
        }
        st.next = pending_publish{std::move(w), rp};
        return rp;
      },
      [self](join_atom, caf::actor agent, int32_t first,
             int32_t count) -> caf::result<std::vector<caf::actor>> {
        auto rp = self->make_response_promise<std::vector<caf::actor>>();
        self->state.joins.push_back(pending_join{std::move(agent), first, count, rp});
        return rp;
      });
}

synchronizer_actor::behavior_type sync_fn(sync_ptr self, synchronizer_args args) {
  auto& st = self->state;
  st.args = std::move(args);
  st.current = st.args.initial;
  for (size_t i = 0; i < st.args.rollouters.size(); ++i)
    st.members[static_cast<int32_t>(i)] = member{st.args.rollouters[i], caf::actor{}};
  st.args.rollouters.clear();
  install_exception_handler(self, "synchronizer");
  return idle(self);
}

}  // namespace

synchronizer_actor spawn_synchronizer(caf::actor_system& sys, synchronizer_args args) {
  return sys.spawn(sync_fn, std::move(args));
}

}  // namespace asyncrl
