#include "actors/controller.hpp"

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include "actors/errors.hpp"

#include <chrono>
#include <deque>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "actors/message_queue.hpp"
#include "actors/reward.hpp"
#include "actors/rollouter.hpp"
#include "actors/synchronizer.hpp"
#include "actors/trainer.hpp"
#include "runtime/common/progress.hpp"
#include "runtime/task/epoch_order.hpp"
#include "runtime/task/prompting.hpp"

namespace asyncrl {

std::string metrics_line(const step_report& r, double wall, int64_t tokens_generated,
                         double rollouter_idle, int64_t dropped, int64_t workers) {
  const double step_s = r.step_ms / 1000.0;
  const auto& u = r.update;
  nlohmann::ordered_json j{
      {"step", r.step},
      {"policy_version", r.policy_version},
      {"wall_time_s", wall},
      {"step_time_s", step_s},
      {"reward_mean", r.reward_mean},
      {"accuracy", r.accuracy},
      {"tokens_generated", tokens_generated},
      {"tpspd", step_s > 0 ? u.tokens_trained / step_s / double(workers + 1) : 0.0},
      {"trainer_idle_ratio", r.step_ms > 0 ? r.trainer_idle_ms / r.step_ms : 0.0},
      {"rollouter_idle_ratio", rollouter_idle},
      {"stale_samples", r.stale_samples},
      {"partial_ratio", r.partial_ratio},
      {"max_partial_span", r.max_partial_span},
      {"dropped_groups", dropped},
      {"filtered_groups", r.filtered_groups},
      {"reward_failures", r.reward_failures}};
  for_each_field(u, [&](const char* name, const auto& v) { j[name] = v; });
  j.update(nlohmann::ordered_json{{"sync_time_ms", r.sync_time_ms},
                                  {"sync_bytes", r.sync_bytes},
                                  {"params_checksum", r.params_checksum},
                                  {"samples", r.samples},
                                  {"queue_depth", r.queue.depth},
                                  {"admitted_in_window", r.queue.admitted_in_window},
                                  {"window_budget", r.queue.window_budget},
                                  {"published_version", r.queue.published_version},
                                  {"prox_version", r.prox_version},
                                  {"out_of_order_groups", r.out_of_order_groups},
                                  {"eval_time_s", r.eval_time_s}});
  if (r.eval_accuracy >= 0) j["eval_accuracy"] = r.eval_accuracy;
  // JSON has no NaN: a non-finite value (a skipped step's grad norm) becomes null.
  for (auto& [k, v] : j.items())
    if (v.is_number_float() && !std::isfinite(v.get<double>())) v = nullptr;
  return j.dump();
}

namespace {

using clock = std::chrono::steady_clock;

struct controller_state {
  static inline const char* name = "controller";
  controller_args args;
  std::vector<std::vector<int32_t>> prompts;  // encoded training prompts
  std::vector<size_t> order;
  size_t pos = 0;
  int64_t epoch = 0;
  std::deque<prompt_task> retry;  // prompts to generate again, first in line
  uint64_t next_group = 0;

  queue_actor queue;
  reward_actor reward;
  std::vector<rollouter_actor> rollouters;
  synchronizer_actor sync;
  trainer_actor trainer;
  std::map<caf::actor_addr, std::string> roles;

  caf::typed_response_promise<run_result> done;
  bool shutting_down = false;
  run_result result;
  clock::time_point t0 = clock::now();
  std::optional<clock::time_point> first_dispatch;
  clock::time_point last_step = clock::now();  // the progress watchdog's reference
  int64_t last_step_no = 0;
  int64_t watchdog_seen_step = -1;
  int watchdog_quiet_ticks = 0;

  std::map<int32_t, rollout_progress> progress;
  double prev_wall = 0;
  std::map<int32_t, double> prev_busy;
  int64_t prev_tokens = 0, prev_dropped = 0;
  std::unique_ptr<std::ofstream> metrics;
  std::unique_ptr<progress_line> bar;

  void reshuffle() {
    // From our own stream: the same order on every machine and in every mode.
    order = epoch_order(prompts.size(), static_cast<uint64_t>(args.env->cfg.runtime.seed), epoch,
                        kPromptOrder);
    pos = 0;
  }

