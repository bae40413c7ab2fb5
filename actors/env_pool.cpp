#include "actors/env_pool.hpp"

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include <chrono>
#include <deque>
#include <map>
#include <memory>

#include "actors/errors.hpp"
#include "runtime/tools/builtin_env.hpp"
#include "runtime/tools/episode_turns.hpp"

namespace asyncrl {

namespace {

// An answer held back by its injected latency.
struct delayed {
  env_answer answer;
  caf::typed_response_promise<env_answer> promise;
};

// env.kind=external: one worker per concurrent call, each on its own thread with its own
// environment process (its calls block). An episode's calls go to one worker (episode mod
// workers), whose process keeps its state between turns.
using env_worker_actor = caf::typed_actor<caf::replies_to<env_atom, env_call>::with<env_answer>>;

struct env_worker_state {
  static inline const char* name = "env_worker";
  std::unique_ptr<external_env> env;
  env_pool_args args;
};

env_worker_actor::behavior_type env_worker_fn(
    env_worker_actor::stateful_pointer<env_worker_state> self, env_pool_args args) {
  self->state.env = std::make_unique<external_env>(external_env_options_from(args.env));
  self->state.args = std::move(args);
  return {
      [self](env_atom, env_call& c) -> env_answer {
        const auto& a = self->state.args;
        return external_answer(*self->state.env, c, a.seed, a.env.max_retries);
      },
  };
}

// faults.env_fault_every: what the n-th call's first attempt suffers, in turn.
enum class env_fault { none, hang, crash, garbage, flood };

struct env_pool_state {
  static inline const char* name = "env_pool";
  env_pool_args args;
  int64_t calls = 0, injected = 0;        // for faults.env_fault_every
  std::vector<env_worker_actor> workers;  // env.kind=external
  std::map<uint64_t, delayed> waiting;    // by ticket
  uint64_t next_ticket = 0;
  int64_t answered = 0;
  std::deque<bool> recent;  // whether each of the latest calls failed, oldest first
  std::string last_error;   // of the latest call with a failed attempt, for the log
};

using self_ptr = env_pool_actor::stateful_pointer<env_pool_state>;

env_fault next_fault(env_pool_state& st) {
  if (st.args.fault_every <= 0 || ++st.calls % st.args.fault_every != 0) return env_fault::none;
  constexpr env_fault cycle[] = {env_fault::hang, env_fault::crash, env_fault::garbage,
                                 env_fault::flood};
  return cycle[st.injected++ % 4];
}

// Puts an injected fault in front of the call's real answer `out`: a failed first attempt whose
// replay is `out` (or, with its replays spent, a failed call), or for a flood an observation four
// times over env.max_observation_tokens, which the rollouter cuts. A hang's attempt is seen when
// env.timeout_ms has passed: the answer is that much later (returned).
double inject(const env_pool_args& a, const env_call& c, env_fault f, env_answer& out) {
  if (f == env_fault::none) return 0;
  out.injected = true;
  if (f == env_fault::flood) {
    std::string flood;
    for (int64_t i = 0; i < 4 * a.env.max_observation_tokens; ++i)
      flood += "flood ";
    out.observations.assign(out.observations.empty() ? 1 : out.observations.size(), flood);
    spdlog::warn("environment: injected fault: episode {} turn {} floods ({} bytes)", c.episode,
                 c.turn, flood.size());
    return 0;
  }
  const char* what = f == env_fault::hang    ? "timed out (injected hang)"
                     : f == env_fault::crash ? "crashed (injected)"
                                             : "answered garbage (injected)";
  spdlog::warn("environment: injected fault: episode {} turn {} {}", c.episode, c.turn, what);
  const double late = f == env_fault::hang ? static_cast<double>(a.env.timeout_ms) : 0.0;
  if (out.failed) return late;                     // it failed on its own as well
  if (out.failed_attempts >= a.env.max_retries) {  // no replay left for the real answer
    out = env_answer{};
    out.failed = out.done = out.injected = true;
    out.failed_attempts = static_cast<int32_t>(a.env.max_retries);
    out.error = std::string("the environment ") + what;
    return late;
  }
  ++out.failed_attempts;
  if (out.error.empty()) out.error = std::string("the environment ") + what + "; replayed";
  return late;
}

// Records one call's failed attempts and outcome; false when the failure rate is over its
// bound.
bool record(self_ptr self, const env_answer& a) {
  auto& st = self->state;
  const auto& e = st.args.env;
  for (int32_t i = 0; i <= a.failed_attempts; ++i) {
    st.recent.push_back(i < a.failed_attempts || a.failed);
    if (static_cast<int64_t>(st.recent.size()) > e.failure_window) st.recent.pop_front();
  }
  if (static_cast<int64_t>(st.recent.size()) < e.failure_window) return true;
  int64_t bad = 0;
  for (bool f : st.recent)
    bad += f;
  return static_cast<double>(bad) <= e.max_failure_rate * static_cast<double>(e.failure_window);
}

// Answers `rp` with `a` after the call's injected latency, or ends the pool when its
// environment fails too often.
void settle(self_ptr self, const env_call& c, env_answer a,
            caf::typed_response_promise<env_answer> rp, env_fault fault) {
  auto& st = self->state;
  const double late = inject(st.args, c, fault, a);
  if ((a.failed || a.failed_attempts > 0) && !a.error.empty()) st.last_error = a.error;
  if (!record(self, a)) {
    auto why = "environment of rollouter " + std::to_string(st.args.worker) +
               ": more than env.max_failure_rate (" + std::to_string(st.args.env.max_failure_rate) +
               ") of the last " + std::to_string(st.args.env.failure_window) +
               " calls failed; the last failure: " + st.last_error;
    spdlog::error("{}", why);
    rp.deliver(caf::make_error(errc::env_failed, why));
    self->quit(caf::make_error(errc::env_failed, why));
    return;
  }
  ++st.answered;
  a.latency_ms = tool_latency_ms(st.args.env, st.args.seed, c.episode, c.turn) + late;
  if (a.latency_ms <= 0) {
    rp.deliver(std::move(a));
    return;
  }
  const auto ticket = st.next_ticket++;
  const auto wait = std::chrono::microseconds(static_cast<int64_t>(a.latency_ms * 1000));
  st.waiting.emplace(ticket, delayed{std::move(a), rp});
  self->delayed_send(self, wait, due_atom::value, ticket);
}

}  // namespace

env_pool_actor::behavior_type env_pool_fn(self_ptr self, env_pool_args args) {
  auto& st = self->state;
  st.args = std::move(args);
  if (st.args.env.kind == env_kind::external)
    for (int64_t i = 0; i < st.args.env.num_workers; ++i)
      st.workers.push_back(self->spawn<caf::detached + caf::linked>(env_worker_fn, st.args));
  return {
      [self](env_atom, env_call& c) -> caf::result<env_answer> {
        auto& st = self->state;
        auto rp = self->make_response_promise<env_answer>();
        const auto fault = next_fault(st);
        if (st.workers.empty()) {
          settle(self, c, calculator_answer(st.args.format, c.text), rp, fault);
          return rp;
        }
        auto& w = st.workers[c.episode % st.workers.size()];
        self->request(w, caf::infinite, env_atom::value, c)
            .then([self, c, rp, fault](env_answer& a) { settle(self, c, std::move(a), rp, fault); },
                  [self, c, rp, fault](caf::error& e) {
                    env_answer a;
                    a.failed = a.done = true;
                    a.error = self->system().render(e);
                    settle(self, c, std::move(a), rp, fault);
                  });
        return rp;
      },
      [self](due_atom, uint64_t ticket) {
        auto it = self->state.waiting.find(ticket);
        if (it == self->state.waiting.end()) return;
        it->second.promise.deliver(std::move(it->second.answer));
        self->state.waiting.erase(it);
      },
      [self](stop_atom) -> int64_t {
        self->quit();
        return self->state.answered;
      },
  };
}

env_pool_actor spawn_env_pool(caf::actor_system& sys, env_pool_args args) {
  return sys.spawn(env_pool_fn, std::move(args));
}

}  // namespace asyncrl
