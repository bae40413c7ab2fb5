#include "actors/controller.hpp"

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include "actors/controller_state.hpp"
#include "actors/errors.hpp"

#include <chrono>
#include <nlohmann/json.hpp>

#include "actors/message_queue.hpp"
#include "actors/reward.hpp"
#include "actors/rollouter.hpp"
#include "actors/synchronizer.hpp"
#include "actors/trainer.hpp"
#include "runtime/model/weight_sync.hpp"
#include "runtime/task/epoch_order.hpp"
#include "runtime/task/prompting.hpp"

namespace asyncrl {

double controller_state::wall_s() const {
  return base.wall_time_s + std::chrono::duration<double>(ctrl_clock::now() - t0).count();
}

int64_t controller_state::tokens_generated() const {
  return base.tokens_generated + roster.tokens_generated();
}

namespace {

using clock = ctrl_clock;

void write_report(ctrl_ptr self, const step_report& r) {
  auto& st = self->state;
  st.metrics.write(r, st.wall_s(), st.tokens_generated(), st.roster.busy_ms(),
                   static_cast<int64_t>(st.roster.size()));
  st.result.tokens_trained += r.update.tokens_trained;
  st.result.steps = r.step;
  st.last_step = clock::now();
  st.watch.step_done(r.step);
  if (st.first_dispatch)
    st.result.train_time_s =
        std::chrono::duration<double>(st.last_step - *st.first_dispatch).count();
  st.last_report = r;
  if (st.bar)
    st.bar->update(
        r.step, {{"reward", r.reward_mean},
                 {"acc", r.accuracy},
                 {"loss", r.update.loss},
                 {"trained tok/s", r.step_ms > 0 ? r.update.tokens_trained / (r.step_ms / 1e3) : 0},
                 {"stale", static_cast<double>(r.stale_samples)},
                 {"queue", static_cast<double>(r.queue.depth)}});
}

// Shutdown: the synchronizer first (so that no sync starts against stopping rollouters), then
// every rollouter at once; when all of them have answered, reward, queue and trainer, following
// the flow of groups, each asked after the previous one answered and told the number of groups
// sent to it (see stop_role). The trainer's final weights are fetched just before its stop.
// Adds the totals of the checkpoint this run resumed from to this process's counts (the
// trainer restored its own counts), so that every identity holds over the whole run.
void add_resumed_totals(controller_state& st) {
  auto& r = st.result;
  const auto& b = st.base;
  r.groups_generated += b.groups_generated;
  r.tokens_generated += b.tokens_generated;
  r.reward.received += b.reward.received;
  r.reward.forwarded += b.reward.forwarded;
  r.reward.failures += b.reward.failures;
  r.reward.timeouts += b.reward.timeouts;
  r.reward.worker_restarts += b.reward.worker_restarts;
  r.reward.scorer_timeouts += b.reward.scorer_timeouts;
  r.reward.scorer_crashes += b.reward.scorer_crashes;
  r.reward.scorer_malformed += b.reward.scorer_malformed;
  r.reward.scorer_unavailable += b.reward.scorer_unavailable;
  r.reward.scorer_restarts += b.reward.scorer_restarts;
  r.reward.scorer_start_failures += b.reward.scorer_start_failures;
  auto& q = r.queue;
  q.received += b.queue.received;
  q.delivered += b.queue.delivered;
  q.dropped_stale += b.queue.dropped_stale;
  q.regenerated += b.queue.regenerated;
  q.received_tokens += b.queue.received_tokens;
  q.dropped_tokens += b.queue.dropped_tokens;
  q.stale_waits += b.queue.stale_waits;
  q.abandoned += b.queue.abandoned;
  q.lost += b.queue.lost;
  q.restored += b.queue.restored;
  q.max_delivered_staleness = std::max(q.max_delivered_staleness, b.queue.max_delivered_staleness);
  r.syncs += b.syncs;
  r.rollouter_restarts += b.rollouter_restarts;
}

void finish_run(ctrl_ptr self) {
  auto& st = self->state;
  auto& r = st.result;
  for (auto& c : r.rollouters) {
    r.groups_generated += c.groups_completed;
    r.tokens_generated += c.tokens_generated;
  }
  r.tokens_generated += st.roster.dead_tokens();  // crashed incarnations
  r.groups_generated += st.roster.dead_groups();
  add_role_faults(r);  // the Reward's and the live rollouters' parts of run_result::faults
  add_resumed_totals(st);
  r.groups_trained = r.trainer.trained;
  r.groups_filtered = r.trainer.filtered;
  r.groups_dropped = r.queue.dropped_stale + r.trainer.filtered;
  r.groups_in_flight = r.reward.in_progress + r.queue.depth + r.trainer.held;
  r.wall_time_s = st.wall_s();
  if (st.bar) st.bar->finish();
  if (!st.args.run_dir.empty()) write_ledger(self);
  release_nodes(self);
  console_checkpoint_done(self, "", -1, "the run ended before a checkpoint could be taken");
  if (r.ok)
    spdlog::info("run: {} steps, {} groups generated, {} trained, {} dropped, {} in flight",
                 r.steps, r.groups_generated, r.groups_trained, r.groups_dropped,
                 r.groups_in_flight);
  st.done.deliver(r);
  self->quit();
}

// Asks one role to stop and hands its final counts (nullptr if it did not answer) to `next`.
// Rollouters get the stop at high priority, so that it is handled before the next decode
// chunk. The roles downstream of them get it at normal priority *and* with the number of
// groups sent to them: each answers only once all of those have arrived, so a group still in a
// mailbox at shutdown is counted, never lost.
template <caf::message_priority Prio, class Handle, class Result, class OnOk, class... Ts>
void stop_role(ctrl_ptr self, const Handle& h, Result, OnOk next, Ts... xs) {
  self->request<Prio>(h, std::chrono::seconds(60), stop_atom::value, xs...)
      .then([next](Result& x) mutable { next(&x); },
            [self, next](const caf::error& e) mutable {
              spdlog::warn("run: a role did not answer stop: {}", self->system().render(e));
              next(nullptr);
            });
}

constexpr auto high = caf::message_priority::high;
constexpr auto normal = caf::message_priority::normal;

}  // namespace

namespace {

void enter(ctrl_ptr self, shutdown_step s) {
  self->state.stopping = s;
  spdlog::debug("run: shutdown: {}", to_string(s));
}

// The shutdown's steps, in order. Each hands the count the next one waits for.
void stop_trainer(ctrl_ptr self, int64_t delivered) {
  enter(self, shutdown_step::trainer);
  stop_role<normal>(
      self, self->state.trainer, trainer_counts{},
      [self](trainer_counts* c) {
        if (c) self->state.result.trainer = *c;
        enter(self, shutdown_step::done);
        finish_run(self);
      },
      delivered);
}

void take_final_weights(ctrl_ptr self, int64_t delivered) {
  enter(self, shutdown_step::final_weights);
  self->request(self->state.trainer, std::chrono::seconds(60), final_atom::value)
      .then(
          [self, delivered](weight_snapshot& w) {
            self->state.result.final_weights = std::move(w);
            stop_trainer(self, delivered);
          },
          [self, delivered](const caf::error&) { stop_trainer(self, delivered); });
}

void stop_queue(ctrl_ptr self, int64_t forwarded) {
  enter(self, shutdown_step::queue);
  stop_role<normal>(
      self, self->state.queue, queue_stats{},
      [self](queue_stats* q) {
        if (q) self->state.result.queue = *q;
        take_final_weights(self, q ? q->delivered : 0);
      },
      forwarded);
}

void stop_reward(ctrl_ptr self) {
  enter(self, shutdown_step::reward);
  int64_t sent = 0;
  for (auto& c : self->state.result.rollouters)
    sent += c.groups_completed;
  stop_role<normal>(
      self, self->state.reward, reward_counts{},
      [self](reward_counts* c) {
        if (c) self->state.result.reward = *c;
        stop_queue(self, c ? c->forwarded : 0);
      },
      sent);
}

void after_rollouters(ctrl_ptr self) {
  // A dead rollouter's settle still on its way must be answered first (requeue_and_respawn).
  if (self->state.settles_pending > 0)
    self->state.after_settles = [self] { stop_reward(self); };
  else
    stop_reward(self);
}

void stop_rollouters(ctrl_ptr self) {
  auto& st = self->state;
  enter(self, shutdown_step::rollouters);
  auto remaining = std::make_shared<size_t>(st.roster.size());
  if (*remaining == 0) {
    after_rollouters(self);
    return;
  }
  for (auto& [w, r] : st.roster.live())
    stop_role<high>(self, r, rollout_counts{}, [self, remaining](rollout_counts* c) {
      if (c) self->state.result.rollouters.push_back(*c);
      if (--*remaining == 0) after_rollouters(self);
    });
}

void stop_synchronizer(ctrl_ptr self) {
  enter(self, shutdown_step::synchronizer);
  self->request<high>(self->state.sync, std::chrono::seconds(60), stop_atom::value)
      .then(
          [self](int64_t syncs, int64_t retries) {
            self->state.result.syncs = syncs;
            self->state.result.sync_retries = retries;
            stop_rollouters(self);
          },
          [self](const caf::error& e) {
            spdlog::warn("run: the synchronizer did not answer stop: {}", self->system().render(e));
            stop_rollouters(self);
          });
}

}  // namespace

void shutdown(ctrl_ptr self, std::string failure, run_status status) {
  auto& st = self->state;
  if (st.shutting_down()) return;
  if (!failure.empty()) {
    st.result.ok = false;
    st.result.status = status;
    st.result.error = failure;
    if (status == run_status::failed) spdlog::error("run failed: {}", failure);
  }
  stop_synchronizer(self);
}

// The progress watchdog: ticks every quarter of runtime.progress_timeout_s (on the actor clock,
// so it is deterministic under the test coordinator) and fails the run after four ticks in a row
// without a completed optimizer step, naming what each role waits on.
void arm_watchdog(ctrl_ptr self) {
  const auto& watch = self->state.watch;
  if (!watch.enabled()) return;
  self->delayed_send(self, watch.tick(), watchdog_atom::value);
}

namespace {

std::string describe_wait(ctrl_ptr self, const queue_stats* q) {
  auto& st = self->state;
  std::string s;
  if (!q) {
    s = "the message_queue did not answer";
  } else if (q->pull_waiting_min > 0) {
    s = "the trainer waits on the message_queue for " + std::to_string(q->pull_waiting_min) +
        " group(s); the queue holds " + std::to_string(q->depth) + ", " +
        std::to_string(q->running) + " are being generated or scored";
    if (q->pull_waiting_old > 0)
      s += " (stale_policy wait keeps places for " + std::to_string(q->pull_waiting_old) +
           " of them, at their last version within async_training.max_staleness)";
    if (q->credit_requests_waiting > 0)
      s += ", and " + std::to_string(q->credit_requests_waiting) +
           " rollouter credit request(s) wait on the admission rule '" +
           (q->admission_limit.empty() ? std::string("worker share") : q->admission_limit) +
           "' (window budget " + std::to_string(q->window_budget) + ", admitted " +
           std::to_string(q->admitted_in_window) + ", carried " + std::to_string(q->carried) +
           ", dropped as stale so far " + std::to_string(q->dropped_stale) + ")";
  } else {
    s = "the trainer is not waiting on the message_queue (it is computing, or blocked on "
        "something else); queue depth " +
        std::to_string(q->depth);
  }
  const auto& tr = st.reported.trainer;
  s += fmt::format("; the trainer is {}", to_string(tr.phase));
  if (tr.phase != trainer_phase::training) s += fmt::format(" since step {}", tr.step);
  s += fmt::format("; the synchronizer is {} (weights v{})", to_string(st.reported.sync.activity),
                   st.reported.sync.version);
  for (auto& [w, p] : st.roster.progress())
    s += "; rollouter " + std::to_string(w) + " is " + to_string(p.state) + " at weight version " +
         std::to_string(p.version);
  return s;
}

void on_watchdog(ctrl_ptr self) {
  auto& st = self->state;
  if (st.shutting_down() || !st.watch.enabled()) return;  // off (the console may re-arm)
  if (st.watch.on_tick(st.paused)) {
    const auto timeout = st.watch.timeout_s();
    auto head = fmt::format(
        "no optimizer step completed for {:g} s (runtime.progress_timeout_s; last step {}): ",
        timeout, st.watch.last_step());
    self->request(st.queue, std::chrono::seconds(5), stats_atom::value)
        .then([self, head](queue_stats& q) { shutdown(self, head + describe_wait(self, &q)); },
              [self, head](const caf::error&) {
                shutdown(self, head + describe_wait(self, nullptr));
              });
    return;
  }
  arm_watchdog(self);
}

void spawn_roles(ctrl_ptr self) {
  auto& st = self->state;
  auto& sys = self->system();
  auto me = caf::actor_cast<controller_actor>(self);
  const auto& env = st.args.env;
  auto restore = st.args.resume ? std::move(st.args.resume) : std::optional<run_state>{};
  st.args.resume.reset();
  queue_args qa{env, me, {}, 0};
  if (restore) {
    qa.restored = std::move(restore->queued);
    // Filtered groups gave their AReaL capacity back (admission_control::on_filtered).
    qa.accepted_before = restore->trainer.counts.received - restore->trainer.counts.filtered;
  }
  st.queue = spawn_message_queue(sys, std::move(qa));
  st.reward = spawn_reward(sys, reward_args{env, st.queue});
  // The rollouters' starting weights in their dtype, cast here once for all of them (a
  // checkpoint's are in that dtype already).
  const auto weights =
      convert_snapshot(restore ? restore->trainer.rollout_weights : st.args.initial,
                       rollout_weights_dtype(env->params.rollouter));
  std::vector<rollouter_actor> local;
  for (int32_t w = 0; w < static_cast<int32_t>(env->params.controller.local_rollouters); ++w) {
    local.push_back(
        spawn_rollouter(sys, rollouter_args{w, env, weights, st.queue, st.reward, me, {}}));
    st.roster.enlist(w, local.back());
  }
  st.roster.nodes().start_ids_at(static_cast<int32_t>(local.size()));  // remote ones after these
  synchronizer_args sa{env, weights, {}, local, st.queue, me};
  sa.respawn = [&sys, env, queue = st.queue, reward = st.reward, me](int32_t w,
                                                                     const weight_snapshot& v) {
    return spawn_rollouter(sys, rollouter_args{w, env, v, queue, reward, me, {}});
  };
  st.sync = spawn_synchronizer(sys, std::move(sa));
  trainer_args ta{env, st.args.initial, st.queue, st.sync, me, st.args.test, {}, {}};
  if (restore) ta.restore = std::move(restore->trainer);
  if (st.args.data_parallel) ta.data_parallel = st.args.data_parallel();
  st.trainer = spawn_trainer(sys, std::move(ta));
  // Linked: a child that fails reaches the exit handler below (a rollouter is restarted, any
  // other role takes the run down), and a controller that is killed takes its children with
  // it, so no orphan keeps the actor system from shutting down.
  auto watch = [&](const auto& h, std::string role) {
    self->link_to(h);
    st.roles[caf::actor_cast<caf::actor_addr>(h)] = std::move(role);
  };
  watch(st.queue, "message_queue");
  watch(st.reward, "reward");
  for (auto& [w, r] : st.roster.live())
    watch_rollouter(self, w, r);
  watch(st.sync, "synchronizer");
  watch(st.trainer, "trainer");
}

// A child quit. As asked (during shutdown, or normally): nothing to do. A rollouter that
// crashed is restarted; any other role fails the run (a trainer marked restartable when
// supervision.trainer_failure=restart, so the caller restarts from the last checkpoint).
void on_child_exit(ctrl_ptr self, caf::exit_msg& em) {
  auto& st = self->state;
  auto it = st.roles.find(em.source);
  if (it == st.roles.end()) {  // not a child: the caller wants us gone
    self->quit(em.reason);
    return;
  }
  if (st.shutting_down() || !em.reason) return;
  auto why = self->system().render(em.reason);
  // A Reward that gave up sends its counts with its reason (actors/reward.cpp, give_up): it
  // cannot answer the stop, and the summary must show what failed.
  const auto& ctx = em.reason.context();
  if (is(em.reason, errc::reward_gave_up) && ctx.match_elements<std::string, reward_counts>()) {
    why = ctx.get_as<std::string>(0);
    st.result.reward = ctx.get_as<reward_counts>(1);
  }
  if (auto worker = st.roster.worker_of(em.source)) {
    st.roster.forget(em.source);
    st.roles.erase(it);
    // Its environment failed more often than env.max_failure_rate allows: a restarted
    // rollouter would meet the same environment, so the run fails now, with the pool's reason.
    if (is(em.reason, errc::env_failed)) {
      shutdown(self, "rollouter " + std::to_string(*worker) + ": " + why);
      return;
    }
    on_rollouter_crash(self, *worker, em.source, why);
    return;
  }
  std::string msg = it->second + " terminated: " + why;
  if (it->second == "trainer") {
    if (st.args.env->params.controller.trainer_failure == trainer_failure_action::restart)
      st.result.restartable = true;
    msg += st.result.checkpoint.empty() ? "; no checkpoint was written in this run"
                                        : "; resumable from " + st.result.checkpoint + " (step " +
                                              std::to_string(st.result.checkpoint_step) + ")";
  }
  shutdown(self, msg);
}

controller_actor::behavior_type controller_fn(ctrl_ptr self, controller_args args) {
  auto& st = self->state;
  st.args = std::move(args);
  {
    const auto& params = st.args.env->params;
    std::vector<std::string> ranks;
    for (int64_t r = 0; r < params.trainer.data_parallel; ++r)
      ranks.push_back(trainer_rank_device(params.trainer, r));
    st.roster = rollouter_roster(params.rollouter, std::move(ranks));
  }
  st.watch.set_timeout(st.args.env->params.controller.progress_timeout_s);
  install_exception_handler(self, "controller");
  {
    std::vector<std::vector<int32_t>> prompts;
    std::vector<std::string> truths;
    for (auto& ex : st.args.train) {
      prompts.push_back(encode_prompt(*st.args.env->tokenizer, st.args.env->prompt, ex));
      truths.push_back(ex.ground_truth);
    }
    st.loader =
        prompt_loader(std::move(prompts), std::move(truths), st.args.env->params.controller.seed);
  }
  if (st.args.resume) restore_from_checkpoint(self);
  self->set_exit_handler([self](caf::exit_msg& em) { on_child_exit(self, em); });
  self->set_down_handler([self](caf::down_msg& dm) { on_down(self, dm); });
  return {
      [self](run_atom) -> caf::result<run_result> {
        auto& st = self->state;
        st.t0 = clock::now();
        st.metrics.open(st.args.run_dir, st.resumed);
        if (st.args.tensorboard)
          st.metrics.open_tensorboard(st.args.run_dir, st.args.config_yaml,
                                      st.resumed ? st.result.resumed_from_step : -1);
        if (st.args.show_progress)
          st.bar = std::make_unique<progress_line>("train", st.args.env->plan.total_steps, 1);
        st.done = self->make_response_promise<run_result>();
        spawn_roles(self);
        for (auto& [w, r] : st.roster.live())
          self->send(r, start_atom::value);
        admit_early_workers(self);
        self->send(st.trainer, start_atom::value);
        arm_watchdog(self);
        return st.done;
      },
      [self](prompts_atom, int64_t n) -> std::vector<prompt_task> {
        auto& st = self->state;
        std::vector<prompt_task> out;
        const auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
        if (st.shutting_down() || st.roster.fenced(sender)) return out;
        if (!st.first_dispatch) st.first_dispatch = clock::now();
        const int32_t worker = st.roster.worker_of(sender).value_or(-1);
        for (int64_t i = 0; i < n; ++i) {
          out.push_back(st.loader.next());
          st.ledger.dispatched(out.back(), worker);
        }
        return out;
      },
      [self](dropped_atom, uint64_t id, bool regenerate) {
        auto& st = self->state;
        if (auto t = st.ledger.dropped(id, regenerate)) st.loader.regenerate(std::move(*t));
      },
      [self](progress_atom, rollout_progress& p) {
        auto& st = self->state;
        if (st.roster.fenced(caf::actor_cast<caf::actor_addr>(self->current_sender()))) return;
        for (auto id : p.completed)
          st.ledger.completed(id);
        p.completed.clear();
        st.roster.report(std::move(p));
      },
      [self](activity_atom, trainer_status& s) { self->state.reported.trainer = s; },
      [self](activity_atom, sync_status& s) { self->state.reported.sync = s; },
      [self](report_atom, step_report& r) {
        write_report(self, r);
        after_step(self, r);
      },
      [self](checkpoint_atom, trainer_checkpoint& c) { on_trainer_checkpoint(self, std::move(c)); },
      [self](done_atom) { shutdown(self, ""); },
      [self](fail_atom, std::string& why) { shutdown(self, why); },
      [self](interrupt_atom) {
        auto& st = self->state;
        if (st.shutting_down()) return;
        if (++st.interrupts == 1 && !st.args.checkpoint_dir.empty()) {
          spdlog::warn(
              "run: interrupted; writing a checkpoint, then stopping (interrupt again "
              "to stop without one)");
          // Cut now, dropping a step still gathering its groups when the last completed step
          // is a boundary: its groups may wait on a scorer that answers only after timeouts.
          self->send(st.trainer, checkpoint_atom::value, interrupt_atom::value);
          return;
        }
        shutdown(self, "interrupted at step " + std::to_string(st.watch.last_step()),
                 run_status::interrupted);
      },
      [self](requeue_atom, int32_t worker, caf::actor_addr& dead) {
        requeue_and_respawn(self, worker, dead);
      },
      [self](join_atom, join_request& req) { return on_join(self, req); },
      [self](join_atom, rank_join_request& req) { return on_rank_join(self, req); },
      [self](lost_atom, caf::actor& agent, std::string& why) {
        on_remote_lost(self, caf::actor_cast<caf::actor_addr>(agent), why);
      },
      [self](watchdog_atom) { on_watchdog(self); },
      [self](console_atom, console_request& req) { return on_console(self, req); },
  };
}

}  // namespace

controller_actor spawn_controller(caf::actor_system& sys, controller_args args) {
  return sys.spawn(controller_fn, std::move(args));
}

}  // namespace asyncrl
