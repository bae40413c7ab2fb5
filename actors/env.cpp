#include "actors/env.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>
#include <thread>

namespace asyncrl {

env_ptr make_env(const role_params& params, const model_config& model, tokenizer_ptr tok,
                 bool detached, bool has_trainer) {
  auto env = std::make_shared<actor_env>();
  const auto& node = params.node;
  env->params = params;
  env->plan = make_schedule(params.trainer.schedule);
  env->model = model;
  env->prompt = make_prompt_format(*tok, node.chat_template, node.system_prompt);
  env->tokenizer = std::move(tok);
  env->detached = detached;
  // The CPUs this process may use (taskset, cgroups), not every CPU of the machine.
  const auto allowed = allowed_cpus();
  const int cores =
      std::max(1, allowed.empty() ? static_cast<int>(std::thread::hardware_concurrency())
                                  : static_cast<int>(allowed.size()));
  // Rollouters of this process (at least one share, also when they are all remote).
  const int workers = std::max(1, static_cast<int>(node.rollouters));
  const bool colocated = node.colocated;
  // Colocated: generation and training take turns, each on every core (the rollout workers
  // share them). Otherwise they run at the same time and split the cores: the trainer gets its
  // share, the rollouters the rest.
  int rollout = colocated ? std::max(1, cores / workers)
                          : std::max(1, (cores - cores / (workers + 1)) / workers);
  int trainer = colocated ? cores : std::max(1, cores / (workers + 1));
  env->rollout_threads =
      node.rollout_threads > 0 ? static_cast<int>(node.rollout_threads) : rollout;
  env->trainer_threads =
      node.trainer_threads > 0 ? static_cast<int>(node.trainer_threads) : trainer;
  // OpenMP spinning: libgomp's workers spin after each parallel region before they sleep
  // (OMP_WAIT_POLICY unset: up to GOMP_SPINCOUNT = 300k spins, about a millisecond), on
  // whatever core they run. With one torch thread per role (the 2-core default) no role has an
  // OpenMP team and nothing spins. With multi-thread roles, affinity keeps each role's spinning
  // team on its own cores. libgomp reads both variables once, when it loads: set
  // OMP_WAIT_POLICY=passive in the environment to stop the spinning; the process does not
  // re-exec itself to change it.
  // Colocated roles take turns on every core: nothing to separate, nothing is pinned. The
  // cooperative actors (CAF scheduler threads) and the main thread stay unpinned: they are idle
  // most of the time, and pinning them to one role's cores would take that role's time.
  if (node.affinity == cpu_affinity::roles && !colocated) {
    try {
      env->cores = split_cores(allowed, has_trainer ? env->trainer_threads : 0,
                               env->rollout_threads, static_cast<int>(node.rollouters));
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(e.what());
    }
  }
  return env;
}

const std::vector<int>& rollouter_cpus(const actor_env& env, int32_t worker) {
  static const std::vector<int> none;
  const auto& r = env.cores.rollouters;
  if (r.empty() || worker < 0) return none;
  return r[static_cast<size_t>(worker) % r.size()];
}

void pin_role_thread(const actor_env& env, const std::vector<int>& cpus, const char* role) {
  if (!env.detached || cpus.empty()) return;
  try {
    pin_this_thread(cpus);
    spdlog::debug("{}: pinned to CPUs {}", role, cpu_list_string(cpus));
  } catch (const std::exception& e) {
    spdlog::warn("{}: {}", role, e.what());
  }
}

}  // namespace asyncrl
