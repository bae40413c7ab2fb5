#include "actors/message_queue.hpp"

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include "actors/deferred_stop.hpp"
#include "actors/errors.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <optional>
#include <set>

#include "runtime/scheduling/admission.hpp"

namespace asyncrl {

namespace {

struct credit_request {
  int32_t worker = 0;
  int64_t want = 0;
  caf::typed_response_promise<int64_t> promise;
};

struct pull_request {
  int64_t version = 0;
  int64_t min = 1, max = 1;
  caf::typed_response_promise<delivery> promise;
};

struct queue_state {
  static inline const char* name = "message_queue";
  queue_args args;
  std::unique_ptr<admission_control> adm;
  std::deque<scored_group> queue;
  std::deque<credit_request> credits;
  std::optional<pull_request> pull;
  queue_stats counters;
  std::map<int32_t, int64_t> running_by_worker;  // admitted, not yet put or abandoned
  // Per worker id, over every incarnation: groups granted, and given back (abandoned or lost).
  std::map<int32_t, int64_t> granted_by_worker, returned_by_worker;
  std::set<caf::actor_addr> fenced;  // incarnations declared lost: their credits are refused
  bool stopped = false;
  int64_t members = 0;  // rollouters alive (local and remote); set by the controller
  bool held = false;    // the console paused admission: credit requests wait
  // stale_policy wait: each running group's rollouter incarnation and the policy version it
  // began with, and the ids whose put overtook their start notice (a put goes via the Reward).
  struct start_record {
    caf::actor_addr incarnation;
    int64_t version = 0;
  };
  std::map<uint64_t, start_record> starts;
  std::set<uint64_t> put_before_start;
  int64_t waiting_old = 0;  // running groups at their last chance the waiting pull keeps room for
  bool holding_for_old = false;  // the waiting pull was held for them (counted in stale_waits)
  // A stop waits until every group the Reward forwarded has arrived (a put sent before the
  // stop must not be lost to it); then it answers with the final counts.
  deferred_stop<queue_stats> stop;

  /// Each worker's share of a window: the budget split evenly, so that one rollouter cannot
  /// take the whole window while the others wait.
  int64_t worker_share() const {
    const auto& p = adm->params();
    const auto full =
        static_cast<int64_t>(std::floor((1.0 + p.staleness_threshold) * p.window + 1e-9));
    const auto workers = std::max<int64_t>(1, members);
    return std::max<int64_t>(1, (full + workers - 1) / workers);
  }

  /// Grants up to `want` groups to `worker` within its share and the admission rules.
  int64_t grant(int32_t worker, int64_t want) {
    auto& mine = running_by_worker[worker];
    const auto n = adm->grant(std::min(want, worker_share() - mine));
    mine += n;
    granted_by_worker[worker] += n;
    if (counters.window_granted.empty()) counters.window_granted.push_back(0);
    counters.window_granted.back() += n;
    return n;
  }

