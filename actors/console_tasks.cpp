#include "actors/console_tasks.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <nlohmann/json.hpp>

#include "messages/errors.hpp"
#include "messages/type_ids.hpp"
#include "runtime/generation/generator.hpp"
#include "runtime/model/model.hpp"
#include "runtime/model/weight_sync.hpp"
#include "runtime/task/evaluate.hpp"
#include "runtime/task/prompting.hpp"

namespace asyncrl {

namespace {

// A float32 model of the run's architecture on the rollouters' device, holding `w` (a copy: the
// snapshot is shared with the trainer's publishing path and must not be aliased by a model that
// outlives it).
CausalLM model_with(const actor_env& env, const weight_snapshot& w) {
  CausalLM m(env.model);
  m->to(torch::Device(env.params.rollouter.device));
  m->eval();
  load_snapshot(*m, w, /*alias=*/false);
  return m;
}

// Runs `work` on a detached actor's thread when asked; errors become error replies.
template <class Work>
caf::actor spawn_task(caf::actor_system& sys, bool detached, Work work) {
  auto fn = [work](caf::event_based_actor* self) -> caf::behavior {
    return {[self, work](run_atom) -> caf::result<std::string> {
      self->quit();
      try {
        return work();
      } catch (const std::exception& e) {
        return caf::make_error(errc::role_failed, e.what());
      }
    }};
  };
  return detached ? sys.spawn<caf::detached>(fn) : sys.spawn(fn);
}

}  // namespace

caf::actor spawn_eval_task(caf::actor_system& sys, env_ptr env, weight_snapshot weights,
                           std::vector<qa_example> test, int64_t n) {
  const bool detached = env->detached;
  if (n > 0 && static_cast<size_t>(n) < test.size()) test.resize(static_cast<size_t>(n));
  return spawn_task(sys, detached, [env, weights, test] {
    const auto t0 = std::chrono::steady_clock::now();
    if (test.empty()) throw std::runtime_error("the run has no test split to evaluate on");
    set_torch_threads(1);  // beside the run: one core's worth, not all of them
    auto m = model_with(*env, weights);
    auto e = evaluate(m.ptr(), *env->tokenizer, env->prompt, test,
                      greedy_eval_options(env->params.trainer.eval,
                                          static_cast<int64_t>(env->params.trainer.seed)));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return nlohmann::ordered_json{{"accuracy", e.pass1},
                                  {"questions", e.questions},
                                  {"policy_version", weights.version},
                                  {"seconds", s}}
        .dump();
  });
}

caf::actor spawn_generate_task(caf::actor_system& sys, env_ptr env, weight_snapshot weights,
                               std::string text, double temperature, uint64_t seed) {
  const bool detached = env->detached;
  return spawn_task(sys, detached, [env, weights, text, temperature, seed] {
    set_torch_threads(1);
    auto m = model_with(*env, weights);
    const auto& tok = *env->tokenizer;
    auto prompt = encode_prompt(tok, env->prompt, text);
    const auto limit = env->model.max_position_embeddings;
    if (static_cast<int64_t>(prompt.size()) >= limit)
      throw std::runtime_error("the prompt has " + std::to_string(prompt.size()) +
                               " tokens; the model takes at most " + std::to_string(limit));
    generator_options go;
    go.max_slots = 1;
    go.max_seq_len = std::min<int64_t>(
        static_cast<int64_t>(prompt.size()) + env->params.rollouter.max_new_tokens, limit);
    go.seed = seed;
    go.eos_id = env->prompt.stop_id;
    generator gen(m.ptr(), go);
    gen_request r;
    r.prompt = prompt;
    r.max_new_tokens = static_cast<int32_t>(go.max_seq_len - static_cast<int64_t>(prompt.size()));
    r.sampling.temperature = temperature;
    r.sampling.top_k = static_cast<int32_t>(env->params.rollouter.top_k);
    r.sampling.top_p = env->params.rollouter.top_p;
    gen.submit(std::move(r));
    auto res = gen.run_all().at(0);
    if (res.reason == finish_reason::error) throw std::runtime_error(res.error);
    return nlohmann::ordered_json{{"prompt", text},
                                  {"response", tok.decode(res.request.tokens)},
                                  {"tokens", res.request.tokens.size()},
                                  {"finish", to_string(res.reason)},
                                  {"policy_version", weights.version}}
        .dump();
  });
}

}  // namespace asyncrl
