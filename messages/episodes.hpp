#pragma once

// What a rollouter and its environment pool (actors/env_pool.hpp) exchange for one turn of a
// multi-turn episode (docs/episodes.md): the plain data of runtime/tools/env_turn.hpp, with an
// `inspect()` each. Torch-free.

#include <caf/meta/type_name.hpp>

#include "runtime/tools/env_turn.hpp"

namespace asyncrl {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, env_call& x) {
  return f(caf::meta::type_name("env_call"), x.episode, x.turn, x.text, x.task, x.ground_truth,
           x.earlier);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, env_answer& x) {
  return f(caf::meta::type_name("env_answer"), x.observations, x.done, x.has_reward, x.reward,
           x.failed, x.error, x.latency_ms, x.failed_attempts, x.injected);
}

}  // namespace asyncrl