  queue_stats stats() const {
    auto s = counters;
    s.depth = static_cast<int64_t>(queue.size());
    s.running = adm->running();
    s.admitted_in_window = adm->admitted_in_window();
    s.window_budget = adm->window_budget();
    s.carried = adm->carried();
    s.capacity = adm->params().capacity;
    s.credit_requests_waiting = static_cast<int64_t>(credits.size());
    s.pull_waiting_min = pull ? pull->min : 0;
    s.pull_waiting_old = pull ? waiting_old : 0;
    s.admission_limit = adm->last_limit();
    s.held = held;
    return s;
  }
};

using queue_ptr = queue_actor::stateful_pointer<queue_state>;

caf::actor_addr sender_of(queue_ptr self) {
  return caf::actor_cast<caf::actor_addr>(self->current_sender());
}

int64_t oldest_version(const scored_group& g) {
  int64_t v = INT64_MAX;
  for (auto& s : g.samples)
    for (auto t : s.versions)
      v = std::min(v, t);
  return v == INT64_MAX ? 0 : v;
}

int64_t response_tokens(const scored_group& g) {
  int64_t n = 0;
  for (auto& s : g.samples)
    n += static_cast<int64_t>(s.response.size());
  return n;
}

// stale_policy wait: how many groups the waiting pull may take now (0: it waits). Groups at
// their last chance go to the front of the queue (arrival order otherwise kept), and the pull
// keeps a place for each one still being generated, so that none has to be dropped later.
int64_t deliverable_now(queue_state& st, int64_t version, int64_t eta) {
  const auto n = static_cast<int64_t>(st.queue.size());
  if (!st.adm->params().wait_for_stale || eta < 0) {
    st.waiting_old = 0;
    return std::min(n, st.pull->max);
  }
  auto young = std::stable_partition(st.queue.begin(), st.queue.end(), [&](const scored_group& g) {
    return last_chance(version, oldest_version(g), eta);
  });
  const auto old_queued = static_cast<int64_t>(young - st.queue.begin());
  int64_t old_running = 0;
  for (const auto& [id, r] : st.starts)
    old_running += last_chance(version, r.version, eta) ? 1 : 0;
  st.waiting_old = old_running;
  return deliverable_keeping_bound(st.pull->max, old_queued, n - old_queued, old_running);
}

// Answers held credit requests in arrival order while the rules allow; a worker whose share
// is spent does not block the requests of the others behind it.
void serve_credits(queue_ptr self) {
  auto& st = self->state;
  if (st.held) return;
  for (auto it = st.credits.begin(); it != st.credits.end();) {
    auto n = st.grant(it->worker, it->want);
    if (n <= 0) {
      if (st.adm->last_limit() != "") return;  // the window, eta or capacity: nobody gets more
      ++it;                                    // only this worker's share is spent
      continue;
    }
    it->promise.deliver(n);
    it = st.credits.erase(it);
  }
}

void finish_stop(queue_ptr self) {
  auto& st = self->state;
  if (!st.stop.ready(st.counters.received)) return;
  st.stop.deliver(st.stats());
  self->quit();
}

// Drops groups over eta, then hands the trainer what it asked for once at least `min` wait.
void serve_pull(queue_ptr self) {
  auto& st = self->state;
  if (!st.pull) return;
  const auto eta = st.adm->params().max_staleness;  // the plan's, or as set live
  const auto version = st.pull->version;
  drop_stale(
      st.queue, version, eta, [](const scored_group& g) { return oldest_version(g); },
      [&](const scored_group& g, int64_t staleness) {
        ++st.counters.dropped_stale;
        st.counters.dropped_tokens += response_tokens(g);
        st.adm->on_dropped();
        const bool regenerate = st.args.env->params.queue.regenerate_stale;
        if (regenerate) ++st.counters.regenerated;
        // The controller owns the prompt: it records the drop, or generates the prompt again.
        self->send(st.args.controller, dropped_atom::value, g.group_id, regenerate);
        spdlog::debug("queue: group {} dropped, staleness {} > eta {}", g.group_id, staleness, eta);
      });
  const int64_t take = deliverable_now(st, version, eta);
  if (take < st.pull->min) {
    if (static_cast<int64_t>(st.queue.size()) >= st.pull->min && !st.holding_for_old) {
      st.holding_for_old = true;  // counted once per pull
      ++st.counters.stale_waits;
    }
    serve_credits(self);  // drops freed capacity
    return;
  }
  delivery d;
  while (!st.queue.empty() && static_cast<int64_t>(d.groups.size()) < take) {
    const int64_t staleness = version - oldest_version(st.queue.front());
    st.counters.max_delivered_staleness = std::max(st.counters.max_delivered_staleness, staleness);
    d.groups.push_back(std::move(st.queue.front()));
    st.queue.pop_front();
    st.adm->on_delivered();
    ++st.counters.delivered;
  }
  d.stats = st.stats();
  st.pull->promise.deliver(std::move(d));
  st.pull.reset();
  st.holding_for_old = false;
  serve_credits(self);
}

queue_actor::behavior_type queue_fn(queue_ptr self, queue_args args) {
  auto& st = self->state;
  st.args = std::move(args);
  st.members = st.args.env->params.queue.members;
  st.adm = std::make_unique<admission_control>(st.args.env->params.queue.admission);
  if (!st.args.restored.empty() || st.args.accepted_before > 0) {
    const auto n = static_cast<int64_t>(st.args.restored.size());
    st.adm->restore(st.args.accepted_before + n, n);
    st.counters.restored = n;
    for (auto& g : st.args.restored)
      st.queue.push_back(std::move(g));
    st.args.restored.clear();
  }
  install_exception_handler(self, "message_queue");
  return {
      [self](credit_atom, int32_t worker, int64_t want) -> caf::result<int64_t> {
        auto& st = self->state;
        if (st.stopped || st.fenced.count(sender_of(self))) return int64_t{0};
        // Earlier requests go first, so a busy worker cannot starve the others.
        auto promise = self->make_response_promise<int64_t>();
        st.credits.push_back({worker, want, promise});
        serve_credits(self);
        return promise;
      },
      [self](abandon_atom, int32_t worker, int64_t n) {
        auto& st = self->state;
        if (st.fenced.count(sender_of(self))) return;  // counted by its lost_atom already
        st.running_by_worker[worker] -= n;
        st.returned_by_worker[worker] += n;
        for (int64_t i = 0; i < n; ++i)
          st.adm->on_abandoned();
        st.counters.abandoned += n;
        serve_credits(self);
      },
      [self](put_atom, scored_group& g) {
        auto& st = self->state;
        st.adm->on_put();
        ++st.counters.received;
        st.counters.received_tokens += response_tokens(g);
        if (g.worker >= 0) --st.running_by_worker[g.worker];
        if (st.adm->params().wait_for_stale && st.starts.erase(g.group_id) == 0)
          st.put_before_start.insert(g.group_id);
        st.queue.push_back(std::move(g));
        serve_pull(self);
        finish_stop(self);
      },
      [self](pull_atom, int64_t version, int64_t min, int64_t max) -> caf::result<delivery> {
        auto& st = self->state;
        if (st.stopped) return delivery{{}, st.stats()};
        if (st.pull) return caf::make_error(errc::bad_request, "a pull is already waiting");
        st.adm->on_trainer_version(version);
        st.pull = pull_request{version, std::max<int64_t>(1, min), std::max<int64_t>(1, max),
                               self->make_response_promise<delivery>()};
        auto promise = st.pull->promise;
        serve_pull(self);
        serve_credits(self);  // a new trainer version can raise AReaL's capacity
        return promise;
      },
      [self](refill_atom, int64_t filtered, int64_t replace) {
        // The trainer consumed filtered groups: their AReaL capacity back, and as many more
        // admissions beyond the window as it wants replacements (algorithm.refill).
        auto& st = self->state;
        if (st.stopped) return;
        st.adm->on_filtered(filtered, replace);
        st.counters.refilled += replace;
        serve_credits(self);
      },
      [self](started_atom, int32_t, uint64_t group_id, int64_t version) {
        // stale_policy wait: a group began (version >= 0) or will not be finished (-1).
        auto& st = self->state;
        if (st.fenced.count(sender_of(self))) return;  // its lost_atom cleared that worker
        if (version < 0) {
          st.starts.erase(group_id);
        } else if (st.put_before_start.erase(group_id) == 0) {
          st.starts[group_id] = {sender_of(self), version};
        }
        serve_pull(self);
      },
      [self](synced_atom, int64_t version) {
        auto& st = self->state;
        st.counters.published_version = version;
        st.adm->on_sync();
        if (st.counters.window_granted.empty()) st.counters.window_granted.push_back(0);
        if (st.counters.window_carried.empty()) st.counters.window_carried.push_back(0);
        st.counters.window_granted.push_back(0);
        st.counters.window_carried.push_back(st.adm->carried());
        serve_credits(self);
      },
      [self](lost_atom, int32_t worker, int64_t completed, caf::actor_addr& incarnation) {
        // Granted to the dead incarnation and neither completed nor given back: lost. The
        // controller regenerates those prompts under new credits, so they give theirs back.
        auto& st = self->state;
        st.fenced.insert(incarnation);
        for (auto it = st.credits.begin(); it != st.credits.end();)
          it = it->worker == worker ? st.credits.erase(it) : std::next(it);
        const auto lost = st.granted_by_worker[worker] - st.returned_by_worker[worker] - completed;
        for (int64_t i = 0; i < lost; ++i)
          st.adm->on_lost();
        st.running_by_worker[worker] -= std::max<int64_t>(0, lost);
        st.returned_by_worker[worker] += std::max<int64_t>(0, lost);
        st.counters.lost += std::max<int64_t>(0, lost);
        for (auto it = st.starts.begin(); it != st.starts.end();)
          it = it->second.incarnation == incarnation ? st.starts.erase(it) : std::next(it);
        spdlog::info("queue: rollouter {} lost {} admitted group(s)", worker, lost);
        serve_credits(self);
        serve_pull(self);  // a pull may have waited for a lost group
      },
      [self](members_atom, int32_t n) {
        self->state.members = n;
        serve_credits(self);
      },
      [self](set_atom, admission_params& p) {
        // From the trainer, just before its pull for the step the new rules start at (the
        // same sender, so in order): that pull already drops by the new eta.
        auto& st = self->state;
        st.adm->set_params(p);
        spdlog::info("queue: admission now s={} window={} eta={} capacity={}",
                     p.staleness_threshold, p.window, p.max_staleness, p.capacity);
        serve_credits(self);
      },
      [self](hold_atom, bool hold) {
        auto& st = self->state;
        st.held = hold;
        if (!hold) serve_credits(self);
      },
      [self](snapshot_atom) -> delivery {
        auto& st = self->state;
        return delivery{{st.queue.begin(), st.queue.end()}, st.stats()};
      },
      [self](stats_atom) -> queue_stats { return self->state.stats(); },
      [self](stop_atom, int64_t expected_puts) -> caf::result<queue_stats> {
        auto& st = self->state;
        st.stopped = true;
        for (auto& c : st.credits)
          c.promise.deliver(int64_t{0});
        st.credits.clear();
        if (st.pull) {
          st.pull->promise.deliver(delivery{{}, st.stats()});
          st.pull.reset();
        }
        auto promise = st.stop.arm(self, expected_puts);
        finish_stop(self);
        return promise;
      },
  };
}

}  // namespace

queue_actor spawn_message_queue(caf::actor_system& sys, queue_args args) {
  return sys.spawn(queue_fn, std::move(args));
}

}  // namespace asyncrl
