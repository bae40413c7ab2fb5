#include "actors/env.hpp"

#include <algorithm>
#include <thread>

namespace asyncrl {

env_ptr make_env(const run_config& cfg, const model_config& model, tokenizer_ptr tok,
                 bool detached) {
  auto env = std::make_shared<actor_env>();
  env->cfg = cfg;
  env->plan = make_schedule(schedule_params_from(cfg));
  env->model = model;
  env->prompt = make_prompt_format(*tok, cfg.data.chat_template, cfg.data.system_prompt);
  env->tokenizer = std::move(tok);
  env->detached = detached;
  env->reward_fn = cfg.reward.function;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Rollouters of this process (at least one share, also when they are all remote).
  const int workers = std::max(1, static_cast<int>(cfg.rollout.num_workers));
  const bool colocated = is_colocated(cfg.async_training);
  // Colocated: generation and training take turns, each on every core (the rollout workers
  // share them). Otherwise they run at the same time and split the cores: the trainer gets its
  // share, the rollouters the rest.
  int rollout = colocated ? std::max(1, cores / workers)
                          : std::max(1, (cores - cores / (workers + 1)) / workers);
  int trainer = colocated ? cores : std::max(1, cores / (workers + 1));
  env->rollout_threads = cfg.rollout.threads > 0 ? static_cast<int>(cfg.rollout.threads) : rollout;
  env->trainer_threads = cfg.trainer.threads > 0 ? static_cast<int>(cfg.trainer.threads) : trainer;
  return env;
}

}  // namespace asyncrl
