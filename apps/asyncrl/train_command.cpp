#include "apps/asyncrl/train_command.hpp"

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "actors/controller.hpp"
#include "actors/env.hpp"
#include "apps/asyncrl/reports.hpp"
#include "apps/asyncrl/run_setup.hpp"
#include "messages/type_ids.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/model/model_io.hpp"
#include "runtime/model/weight_sync.hpp"
#include "runtime/task/evaluate.hpp"
#include "runtime/task/prompting.hpp"
#include "runtime/task/task_data.hpp"

namespace asyncrl {

namespace fs = std::filesystem;

namespace {

void check_lengths(const task_data& d, const char_tokenizer& tok, const run_config& cfg,
                   const model_config& m) {
  for (size_t i = 0; i < d.train.size(); ++i) {
    auto n = static_cast<int64_t>(encode_prompt(tok, d.train[i].question).size());
    if (n > cfg.data.max_prompt_length)
      throw std::runtime_error(d.train_source + ": example " + std::to_string(i + 1) + " has a " +
                               std::to_string(n) + "-token prompt, over data.max_prompt_length " +
                               std::to_string(cfg.data.max_prompt_length));
  }
  if (cfg.data.max_prompt_length + cfg.rollout.max_new_tokens > m.max_position_embeddings)
    throw std::runtime_error(
        "data.max_prompt_length + rollout.max_new_tokens (" +
        std::to_string(cfg.data.max_prompt_length + cfg.rollout.max_new_tokens) +
        ") exceeds the model's max_position_embeddings " +
        std::to_string(m.max_position_embeddings));
}

// Greedy pass@1 on the test split with the config's eval settings, logged as `when`.
double greedy_accuracy(const model_bundle& policy, const task_data& data, const run_config& cfg,
                       const char* when) {
  auto e = evaluate(policy.model.ptr(), *policy.tokenizer, data.test,
                    greedy_eval_options(cfg.eval, cfg.runtime.seed));
  spdlog::info("train: {} greedy accuracy {:.4f} on {} test questions", when, e.pass1, e.questions);
  return e.pass1;
}

// The actor run to trainer.total_steps from the policy's weights (version 0). Returns when every
// actor has quit.
run_result run_actors(const run_config& cfg, const model_bundle& policy, const task_data& data,
                      const std::string& run_dir) {
  const auto& tok = *policy.tokenizer;
  controller_args ca;
  ca.env = make_env(cfg, policy.config, tok, /*detached=*/true);
  ca.initial = snapshot_weights(*policy.model, 0);
  ca.train = data.train;
  ca.test = data.test;
  ca.run_dir = run_dir;
  run_result result;
  {
    caf::actor_system_config sys_cfg;
    register_message_types(sys_cfg);
    // The compute roles have their own threads; the cooperative ones (controller, queue, reward,
    // synchronizer) do little work, so one scheduler thread is enough and leaves the cores to
    // the compute. runtime.caf_threads overrides it for experiments.
    const auto caf_threads = cfg.runtime.caf_threads > 0 ? cfg.runtime.caf_threads : 1;
    sys_cfg.set("scheduler.max-threads", static_cast<size_t>(caf_threads));
    caf::actor_system sys{sys_cfg};
    auto ctrl = spawn_controller(sys, ca);
    caf::scoped_actor self{sys};
    self->request(ctrl, caf::infinite, run_atom::value)
        .receive([&](run_result& r) { result = std::move(r); },
                 [&](caf::error& e) {
                   result.ok = false;
                   result.error = "controller: " + sys.render(e);
                 });
  }  // the actor system waits for every actor here; each role quit during shutdown
  return result;
}

// Trained tokens per second per device: the rollouters and the trainer.
double tokens_per_s_per_device(const run_result& r, int64_t rollout_workers) {
  return r.wall_time_s > 0 ? double(r.tokens_trained) / r.wall_time_s / double(rollout_workers + 1)
                           : 0.0;
}

// Loads the run's final weights into the policy, writes <run_dir>/final/ and, with
// runtime.eval_after, evaluates it; records all three in `out`.
void save_final_model(model_bundle& policy, const run_result& result, const task_data& data,
                      const run_config& cfg, const std::string& run_dir, train_outcome& out) {
  load_snapshot(*policy.model, result.final_weights, /*alias=*/false);
  auto final_dir = (fs::path(run_dir) / "final").string();
  save_model_dir(final_dir, *policy.model, &*policy.tokenizer);
  out.params_sha256 = params_sha256(*policy.model);
  out.final_model = final_dir;
  if (cfg.runtime.eval_after) out.final_eval_accuracy = greedy_accuracy(policy, data, cfg, "final");
}

}  // namespace

int run_train_command(const loaded_config& lc) {
  const auto& cfg = lc.cfg;
  auto run = start_run(lc);
  auto policy = load_or_init_policy(cfg.model, cfg.runtime.seed, run.device);
  check_lengths(run.data, *policy.tokenizer, cfg, policy.config);
  spdlog::info("train: mode {}, {} prompts x {} responses per step, {} steps, model {} ({} params)",
               to_string(cfg.async_training.mode), cfg.data.train_batch_size, cfg.rollout.n,
               cfg.trainer.total_steps, model_source(cfg), policy.config.num_parameters());

  train_outcome out;
  if (cfg.runtime.eval_before)
    out.initial_eval_accuracy = greedy_accuracy(policy, run.data, cfg, "initial");
  auto result = run_actors(cfg, policy, run.data, run.dir);
  out.tpspd = tokens_per_s_per_device(result, cfg.rollout.num_workers);
  if (result.ok && result.final_weights.blob)
    save_final_model(policy, result, run.data, cfg, run.dir, out);

  auto summary = train_summary(result, out);
  write_summary((fs::path(run.dir) / "summary.json").string(), summary);
  print_line(summary);
  if (!result.ok) {
    std::cerr << "error: " << result.error << std::endl;
    return 1;
  }
  return 0;
}

}  // namespace asyncrl
