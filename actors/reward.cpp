#include "actors/reward.hpp"

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include "actors/deferred_stop.hpp"
#include "actors/errors.hpp"

#include <atomic>
#include <chrono>
#include <cmath>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include <utility>

#include "runtime/common/cpu_time.hpp"
#include "runtime/common/restart_budget.hpp"
#include "runtime/task/external_scorer.hpp"
#include "runtime/task/reward.hpp"
#include "runtime/tools/episode_turns.hpp"
#include "runtime/train/advantages.hpp"

namespace asyncrl {

namespace {

/// The responses whose injected crash (faults.kill_reward_worker_every) already fired. Shared by
/// the workers of one pool, because a respawned worker starts empty: the crash kills the first
/// worker that scores the response and no other, so the re-dispatched call is scored. A count
/// carried in the message could not tell a response that was being scored when its worker died
/// from one that only waited in that worker's mailbox.
struct reward_fault_log {
  std::mutex mutex;  // detached workers run on their own threads
  std::set<uint64_t> killed;
  bool hang_next = false;  // the console's `hang reward`: the next call scored never answers
  // The faults injected into the pool, for reward_counts::faults. Here, not in a worker's
  // state, so that a killed worker's injections (its own crash included) stay counted.
  std::atomic<int64_t> kills{0}, throws{0}, hangs{0};
  /// True once after the console asked for a hang.
  bool take_hang() {
    std::lock_guard<std::mutex> guard(mutex);
    return std::exchange(hang_next, false);
  }
  /// True the first time `uid` asks for its crash.
  bool first_kill(uint64_t uid) {
    std::lock_guard<std::mutex> guard(mutex);
    return killed.insert(uid).second;
  }
  void fill(reward_counts& c) const {
    c.faults.reward_worker_kills = kills;
    c.faults.reward_throws = throws;
    c.faults.reward_hangs = hangs;
  }
};

/// reward.function=external: the outcomes of every worker's scorer, for reward_counts. Shared
/// by the workers of one pool (detached: each on its own thread) and read by the Reward; it
/// outlives the workers, so a replaced worker's counts stay in.
struct scorer_tally {
  std::atomic<int64_t> timeouts{0}, crashes{0}, malformed{0}, unavailable{0}, restarts{0},
      start_failures{0};
  // Set when the Reward stops or gives up: a worker then starts no further call (each could
  // block for timeout_s), so a stop waits for the calls in progress only.
  std::atomic<bool> stopping{false};
  /// Adds what `now` has that `reported` had not, and remembers `now` as reported.
  void add(scorer_counts& reported, const scorer_counts& now) {
    timeouts += now.timeouts - reported.timeouts;
    crashes += now.crashes - reported.crashes;
    malformed += now.malformed - reported.malformed;
    unavailable += now.unavailable - reported.unavailable;
    restarts += now.restarts - reported.restarts;
    start_failures += now.start_failures - reported.start_failures;
    reported = now;
  }
  void fill(reward_counts& c) const {
    c.scorer_timeouts = timeouts;
    c.scorer_crashes = crashes;
    c.scorer_malformed = malformed;
    c.scorer_unavailable = unavailable;
    c.scorer_restarts = restarts;
    c.scorer_start_failures = start_failures;
  }
};

struct worker_state {
  static inline const char* name = "reward_worker";
  std::vector<caf::typed_response_promise<double>> hung;  // fault injection only
  // reward.function=external: this worker's own scorer process (or connection), started at its
  // first call and stopped (EOF, grace, SIGKILL, reaped) when the worker's state is destroyed.
  std::unique_ptr<external_scorer> scorer;
  scorer_counts reported;  // of scorer->counts(), what the tally already has
};

using worker_ptr = reward_worker_actor::stateful_pointer<worker_state>;

bool is_external(const actor_env& env) {
  return env.params.reward.reward.function == reward_function::external;
}

external_scorer_options scorer_options(const reward_section& r) {
  external_scorer_options o;
  o.command = split_command(r.external.command);
  o.socket = r.external.socket;
  o.timeout_s = r.external.timeout_s;
  o.max_start_failures = r.external.max_start_failures;
  return o;
}

// One call to this worker's external scorer; it blocks for up to reward.external.timeout_s,
// which is why external workers run detached. A timeout replies sec::request_timeout and every
// other failure errc::scorer_failed, so the Reward counts them as it counts the built-in
// function's (timeouts, failures). A scorer that gave up (max_start_failures) ends the worker
// instead: the Reward's supervision restarts it or, past supervision.max_restarts, fails the
// run with the scorer's reason; the call goes to another worker.
caf::result<double> score_external(worker_ptr self, const actor_env& env, scorer_tally& tally,
                                   scorer_request req) {
  auto& st = self->state;
  if (!st.scorer)
    st.scorer = std::make_unique<external_scorer>(scorer_options(env.params.reward.reward));
  auto r = st.scorer->score(req);
  tally.add(st.reported, st.scorer->counts());
  if (st.scorer->gave_up()) {
    self->quit(caf::make_error(errc::scorer_gave_up, st.scorer->give_up_reason()));
    return caf::delegated<double>{};
  }
  switch (r.outcome) {
    case scorer_outcome::ok:
      return r.score;
    case scorer_outcome::timeout:
      return caf::make_error(caf::sec::request_timeout, r.error);
    default:
      return caf::make_error(errc::scorer_failed,
                             std::string(to_string(r.outcome)) + ": " + r.error);
  }
}

bool every(int64_t n, uint64_t uid) {
  return n > 0 && (uid + 1) % static_cast<uint64_t>(n) == 0;
}

reward_worker_actor::behavior_type worker_fn(worker_ptr self, env_ptr env,
                                             std::shared_ptr<reward_fault_log> faults,
                                             std::shared_ptr<scorer_tally> tally) {
  return {
      [self, env, faults, tally](score_atom, std::string& text, std::string& truth, uint64_t uid,
                                 std::string& prompt, uint64_t group_id, uint64_t prompt_index,
                                 uint32_t index) -> caf::result<double> {
        const auto& f = env->params.reward;  // injected faults (tests, asyncrl chaos)
        if (every(f.kill_worker_every, uid) && faults->first_kill(uid)) {
          // Dies as a crash would: no answer; the Reward learns it from its monitor.
          ++faults->kills;
          self->quit(caf::make_error(errc::injected_fault, "injected reward worker crash"));
          return caf::delegated<double>{};
        }
        try {
          if (every(f.throw_every, uid)) {
            ++faults->throws;
            throw std::runtime_error("injected reward fault");
          }
          if (every(f.hang_every, uid) || faults->take_hang()) {
            // Never answers: the caller's timeout fires. Counted and logged here, where it is
            // injected (the console's hang too, once it fires): a run may end before the
            // deadline of its last hung call.
            ++faults->hangs;
            spdlog::warn("reward: injected fault: the call for uid {} hangs", uid);
            self->state.hung.push_back(self->make_response_promise<double>());
            return self->state.hung.back();
          }
          if (is_external(*env)) {
            if (tally->stopping)  // nobody reads the answer any more
              return caf::make_error(errc::run_over, "the Reward is stopping");
            scorer_request req;
            req.uid = uid;
            req.prompt = std::move(prompt);
            req.response = std::move(text);
            req.ground_truth = std::move(truth);
            req.extra = {{"group_id", static_cast<int64_t>(group_id)},
                         {"prompt_index", static_cast<int64_t>(prompt_index)},
                         {"index", static_cast<int64_t>(index)}};
            return score_external(self, *env, *tally, std::move(req));
          }
          compute_region cpu;
          return score_with(f.reward.function, f.reward.prefix, text, truth);
        } catch (const std::exception& e) {
          return caf::make_error(errc::scorer_failed, e.what());
        }
      },
      [self](stop_atom) -> int64_t {
        auto n = static_cast<int64_t>(self->state.hung.size());
        self->quit();
        return n;
      },
  };
}

reward_worker_actor spawn_worker(caf::actor_system& sys, env_ptr env,
                                 std::shared_ptr<reward_fault_log> faults,
                                 std::shared_ptr<scorer_tally> tally) {
  // reward.detached_workers: a user reward function that blocks must not stall the scheduler,
  // but the built-in rule-based reward takes microseconds and a thread per worker only
  // competes with the compute roles for cores. An external scorer call blocks (up to
  // reward.external.timeout_s): always detached, except under the test coordinator.
  if (env->detached && (env->params.reward.reward.detached_workers || is_external(*env)))
    return sys.spawn<caf::detached>(worker_fn, std::move(env), std::move(faults), std::move(tally));
  return sys.spawn(worker_fn, std::move(env), std::move(faults), std::move(tally));
}

struct pending_group {
  scored_group group;
  size_t remaining = 0;
  std::string prompt;  // reward.function=external: the decoded prompt, for the scorer
};

// One response being scored. It stays here until it is answered, fails or times out; a worker
// crash moves it to another worker.
struct reward_call {
  uint64_t group_id = 0;
  size_t index = 0;  // in the group's samples
  uint64_t uid = 0;
  std::string text;       // the decoded response
  size_t slot = 0;        // the worker it waits on
  uint64_t dispatch = 0;  // which send is current: replies to an earlier one are stale
  // Of the current send: then it is scored 0. Not sent yet: never due, and not the earliest
  // (a group's calls are all created before the first is sent).
  caf::actor_clock::time_point deadline = caf::actor_clock::time_point::max();
};

struct reward_state {
  static inline const char* name = "reward";
  reward_args args;
  std::shared_ptr<reward_fault_log> faults = std::make_shared<reward_fault_log>();
  std::shared_ptr<scorer_tally> tally = std::make_shared<scorer_tally>();
  std::vector<reward_worker_actor> workers;  // by slot; a crashed worker is replaced in its slot
  std::vector<int64_t> load;                 // outstanding calls per slot
  std::map<uint64_t, reward_call> calls;     // outstanding, by call id
  // When the armed deadline check is due (none armed: nullopt). One timer serves every call:
  // a CAF request timeout per call costs a clock-thread wake-up when it is set and a message
  // to this actor when it expires, answered or not, 128 of each per step of the demo.
  std::optional<caf::actor_clock::time_point> check_at;
  uint64_t next_call = 0;
  uint64_t next_dispatch = 0;
  std::optional<restart_budget> restarts;  // supervision.*: set at the first crash
  std::map<uint64_t, pending_group> pending;
  reward_counts counts;
  // reward.max_failure_rate: whether each of the latest scored responses failed, oldest first
  // (at most reward.failure_window), and how many did.
  std::deque<bool> recent;
  int64_t recent_failed = 0;
  bool gave_up = false;
  int64_t late = 0;  // groups that arrived after the stop: in flight, never scored
  // Who delivered what, for the settle of a lost rollouter: group ids per incarnation, and
  // groups per worker id over all incarnations. Fenced incarnations are ignored from then on.
  std::map<caf::actor_addr, std::vector<uint64_t>> by_sender;
  std::map<int32_t, int64_t> by_worker;
  std::set<caf::actor_addr> fenced;
  // A stop waits until every group the rollouters sent has arrived, then answers with the
  // final counts.
  deferred_stop<reward_counts> stop;
};

using reward_ptr = reward_actor::stateful_pointer<reward_state>;

int64_t in_progress(const reward_state& st) {
  return static_cast<int64_t>(st.pending.size()) + st.late;
}

// The counts with the external scorers' outcomes filled in.
reward_counts current_counts(const reward_state& st) {
  auto c = st.counts;
  c.in_progress = in_progress(st);
  st.tally->fill(c);
  st.faults->fill(c);
  return c;
}

void finish_stop(reward_ptr self) {
  auto& st = self->state;
  if (!st.stop.ready(st.counts.received)) return;
  st.tally->stopping = true;
  st.counts = current_counts(st);
  for (auto& w : st.workers) {
    // An external worker would first make the (blocking) calls still in its mailbox, whose
    // answers nobody reads any more: its stop overtakes them.
    if (is_external(*st.args.env))
      caf::anon_send<caf::message_priority::high>(w, stop_atom::value);
    else
      caf::anon_send(w, stop_atom::value);
  }
  st.stop.deliver(st.counts);
  self->quit();
}

bool is(const caf::error& e, caf::sec code) {
  return e.category() == caf::atom("system") && e.code() == static_cast<uint8_t>(code);
}

// What the scorer judges: the response, or a multi-turn episode's final model turn (the
// tokens after its last environment token). The scorer never sees the tool's answers.
std::vector<int32_t> final_model_turn(const scored_sample& s) {
  size_t start = 0;
  for (size_t j = 0; j < s.loss_mask.size(); ++j)
    if (s.loss_mask[j] == 0) start = j + 1;
  return {s.response.begin() + static_cast<std::ptrdiff_t>(start), s.response.end()};
}

void finish_group(reward_ptr self, uint64_t id) {
  auto& st = self->state;
  auto it = st.pending.find(id);
  if (it == st.pending.end() || --it->second.remaining > 0) return;
  auto g = std::move(it->second.group);
  st.pending.erase(it);
  const auto& rp = st.args.env->params.reward;
  for (auto& s : g.samples)
    if (!s.loss_mask.empty())  // an episode: env.reward says which rewards count
      s.reward =
          episode_reward(rp.env_reward, s.reward, s.has_env_reward, s.env_reward, s.env_failed);
  g.filtered = !assign_advantages(g, rp.adv_estimator, rp.filter_groups);
  ++st.counts.forwarded;
  self->send(st.args.queue, put_atom::value, std::move(g));
}

void spawn_into(reward_ptr self, size_t slot) {
  auto& st = self->state;
  auto w = spawn_worker(self->system(), st.args.env, st.faults, st.tally);
  self->monitor(w);
  // A worker dies with its Reward however that ends (a stop, a kill, a failure): nothing else
  // holds it, and a live one would keep the actor system from shutting down. A replaced
  // worker's functor finds it gone.
  self->attach_functor([addr = w.address()](const caf::error&) {
    if (auto h = caf::actor_cast<caf::actor>(addr)) caf::anon_send_exit(h, caf::exit_reason::kill);
  });
  if (slot == st.workers.size()) {
    st.workers.push_back(std::move(w));
    st.load.push_back(0);
  } else {
    st.workers[slot] = std::move(w);
  }
}

// The call `id` if `dispatch` is its current send, else nullptr (answered, re-dispatched).
reward_call* current(reward_ptr self, uint64_t id, uint64_t dispatch) {
  auto it = self->state.calls.find(id);
  return it != self->state.calls.end() && it->second.dispatch == dispatch ? &it->second : nullptr;
}

void give_up(reward_ptr self, const std::string& why);

// reward.max_failure_rate: the role fails once more than that share of the latest
// reward.failure_window responses failed. A scorer that answers NaN, never reads its input or
// dies on every call would otherwise give a run that "completes" on all-zero rewards.
void judge_failures(reward_ptr self, bool failed) {
  auto& st = self->state;
  const auto& rw = st.args.env->params.reward.reward;
  st.recent.push_back(failed);
  st.recent_failed += failed ? 1 : 0;
  while (static_cast<int64_t>(st.recent.size()) > rw.failure_window) {
    st.recent_failed -= st.recent.front() ? 1 : 0;
    st.recent.pop_front();
  }
  const auto n = static_cast<int64_t>(st.recent.size());
  if (st.gave_up || n < rw.failure_window ||
      static_cast<double>(st.recent_failed) <= rw.max_failure_rate * static_cast<double>(n))
    return;
  const auto c = current_counts(st);
  auto why = fmt::format(
      "reward: {} of the last {} scored responses failed, more than reward.max_failure_rate "
      "{:g} allows: stopping instead of training on zero rewards (so far: timeouts {}, "
      "failures {}",
      st.recent_failed, n, rw.max_failure_rate, c.timeouts, c.failures);
  if (is_external(*st.args.env))
    why += fmt::format(
        "; external scorer {}: timeouts {}, crashes {}, malformed answers {}, unavailable {}, "
        "restarts {}, failed starts {}",
        rw.external.command.empty() ? "socket '" + rw.external.socket + "'"
                                    : "command '" + rw.external.command + "'",
        c.scorer_timeouts, c.scorer_crashes, c.scorer_malformed, c.scorer_unavailable,
        c.scorer_restarts, c.scorer_start_failures);
  give_up(self, why + ")");
}

void settle(reward_ptr self, uint64_t id, double reward, bool failed) {
  auto& st = self->state;
  judge_failures(self, failed);
  auto it = st.calls.find(id);
  --st.load[it->second.slot];
  const auto group = it->second.group_id;
  const auto index = it->second.index;
  st.calls.erase(it);
  auto g = st.pending.find(group);
  if (g != st.pending.end()) {
    g->second.group.samples[index].reward = reward;
    g->second.group.samples[index].reward_failed = failed;
  }
  finish_group(self, group);
}

// Arms a deadline check for `due` unless one is armed no later. Invariant: while a call is
// outstanding, a check is armed no later than its deadline (a send arms for its own deadline,
// a check re-arms for the earliest left, and answers only remove deadlines).
void arm_check(reward_ptr self, caf::actor_clock::time_point due) {
  auto& st = self->state;
  if (st.check_at && *st.check_at <= due) return;
  st.check_at = due;
  const auto now = self->clock().now();
  self->delayed_send(self, due > now ? due - now : caf::actor_clock::duration_type{0},
                     watchdog_atom::value);
}

// A deadline check: every call whose current send is past its deadline is scored 0 and counted
// as a timeout, as an answer would settle it. A check armed earlier and superseded by an
// earlier one finds nothing due; either way the next one is armed for what is left.
void check_deadlines(reward_ptr self) {
  auto& st = self->state;
  const auto now = self->clock().now();
  if (st.check_at && *st.check_at <= now) st.check_at.reset();
  std::vector<uint64_t> due;
  for (const auto& [id, c] : st.calls)
    if (c.deadline <= now) due.push_back(id);
  for (auto id : due) {
    if (st.gave_up) return;
    const auto& c = st.calls.at(id);
    ++st.counts.timeouts;
    spdlog::warn("reward: group {} response {} scored 0: timed out (reward.timeout_ms)", c.group_id,
                 c.index);
    settle(self, id, 0.0, true);
  }
  auto next = caf::actor_clock::time_point::max();
  for (const auto& kv : st.calls)
    next = std::min(next, kv.second.deadline);
  if (next != caf::actor_clock::time_point::max()) arm_check(self, next);
}

// Sends call `id` to the least loaded worker: a hung one stops getting work.
void dispatch(reward_ptr self, uint64_t id) {
  auto& st = self->state;
  auto& c = st.calls.at(id);
  c.slot = static_cast<size_t>(std::min_element(st.load.begin(), st.load.end()) - st.load.begin());
  c.dispatch = ++st.next_dispatch;
  ++st.load[c.slot];
  const auto tag = c.dispatch;
  const auto& rw = st.args.env->params.reward.reward;
  auto timeout = std::chrono::milliseconds(rw.timeout_ms);
  if (is_external(*st.args.env)) {
    // The worker bounds each call by reward.external.timeout_s (plus up to 1 s for a crashed
    // scorer to exit) and makes its calls one after another: this call may wait for every one
    // queued before it. reward.timeout_ms is the slack on top.
    const auto per_call = std::chrono::milliseconds(
        static_cast<int64_t>(std::ceil((rw.external.timeout_s + 1.0) * 1000.0)));
    timeout += per_call * st.load[c.slot];
  }
  c.deadline = self->clock().now() + timeout;
  arm_check(self, c.deadline);
  const auto& p = st.pending.at(c.group_id);
  // No CAF timeout (see reward_state::check_at): check_deadlines bounds the call.
  self->request(st.workers[c.slot], caf::infinite, score_atom::value, c.text, p.group.ground_truth,
                c.uid, p.prompt, c.group_id, p.group.prompt_index, static_cast<uint32_t>(c.index))
      .then(
          [self, id, tag](double r) {
            if (current(self, id, tag)) settle(self, id, r, false);
          },
          [self, id, tag](const caf::error& e) {
            auto* c = current(self, id, tag);
            // A crashed worker bounces the calls in its mailbox; its down message, which is
            // certain to come, re-dispatches them together with the one it was scoring.
            if (!c || is(e, caf::sec::request_receiver_down)) return;
            auto& st = self->state;
            if (is(e, caf::sec::request_timeout))  // an external scorer's own timeout
              ++st.counts.timeouts;
            else
              ++st.counts.failures;
            spdlog::warn("reward: group {} response {} scored 0: {}", c->group_id, c->index,
                         self->system().render(e));
            settle(self, id, 0.0, true);
          });
}

// Gives up on the pool: the Reward fails with `why`, which the controller reports. The exit
// reason carries the counts too (its context: why, reward_counts), so that the run's summary
// shows what failed although this actor can no longer answer the controller's stop.
void give_up(reward_ptr self, const std::string& why) {
  auto& st = self->state;
  if (st.gave_up) return;
  st.gave_up = true;
  st.tally->stopping = true;
  spdlog::error("{}", why);
  for (auto& w : st.workers)
    self->send_exit(w, caf::exit_reason::user_shutdown);
  st.counts = current_counts(st);
  if (st.stop.armed())  // the controller is already shutting down: answer it all the same
    st.stop.deliver(st.counts);
  self->quit(caf::make_error(errc::reward_gave_up, why, st.counts));
}

// A worker died: replace it in its slot and move the calls it held to live workers, unless
// that is one restart too many within supervision.restart_window_s (Erlang's intensity).
void on_worker_down(reward_ptr self, size_t slot, const caf::error& reason) {
  auto& st = self->state;
  const auto& sv = st.args.env->params.reward;
  const auto why = reason ? self->system().render(reason) : std::string("normal exit");
  if (!st.restarts) st.restarts.emplace(sv.max_restarts, sv.restart_window_s);
  if (!st.restarts->spend(self->clock().now())) {
    give_up(self, fmt::format("reward: {} worker restarts within {:g} s (supervision.max_restarts "
                              "{}): giving up; last crash: {}",
                              st.restarts->in_window(), sv.restart_window_s, sv.max_restarts, why));
    return;
  }
  spawn_into(self, slot);
  ++st.counts.worker_restarts;
  st.load[slot] = 0;
  std::vector<uint64_t> orphans;
  for (auto& [id, c] : st.calls)
    if (c.slot == slot) orphans.push_back(id);
  // Each exactly once: replies and bounces still on their way from the dead worker are stale.
  for (auto id : orphans)
    dispatch(self, id);
  spdlog::warn("reward: worker {} died ({}); restarted it (restart {}), re-dispatched {} call(s)",
               slot, why, st.counts.worker_restarts, orphans.size());
}

reward_actor::behavior_type reward_fn(reward_ptr self, reward_args args) {
  auto& st = self->state;
  st.args = std::move(args);
  install_exception_handler(self, "reward");
  for (int64_t i = 0; i < st.args.env->params.reward.reward.num_workers; ++i)
    spawn_into(self, st.workers.size());
  // A worker only quits normally when finish_stop tells it to, and this actor quits right
  // after; any other exit lost the calls it held, so every reason is handled alike.
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& ws = self->state.workers;
    for (size_t slot = 0; slot < ws.size(); ++slot)
      if (ws[slot].address() == dm.source) {
        on_worker_down(self, slot, dm.reason);
        return;
      }
  });
  return {
      [self](score_atom, scored_group& g) {
        auto& st = self->state;
        const auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
        if (st.fenced.count(sender)) {
          // Its prompts are being generated again elsewhere: this copy must not count.
          ++st.counts.fenced;
          spdlog::warn("reward: group {} from fenced rollouter {} dropped", g.group_id, g.worker);
          return;
        }
        st.by_sender[sender].push_back(g.group_id);
        ++st.by_worker[g.worker];
        ++st.counts.received;
        if (st.stop.armed()) {  // arrived after the stop: counted, never scored
          ++st.late;
          finish_stop(self);
          return;
        }
        const auto id = g.group_id;
        const auto n = g.samples.size();
        std::vector<uint64_t> ids;
        for (size_t i = 0; i < n; ++i) {
          ids.push_back(st.next_call++);
          st.calls[ids.back()] =
              reward_call{id, i, g.samples[i].uid,
                          st.args.env->tokenizer->decode(final_model_turn(g.samples[i]))};
        }
        std::string prompt;
        if (is_external(*st.args.env) && n > 0)  // the samples of a group share their prompt
          prompt = st.args.env->tokenizer->decode(g.samples[0].prompt, /*skip_special=*/false);
        st.pending[id] = pending_group{std::move(g), n, std::move(prompt)};
        for (auto call : ids)
          dispatch(self, call);
      },
      [self](settle_atom, caf::actor_addr& dead,
             int32_t worker) -> caf::result<std::vector<uint64_t>, int64_t> {
        auto& st = self->state;
        st.fenced.insert(dead);
        std::vector<uint64_t> ids;
        if (auto it = st.by_sender.find(dead); it != st.by_sender.end()) {
          ids = std::move(it->second);
          st.by_sender.erase(it);
        }
        return {std::move(ids), st.by_worker[worker]};
      },
      [self](stats_atom) -> caf::result<reward_counts, std::vector<int64_t>> {
        auto& st = self->state;
        return {current_counts(st), st.load};
      },
      [self](hang_atom) {
        auto& st = self->state;
        std::lock_guard<std::mutex> guard(st.faults->mutex);
        st.faults->hang_next = true;
        spdlog::warn("reward: injected fault (console): the next response's scoring hangs");
      },
      [self](kill_atom) -> int32_t {
        // The busiest worker dies as a crash would; the down handler restarts it and moves its
        // calls (the same path as faults.kill_reward_worker_every).
        auto& st = self->state;
        const auto slot =
            static_cast<size_t>(std::max_element(st.load.begin(), st.load.end()) - st.load.begin());
        spdlog::warn("reward: injected fault (console): killing worker {}", slot);
        ++st.faults->kills;
        self->send_exit(st.workers[slot],
                        caf::make_error(errc::injected_fault, "killed from the console"));
        return static_cast<int32_t>(slot);
      },
      [self](watchdog_atom) { check_deadlines(self); },
      [self](stop_atom, int64_t expected_groups) -> caf::result<reward_counts> {
        auto& st = self->state;
        auto promise = st.stop.arm(self, expected_groups);
        finish_stop(self);
        return promise;
      },
  };
}

}  // namespace

reward_worker_actor spawn_reward_worker(caf::actor_system& sys, env_ptr env) {
  return spawn_worker(sys, std::move(env), std::make_shared<reward_fault_log>(),
                      std::make_shared<scorer_tally>());
}

reward_actor spawn_reward(caf::actor_system& sys, reward_args args) {
  return sys.spawn(reward_fn, std::move(args));
}

}  // namespace asyncrl