  prompt_task next_prompt() {
    prompt_task t;
    if (!retry.empty()) {
      t = std::move(retry.front());
      retry.pop_front();
    } else {
      if (pos == order.size()) {
        ++epoch;
        reshuffle();
      }
      auto idx = order[pos++];
      t.prompt_index = idx;
      t.prompt = prompts[idx];
      t.ground_truth = args.train[idx].ground_truth;
    }
    t.group_id = next_group++;
    return t;
  }
};

using ctrl_ptr = controller_actor::stateful_pointer<controller_state>;

void write_report(ctrl_ptr self, const step_report& r) {
  auto& st = self->state;
  const double wall = std::chrono::duration<double>(clock::now() - st.t0).count();
  int64_t tokens = 0;
  double busy_delta = 0;
  for (auto& [w, p] : st.progress) {
    tokens += p.tokens_generated;
    busy_delta += p.busy_ms - st.prev_busy[w];
    st.prev_busy[w] = p.busy_ms;
  }
  const auto workers = static_cast<int64_t>(st.rollouters.size());
  const double span_ms = (wall - st.prev_wall) * 1000.0 * double(std::max<int64_t>(1, workers));
  const double idle = span_ms > 0 ? std::clamp(1.0 - busy_delta / span_ms, 0.0, 1.0) : 0.0;
  const int64_t dropped = r.queue.dropped_stale - st.prev_dropped;
  auto line = metrics_line(r, wall, tokens - st.prev_tokens, idle, dropped, workers);
  st.prev_wall = wall;
  st.prev_tokens = tokens;
  st.prev_dropped = r.queue.dropped_stale;
  st.result.tokens_trained += r.update.tokens_trained;
  st.result.steps = r.step;
  st.last_step = clock::now();
  st.last_step_no = r.step;
  if (st.first_dispatch)
    st.result.train_time_s =
        std::chrono::duration<double>(st.last_step - *st.first_dispatch).count();
  if (st.metrics) *st.metrics << line << "\n" << std::flush;
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
void shutdown(ctrl_ptr self, std::string failure);

void finish_run(ctrl_ptr self) {
  auto& st = self->state;
  auto& r = st.result;
  for (auto& c : r.rollouters) {
    r.groups_generated += c.groups_completed;
    r.tokens_generated += c.tokens_generated;
  }
  r.groups_trained = r.trainer.trained;
  r.groups_filtered = r.trainer.filtered;
  r.groups_dropped = r.queue.dropped_stale + r.trainer.filtered;
  r.groups_in_flight = r.reward.in_progress + r.queue.depth + r.trainer.held;
  r.wall_time_s = std::chrono::duration<double>(clock::now() - st.t0).count();
  if (st.bar) st.bar->finish();
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

void shutdown(ctrl_ptr self, std::string failure) {
  auto& st = self->state;
  if (st.shutting_down) return;
  st.shutting_down = true;
  if (!failure.empty()) {
    st.result.ok = false;
    st.result.error = failure;
    spdlog::error("run failed: {}", failure);
  }
  // The synchronizer goes first, so that no sync starts against stopping rollouters; the
  // rest follow the flow of groups.
  auto step5 = [self](int64_t delivered) {
    stop_role<normal>(
        self, self->state.trainer, trainer_counts{},
        [self](trainer_counts* c) {
          if (c) self->state.result.trainer = *c;
          finish_run(self);
        },
        delivered);
  };
  auto step4 = [self, step5](int64_t delivered) {
    self->request(self->state.trainer, std::chrono::seconds(60), final_atom::value)
        .then(
            [self, step5, delivered](weight_snapshot& w) {
              self->state.result.final_weights = std::move(w);
              step5(delivered);
            },
            [step5, delivered](const caf::error&) { step5(delivered); });
  };
  auto step3 = [self, step4](int64_t forwarded) {
    stop_role<normal>(
        self, self->state.queue, queue_stats{},
        [self, step4](queue_stats* q) {
          if (q) self->state.result.queue = *q;
          step4(q ? q->delivered : 0);
        },
        forwarded);
  };
  auto step2 = [self, step3] {
    int64_t sent = 0;
    for (auto& c : self->state.result.rollouters)
      sent += c.groups_completed;
    stop_role<normal>(
        self, self->state.reward, reward_counts{},
        [self, step3](reward_counts* c) {
          if (c) self->state.result.reward = *c;
          step3(c ? c->forwarded : 0);
        },
        sent);
  };
  auto step1 = [self, step2] {
    auto& st = self->state;
    auto remaining = std::make_shared<size_t>(st.rollouters.size());
    if (*remaining == 0) {
      step2();
      return;
    }
    for (auto& r : st.rollouters)
      stop_role<high>(self, r, rollout_counts{}, [self, remaining, step2](rollout_counts* c) {
        if (c) self->state.result.rollouters.push_back(*c);
        if (--*remaining == 0) step2();
      });
  };
  stop_role<high>(self, st.sync, int64_t{}, [self, step1](int64_t* n) {
    if (n) self->state.result.syncs = *n;
    step1();
  });
}

// The progress watchdog: ticks every quarter of runtime.progress_timeout_s (on the actor clock,
// so it is deterministic under the test coordinator) and fails the run after four ticks in a row
// without a completed optimizer step, naming what each role waits on.
void arm_watchdog(ctrl_ptr self) {
  const double timeout = self->state.args.env->cfg.runtime.progress_timeout_s;
  if (timeout <= 0) return;
  const auto tick = std::chrono::milliseconds(std::max<int64_t>(1, std::llround(timeout * 250)));
  self->delayed_send(self, tick, watchdog_atom::value);
}

std::string describe_wait(ctrl_ptr self, const queue_stats* q) {
  auto& st = self->state;
  std::string s;
  if (!q) {
    s = "the message_queue did not answer";
  } else if (q->pull_waiting_min > 0) {
    s = "the trainer waits on the message_queue for " + std::to_string(q->pull_waiting_min) +
        " group(s); the queue holds " + std::to_string(q->depth) + ", " +
        std::to_string(q->running) + " are being generated or scored";
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
  for (auto& [w, p] : st.progress)
    s += "; rollouter " + std::to_string(w) + " is " + p.state + " at weight version " +
         std::to_string(p.version);
  return s;
}

void on_watchdog(ctrl_ptr self) {
  auto& st = self->state;
  if (st.shutting_down) return;
  if (st.last_step_no != st.watchdog_seen_step) {
    st.watchdog_seen_step = st.last_step_no;
    st.watchdog_quiet_ticks = 0;
  } else if (++st.watchdog_quiet_ticks >= 4) {
    const auto timeout = st.args.env->cfg.runtime.progress_timeout_s;
    auto head = fmt::format(
        "no optimizer step completed for {:g} s (runtime.progress_timeout_s; last step {}): ",
        timeout, st.last_step_no);
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
  st.queue = spawn_message_queue(sys, queue_args{env, me});
  st.reward = spawn_reward(sys, reward_args{env, st.queue});
  for (int32_t w = 0; w < static_cast<int32_t>(env->cfg.rollout.num_workers); ++w)
    st.rollouters.push_back(
        spawn_rollouter(sys, rollouter_args{w, env, st.args.initial, st.queue, st.reward, me}));
  st.sync = spawn_synchronizer(sys, synchronizer_args{env, st.rollouters, st.queue, me});
  st.trainer =
      spawn_trainer(sys, trainer_args{env, st.args.initial, st.queue, st.sync, me, st.args.test});
  // Linked: a child that fails takes the run down through the exit handler below, and a
  // controller that is killed takes its children with it, so no orphan keeps the actor
  // system from shutting down.
  auto watch = [&](const auto& h, std::string role) {
    self->link_to(h);
    st.roles[caf::actor_cast<caf::actor_addr>(h)] = std::move(role);
  };
  watch(st.queue, "message_queue");
  watch(st.reward, "reward");
  for (size_t i = 0; i < st.rollouters.size(); ++i)
    watch(st.rollouters[i], "rollouter " + std::to_string(i));
  watch(st.sync, "synchronizer");
  watch(st.trainer, "trainer");
}

controller_actor::behavior_type controller_fn(ctrl_ptr self, controller_args args) {
  auto& st = self->state;
  st.args = std::move(args);
  install_exception_handler(self, "controller");
  for (auto& ex : st.args.train)
    st.prompts.push_back(encode_prompt(st.args.env->tokenizer, ex.question));
  st.reshuffle();
  self->set_exit_handler([self](caf::exit_msg& em) {
    auto& st = self->state;
    auto it = st.roles.find(em.source);
    if (it == st.roles.end()) {  // not a child: the caller wants us gone
      self->quit(em.reason);
      return;
    }
    if (st.shutting_down || !em.reason) return;  // a child quitting as asked
    shutdown(self, it->second + " terminated: " + self->system().render(em.reason));
  });
  return {
      [self](run_atom) -> caf::result<run_result> {
        auto& st = self->state;
        st.t0 = clock::now();
        if (!st.args.run_dir.empty())
          st.metrics = std::make_unique<std::ofstream>(st.args.run_dir + "/metrics.jsonl");
        if (st.args.show_progress)
          st.bar = std::make_unique<progress_line>("train", st.args.env->plan.total_steps, 1);
        st.done = self->make_response_promise<run_result>();
        spawn_roles(self);
        for (auto& r : st.rollouters)
          self->send(r, start_atom::value);
        self->send(st.trainer, start_atom::value);
        arm_watchdog(self);
        return st.done;
      },
      [self](prompts_atom, int64_t n) -> std::vector<prompt_task> {
        auto& st = self->state;
        std::vector<prompt_task> out;
        if (st.shutting_down) return out;
        if (!st.first_dispatch) st.first_dispatch = clock::now();
        for (int64_t i = 0; i < n; ++i)
          out.push_back(st.next_prompt());
        return out;
      },
      [self](regen_atom, prompt_task& t) { self->state.retry.push_back(std::move(t)); },
      [self](progress_atom, rollout_progress& p) { self->state.progress[p.worker] = p; },
      [self](report_atom, step_report& r) { write_report(self, r); },
      [self](done_atom) { shutdown(self, ""); },
      [self](fail_atom, std::string& why) { shutdown(self, why); },
      [self](watchdog_atom) { on_watchdog(self); },
  };
}

}  // namespace

controller_actor spawn_controller(caf::actor_system& sys, controller_args args) {
  return sys.spawn(controller_fn, std::move(args));
}

}  // namespace asyncrl
