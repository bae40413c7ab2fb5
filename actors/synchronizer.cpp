#include "actors/synchronizer.hpp"

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include "actors/errors.hpp"

#include <chrono>
#include <optional>

namespace asyncrl {

namespace {

using clock = std::chrono::steady_clock;

struct pending_publish {
  weight_snapshot weights;
  caf::typed_response_promise<sync_report> promise;
};

// Shared progress of one sync attempt across the rollouters' replies.
struct sync_run {
  pending_publish job;
  clock::time_point t0 = clock::now();
  size_t replies = 0;
  bool failed = false;
  int64_t attempt = 0;
  int64_t token = 0;  // pairs each rollouter's pause with its resume (see the interface)
};

struct sync_state {
  static inline const char* name = "synchronizer";
  synchronizer_args args;
  bool busy = false;
  std::optional<pending_publish> next;
  std::shared_ptr<sync_run> retrying;  // a failed attempt waiting for its retry
  weight_snapshot current;             // the weights of the last completed sync
  int64_t syncs = 0;
  int64_t retries = 0;
  int64_t tokens = 0;
};

using sync_ptr = synchronizer_actor::stateful_pointer<sync_state>;

void start_sync(sync_ptr self, pending_publish job);
void start_attempt(sync_ptr self, std::shared_ptr<sync_run> run);

void finish(sync_ptr self, const std::shared_ptr<sync_run>& run, bool ok, const std::string& why) {
  auto& st = self->state;
  // Always paired with the pause, and sent at the pause's priority: a resume at normal priority
  // could be overtaken by the next sync's pause (the rollouter also counts pauses, see there).
  for (auto& r : st.args.rollouters)
    self->send<caf::message_priority::high>(r, resume_atom::value, run->token);
  if (!ok && run->attempt < st.args.env->cfg.async_training.sync_retries) {
    // Retried after a short pause: a crashed rollouter's replacement has time to arrive.
    ++run->attempt;
    ++st.retries;
    spdlog::warn("synchronizer: {}; retry {} of {}", why, run->attempt,
                 st.args.env->cfg.async_training.sync_retries);
    st.retrying = run;
    self->delayed_send(self, std::chrono::milliseconds(100 * run->attempt), retry_atom::value);
    return;
  }
  sync_report rep;
  rep.version = run->job.weights.version;
  rep.time_ms = std::chrono::duration<double, std::milli>(clock::now() - run->t0).count();
  rep.bytes = run->job.weights.blob ? run->job.weights.blob->bytes() : 0;
  rep.workers = static_cast<int32_t>(st.args.rollouters.size());
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
  st.busy = false;
  if (st.next) {
    auto job = std::move(*st.next);
    st.next.reset();
    start_sync(self, std::move(job));
  }
}

void load_all(sync_ptr self, const std::shared_ptr<sync_run>& run) {
  auto& st = self->state;
  const auto timeout = std::chrono::milliseconds(st.args.env->cfg.async_training.sync_timeout_ms);
  run->replies = 0;
  const auto a = run->attempt;  // replies of an earlier, failed attempt are ignored
  for (auto& r : st.args.rollouters)
    self->request(r, timeout, load_atom::value, run->job.weights)
        .then(
            [self, run, a](int64_t) {
              if (run->failed || run->attempt != a) return;
              if (++run->replies == self->state.args.rollouters.size()) {
                // Every rollouter holds the new weights: a new staleness window opens.
                self->send(self->state.args.queue, synced_atom::value, run->job.weights.version);
                finish(self, run, true, "");
              }
            },
            [self, run, a](const caf::error& e) {
              if (run->failed || run->attempt != a) return;
              run->failed = true;
              finish(self, run, false,
                     "weight sync v" + std::to_string(run->job.weights.version) +
                         ": load failed: " + self->system().render(e));
            });
}

void start_sync(sync_ptr self, pending_publish job) {
  auto& st = self->state;
  st.busy = true;
  auto run = std::make_shared<sync_run>();
  run->job = std::move(job);
  start_attempt(self, std::move(run));
}

void start_attempt(sync_ptr self, std::shared_ptr<sync_run> run) {
  auto& st = self->state;
  run->replies = 0;
  run->failed = false;
  run->token = ++st.tokens;
  // With partial rollout a pause stops at the next token boundary, so the load watchdog bounds
  // it. Without, a pause drains the responses in flight: a long but healthy drain gets its own,
  // larger bound.
  const auto& at = st.args.env->cfg.async_training;
  const bool drains = !st.args.env->plan.partial_rollout;
  const auto timeout = std::chrono::milliseconds(drains ? at.drain_timeout_ms : at.sync_timeout_ms);
  if (st.args.rollouters.empty()) {
    self->send(st.args.queue, synced_atom::value, run->job.weights.version);
    finish(self, run, true, "");
    return;
  }
  const auto a = run->attempt;  // replies of an earlier, failed attempt are ignored
  for (auto& r : st.args.rollouters)
    self->request<caf::message_priority::high>(r, timeout, pause_atom::value, run->token)
        .then(
            [self, run, a](int64_t) {
              if (run->failed || run->attempt != a) return;
              if (++run->replies == self->state.args.rollouters.size()) load_all(self, run);
            },
            [self, run, drains, a](const caf::error& e) {
              if (run->failed || run->attempt != a) return;
              run->failed = true;
              finish(self, run, false,
                     "weight sync v" + std::to_string(run->job.weights.version) +
                         (drains ? ": pause failed (the drain of the responses in flight "
                                   "exceeded async_training.drain_timeout_ms): "
                                 : ": pause failed: ") +
                         self->system().render(e));
            });
}

synchronizer_actor::behavior_type sync_fn(sync_ptr self, synchronizer_args args) {
  self->state.args = std::move(args);
  self->state.current = self->state.args.initial;
  install_exception_handler(self, "synchronizer");
  return {
      [self](publish_atom, weight_snapshot& w) -> caf::result<sync_report> {
        auto& st = self->state;
        auto rp = self->make_response_promise<sync_report>();
        if (st.busy) {
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
        }
        start_sync(self, pending_publish{std::move(w), rp});
        return rp;
      },
      [self](respawn_atom, int32_t worker) -> caf::result<caf::actor> {
        // The last completed sync's weights; a sync in flight reaches the new rollouter on its
        // retry (the attempt that included the dead one fails).
        auto& st = self->state;
        if (worker < 0 || static_cast<size_t>(worker) >= st.args.rollouters.size())
          return caf::make_error(caf::sec::invalid_argument,
                                 "respawn: no rollouter " + std::to_string(worker));
        auto r = st.args.respawn(worker, st.current);
        st.args.rollouters[static_cast<size_t>(worker)] = r;
        return caf::actor_cast<caf::actor>(r);
      },
      [self](retry_atom) {
        auto& st = self->state;
        if (!st.retrying) return;
        auto run = std::move(st.retrying);
        st.retrying.reset();
        start_attempt(self, std::move(run));
      },
      [self](stop_atom) -> caf::result<int64_t, int64_t> {
        auto& st = self->state;
        const auto n = st.syncs, retries = st.retries;
        self->quit();
        return {n, retries};
      },
  };
}

}  // namespace

synchronizer_actor spawn_synchronizer(caf::actor_system& sys, synchronizer_args args) {
  return sys.spawn(sync_fn, std::move(args));
}

}  // namespace asyncrl
