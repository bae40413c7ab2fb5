#include "actors/reward.hpp"

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include "actors/deferred_stop.hpp"
#include "actors/errors.hpp"

#include <map>
#include <optional>

#include "runtime/task/reward.hpp"
#include "runtime/train/advantages.hpp"

namespace asyncrl {

namespace {

struct worker_state {
  static inline const char* name = "reward_worker";
  std::vector<caf::typed_response_promise<double>> hung;  // fault injection only
};

reward_worker_actor::behavior_type worker_fn(
    reward_worker_actor::stateful_pointer<worker_state> self, env_ptr env) {
  return {
      [self, env](score_atom, std::string& text, std::string& truth,
                  uint64_t uid) -> caf::result<double> {
        const auto& r = env->cfg.faults;  // injected faults (tests, asyncrl chaos)
        try {
          if (r.reward_throw_every > 0 &&
              (uid + 1) % static_cast<uint64_t>(r.reward_throw_every) == 0)
            throw std::runtime_error("injected reward fault");
          if (r.reward_hang_every > 0 &&
              (uid + 1) % static_cast<uint64_t>(r.reward_hang_every) == 0) {
            // Never answers: the caller's timeout fires.
            self->state.hung.push_back(self->make_response_promise<double>());
            return self->state.hung.back();
          }
          return score_with(env->reward_fn, env->cfg.reward.prefix, text, truth);
        } catch (const std::exception& e) {
          return caf::make_error(caf::sec::runtime_error, e.what());
        }
      },
      [self](stop_atom) -> int64_t {
        auto n = static_cast<int64_t>(self->state.hung.size());
        self->quit();
        return n;
      },
  };
}

struct pending_group {
  scored_group group;
  size_t remaining = 0;
};

struct reward_state {
  static inline const char* name = "reward";
  reward_args args;
  std::vector<reward_worker_actor> workers;
  std::vector<int64_t> load;  // outstanding calls per worker
  std::map<uint64_t, pending_group> pending;
  reward_counts counts;
  int64_t late = 0;  // groups that arrived after the stop: in flight, never scored
  // A stop waits until every group the rollouters sent has arrived, then answers with the
  // final counts.
  deferred_stop<reward_counts> stop;
};

using reward_ptr = reward_actor::stateful_pointer<reward_state>;

void finish_stop(reward_ptr self) {
  auto& st = self->state;
  if (!st.stop.ready(st.counts.received)) return;
  st.counts.in_progress = static_cast<int64_t>(st.pending.size()) + st.late;
  for (auto& w : st.workers)
    caf::anon_send(w, stop_atom::value);
  st.stop.deliver(st.counts);
  self->quit();
}

bool is_timeout(const caf::error& e) {
  return e.category() == caf::atom("system") &&
         e.code() == static_cast<uint8_t>(caf::sec::request_timeout);
}

void finish_group(reward_ptr self, uint64_t id) {
  auto& st = self->state;
  auto it = st.pending.find(id);
  if (it == st.pending.end() || --it->second.remaining > 0) return;
  auto g = std::move(it->second.group);
  st.pending.erase(it);
  const auto& al = st.args.env->cfg.algorithm;
  g.filtered = !assign_advantages(g, al.adv_estimator, al.filter_groups);
  ++st.counts.forwarded;
  self->send(st.args.queue, put_atom::value, std::move(g));
}

reward_actor::behavior_type reward_fn(reward_ptr self, reward_args args) {
  auto& st = self->state;
  st.args = std::move(args);
  install_exception_handler(self, "reward");
  auto& sys = self->system();
  for (int64_t i = 0; i < st.args.env->cfg.reward.num_workers; ++i) {
    st.workers.push_back(spawn_reward_worker(sys, st.args.env));
    st.load.push_back(0);
  }
  return {
      [self](score_atom, scored_group& g) {
        auto& st = self->state;
        ++st.counts.received;
        if (st.stop.armed()) {  // arrived after the stop: counted, never scored
          ++st.late;
          finish_stop(self);
          return;
        }
        const auto id = g.group_id;
        const auto timeout = std::chrono::milliseconds(st.args.env->cfg.reward.timeout_ms);
        std::vector<std::string> texts;
        for (auto& s : g.samples)
          texts.push_back(st.args.env->tokenizer.decode(s.response));
        auto truth = g.ground_truth;
        auto n = g.samples.size();
        st.pending[id] = pending_group{std::move(g), n};
        for (size_t i = 0; i < n; ++i) {
          // The least loaded worker: a hung one stops getting work.
          size_t w = static_cast<size_t>(std::min_element(st.load.begin(), st.load.end()) -
                                         st.load.begin());
          ++st.load[w];
          const uint64_t uid = st.pending[id].group.samples[i].uid;
          self->request(st.workers[w], timeout, score_atom::value, texts[i], truth, uid)
              .then(
                  [self, id, i, w](double r) {
                    --self->state.load[w];
                    auto it = self->state.pending.find(id);
                    if (it != self->state.pending.end()) it->second.group.samples[i].reward = r;
                    finish_group(self, id);
                  },
                  [self, id, i, w](const caf::error& e) {
                    auto& st = self->state;
                    --st.load[w];
                    if (is_timeout(e))
                      ++st.counts.timeouts;
                    else
                      ++st.counts.failures;
                    auto it = st.pending.find(id);
                    if (it != st.pending.end()) {
                      it->second.group.samples[i].reward = 0.0;
                      it->second.group.samples[i].reward_failed = true;
                    }
                    spdlog::warn("reward: group {} response {} scored 0: {}", id, i,
                                 self->system().render(e));
                    finish_group(self, id);
                  });
        }
      },
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
  // reward.detached_workers: a user reward function that blocks must not stall the scheduler,
  // but the built-in rule-based reward takes microseconds and a thread per worker only
  // competes with the compute roles for cores.
  if (env->detached && env->cfg.reward.detached_workers)
    return sys.spawn<caf::detached>(worker_fn, std::move(env));
  return sys.spawn(worker_fn, std::move(env));
}

reward_actor spawn_reward(caf::actor_system& sys, reward_args args) {
  return sys.spawn(reward_fn, std::move(args));
}

}  // namespace asyncrl
