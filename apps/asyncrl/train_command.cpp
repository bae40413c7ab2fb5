#include "apps/asyncrl/train_command.hpp"

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>

#include "actors/controller.hpp"
#include "actors/env.hpp"
#include "actors/run_checkpoint.hpp"
#include "apps/asyncrl/cluster_setup.hpp"
#include "apps/asyncrl/dp_session.hpp"
#include "apps/asyncrl/reports.hpp"
#include "apps/asyncrl/run_secret.hpp"
#include "apps/asyncrl/run_setup.hpp"
#include "apps/asyncrl/signals.hpp"
#include "messages/errors.hpp"
#include "messages/type_ids.hpp"
#include "runtime/checkpoint/checkpoint_file.hpp"
#include "runtime/cluster/address.hpp"
#include "runtime/config/resume_compat.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/console/live_keys.hpp"
#include "runtime/model/model_io.hpp"
#include "runtime/model/weight_sync.hpp"
#include "runtime/task/evaluate.hpp"
#include "runtime/task/prompting.hpp"
#include "runtime/task/task_data.hpp"

namespace asyncrl {

namespace fs = std::filesystem;

namespace {

struct train_paths {
  std::string run_dir;
  std::string checkpoint_dir;
};

void check_lengths(const task_data& d, const tokenizer& tok, const prompt_format& fmt,
                   const run_config& cfg, const model_config& m) {
  for (size_t i = 0; i < d.train.size(); ++i) {
    auto n = static_cast<int64_t>(encode_prompt(tok, fmt, d.train[i]).size());
    if (n > cfg.data.max_prompt_length)
      throw std::runtime_error(d.train_source + ": example " + std::to_string(i + 1) + " has a " +
                               std::to_string(n) + "-token prompt, over data.max_prompt_length " +
                               std::to_string(cfg.data.max_prompt_length));
  }
  // A multi-turn episode's whole response (model and environment turns) shares the context.
  const bool episodes = cfg.rollout.max_episode_tokens > 0;
  const int64_t response = episodes ? cfg.rollout.max_episode_tokens : cfg.rollout.max_new_tokens;
  const char* key = episodes ? "rollout.max_episode_tokens" : "rollout.max_new_tokens";
  if (cfg.data.max_prompt_length + response > m.max_position_embeddings)
    throw std::runtime_error("data.max_prompt_length + " + std::string(key) + " (" +
                             std::to_string(cfg.data.max_prompt_length + response) +
                             ") exceeds the model's max_position_embeddings " +
                             std::to_string(m.max_position_embeddings));
}

// Greedy pass@1 on the test split with the config's eval settings, logged as `when`.
double greedy_accuracy(const model_bundle& policy, const task_data& data, const actor_env& env,
                       const run_config& cfg, const char* when) {
  auto e = evaluate(policy.model.ptr(), *policy.tokenizer, env.prompt, data.test,
                    greedy_eval_options(cfg.eval, cfg.runtime.seed));
  spdlog::info("train: {} greedy accuracy {:.4f} on {} test questions", when, e.pass1, e.questions);
  return e.pass1;
}

// The actor run to trainer.total_steps from the policy's weights (version 0), or from a
// checkpoint. SIGINT/SIGTERM become interrupt messages to the controller. Returns when every
// actor has quit.
run_result run_actors(const run_config& cfg, env_ptr env, const model_bundle& policy,
                      const task_data& data, const train_paths& paths,
                      const std::string& config_yaml, std::optional<resume_point> from,
                      bool show_progress) {
  controller_args ca;
  ca.env = std::move(env);
  if (const auto& cores = ca.env->cores; !cores.trainer.empty() || !cores.rollouters.empty()) {
    std::string roles = "trainer on CPUs " + cpu_list_string(cores.trainer);
    for (size_t i = 0; i < cores.rollouters.size(); ++i)
      roles += ", rollouter " + std::to_string(i) + " on " + cpu_list_string(cores.rollouters[i]);
    spdlog::info("train: runtime.affinity=roles: {}; the cooperative actors run on any CPU", roles);
  }
  ca.initial = snapshot_weights(*policy.model, 0);
  ca.train = data.train;
  ca.test = data.test;
  ca.run_dir = paths.run_dir;
  ca.checkpoint_dir = paths.checkpoint_dir;
  ca.config_yaml = config_yaml;
  ca.tensorboard = cfg.runtime.tensorboard;
  ca.show_progress = show_progress;
  if (from) ca.resume = std::move(from->run);
  // trainer.data_parallel > 1: the rendezvous opens and the local ranks start before any actor
  // does; remote ones get their place from the controller (so its listener opens first). Every
  // rank has joined before the roles start; they end with this session, after the actor system
  // (whose trainer drives them) is gone.
  auto dp = dp_session::open(cfg, paths.run_dir, config_yaml);
  if (dp) {
    auto* session = dp.get();
    ca.data_parallel = [session] { return session->leader(); };
    if (dp->awaits_remote())
      ca.admit_rank = [session](const std::string& host, int32_t pid) {
        return session->admit(host, pid);
      };
  }
  run_result result;
  {
    caf::actor_system_config sys_cfg;
    register_message_types(sys_cfg);
    register_error_category(sys_cfg);
    // The compute roles have their own threads; the cooperative ones (controller, queue, reward,
    // synchronizer) do little work, so one scheduler thread is enough and leaves the cores to
    // the compute. runtime.caf_threads overrides it for experiments.
    const auto caf_threads = cfg.runtime.caf_threads > 0 ? cfg.runtime.caf_threads : 1;
    sys_cfg.set("scheduler.max-threads", static_cast<size_t>(caf_threads));
    // A shared queue whose idle threads block on a condition variable. The default
    // work-stealing policy polls an empty queue: 100 spins, then 500 sleeps of 50 us, after every
    // burst of messages; with one thread there is nothing to steal, and that polling was most of
    // the runtime's CPU time (demo run: 2,000 wake-ups/s; overhead_cpu_share 3.3% -> 0.45%).
    sys_cfg.set("scheduler.policy", caf::atom("sharing"));
    const bool networked = cfg.cluster.listen != "off";
    if (networked) configure_network(sys_cfg, cfg.cluster);
    // Without TLS, whoever can reach the listener could steer the run: a console or worker in
    // another process must present the secret only the run's owner can read.
    const bool secret = networked && !cfg.cluster.tls.enabled() && !paths.run_dir.empty();
    if (secret) ca.secret = write_run_secret(paths.run_dir);
    caf::actor_system sys{sys_cfg};
    auto ctrl = spawn_controller(sys, ca);
    auto join_ranks = [&] {
      try {
        dp->join();
      } catch (...) {
        caf::anon_send_exit(ctrl, caf::exit_reason::user_shutdown);
        throw;
      }
    };
    if (dp && !dp->awaits_remote()) join_ranks();
    if (networked) {
      // Workers join here (asyncrl worker --connect HOST:PORT); the chosen port is printed and
      // written to <run_dir>/cluster.json for scripts.
      if (cfg.cluster.tls.enabled()) log_tls_refusals();
      const auto host = split_host_port(cfg.cluster.listen).first;
      uint16_t port = 0;
      try {
        port = publish_controller(sys, caf::actor_cast<caf::actor>(ctrl), cfg.cluster);
      } catch (...) {
        caf::anon_send_exit(ctrl, caf::exit_reason::user_shutdown);
        throw;
      }
      if (!paths.run_dir.empty())
        write_cluster_json(paths.run_dir, host, port, cfg.cluster.tls.enabled());
      // A wildcard listener (0.0.0.0, ::) is no address to connect to: the hints name this
      // machine's own address, and list the others it has.
      const auto join = join_host_port(join_host_for(host), port);
      if (is_wildcard_host(host)) {
        std::string all;
        for (const auto& a : interface_addresses())
          all += (all.empty() ? "" : ", ") + a;
        std::cerr << "cluster: " << join_host_port(host, port)
                  << " listens on every interface; this machine's addresses: " << all
                  << " (the hints below use the first; give workers one they can reach)"
                  << std::endl;
      }
      std::cerr << "cluster: listening on " << join_host_port(host, port)
                << (cfg.cluster.tls.enabled() ? " (TLS)" : "") << "; workers join with: asyncrl "
                << "worker --connect " << join
                << (cfg.cluster.tls.enabled() ? " --tls-dir DIR" : "")
                << (secret ? " --secret-file " + paths.run_dir + "/run.secret" : std::string())
                << std::endl;
      if (dp && dp->awaits_remote())
        std::cerr << "cluster: trainer ranks "
                  << data_parallel_ranks(cfg.trainer) - cfg.trainer.remote_ranks << ".."
                  << data_parallel_ranks(cfg.trainer) - 1
                  << " join with: asyncrl trainer-rank --connect " << join
                  << (cfg.cluster.tls.enabled() ? " --tls-dir DIR" : "")
                  << (secret ? " --secret-file " + paths.run_dir + "/run.secret" : std::string())
                  << " [trainer.device=DEV model.path=DIR]" << std::endl;
    }
    if (dp && dp->awaits_remote()) join_ranks();  // the listener is open: remote ranks join
    interrupt_watch signals([ctrl](int) { caf::anon_send(ctrl, interrupt_atom::value); });
    caf::scoped_actor self{sys};
    // A controller that dies without answering (killed) must not leave us waiting forever.
    self->monitor(ctrl);
    auto fail = [&](const std::string& why) {
      result.ok = false;
      result.status = run_status::failed;
      result.error = "controller: " + why;
    };
    self->send(ctrl, run_atom::value);
    bool done = false;
    self->receive_while([&] { return !done; })(
        [&](run_result& r) {
          result = std::move(r);
          done = true;
        },
        [&](caf::error& e) {
          fail(sys.render(e));
          done = true;
        },
        [&](caf::down_msg& dm) {
          fail("terminated without a result: " + sys.render(dm.reason));
          done = true;
        });
  }  // the actor system waits for every actor here; each role quit during shutdown
  if (dp) result.faults.trainer_rank_kills += dp->ranks_killed();  // before the ranks are stopped
  return result;
}

// The newest usable checkpoint, reporting every newer one that is damaged; those are counted
// in `faults` (checkpoints_skipped).
std::optional<resume_point> latest_checkpoint(const std::string& dir, fault_counts& faults) {
  std::vector<std::string> skipped;
  auto p = load_resume_point(dir, &skipped);
  faults.checkpoints_skipped += static_cast<int64_t>(skipped.size());
  for (auto& s : skipped)
    spdlog::error("checkpoint unusable, skipped: {}", s);
  if (p && !skipped.empty()) spdlog::warn("resuming from the previous checkpoint {}", p->path);
  return p;
}

// The config a checkpoint was cut under (console changes included).
std::unique_ptr<loaded_config> saved_config(const resume_point& p) {
  auto saved = std::make_unique<loaded_config>();
  saved->cfg.bind(saved->schema);
  saved->schema.load_yaml_text(p.config_yaml, p.path + " (config)");
  return saved;
}

// The keys the console may change during a run of this config: the sync interval only in
// fully_async (the console refuses it elsewhere: a sync closes every batch there).
std::vector<std::string> live_keys_of(const run_config& cfg) {
  std::vector<std::string> keys;
  for (const auto& k : live_keys()) {
    const std::string key = k.key;
    if (key == "async_training.trigger_parameter_sync_step" &&
        cfg.async_training.mode != async_mode::fully_async)
      continue;
    keys.push_back(key);
  }
  return keys;
}

// --resume: the live settings in force at the checkpoint (`saved`, changed from the console)
// become the resumed run's, except a key the resume's command line sets. Null when none differ.
std::unique_ptr<loaded_config> restore_live_settings(const loaded_config& lc,
                                                     const loaded_config& saved,
                                                     const resume_point& p) {
  std::vector<std::string> kept;
  const auto keys = live_keys_of(lc.cfg);
  const auto restore = live_values_to_restore(saved, lc, keys, &kept);
  for (const auto& k : kept)
    spdlog::warn("train: resume keeps {} from the command line", k);
  if (restore.empty()) return nullptr;
  std::string list;
  for (const auto& r : restore)
    list += (list.empty() ? "" : ", ") + r;
  spdlog::info("train: resume restores the live settings in force at step {}: {}", p.run.step,
               list);
  return load_config_text(lc.schema.dump_yaml(), "the resumed run's config", restore);
}

// --resume: the checkpoint to continue from, refused when the config changed a key that would
// make it another run.
void check_resume(const loaded_config& lc, const loaded_config& saved, const resume_point& p) {
  if (auto why = resume_conflict(saved, lc, live_keys_of(lc.cfg)); !why.empty())
    throw config_error("cannot resume from " + p.path + ": " + why);
  if (lc.cfg.trainer.total_steps <= p.run.step)
    throw config_error("cannot resume from " + p.path + ": it is at step " +
                       std::to_string(p.run.step) + ", and trainer.total_steps is " +
                       std::to_string(lc.cfg.trainer.total_steps) + "; raise it to continue");
  spdlog::info("train: resuming from {} (step {})", p.path, p.run.step);
}

// Space for checkpoint.keep + 1 checkpoints (a new one is written before the oldest goes) and
// the final model. A checkpoint holds the policy, old and reference models, AdamW's two moments
// (in the trainer's precision) and a float32 snapshot for the rollouters.
uint64_t disk_needed(const run_config& cfg, int64_t params) {
  const uint64_t width = cfg.trainer.precision == train_precision::float64 ? 8 : 4;
  const uint64_t per_checkpoint = static_cast<uint64_t>(params) * (5 * width + 4);
  return per_checkpoint * static_cast<uint64_t>(cfg.checkpoint.keep + 1) +
         static_cast<uint64_t>(params) * 4 + (16u << 20);
}

// Trained tokens per second per device: the rollouters and the trainer.
double tokens_per_s_per_device(const run_result& r, int64_t rollout_workers) {
  return r.wall_time_s > 0 ? double(r.tokens_trained) / r.wall_time_s / double(rollout_workers + 1)
                           : 0.0;
}

// Loads the run's final weights into the policy, writes <run_dir>/final/ and, with
// runtime.eval_after, evaluates it; records all three in `out`.
void save_final_model(model_bundle& policy, const run_result& result, const task_data& data,
                      const actor_env& env, const run_config& cfg, const std::string& run_dir,
                      train_outcome& out) {
  load_snapshot(*policy.model, result.final_weights, /*alias=*/false);
  auto final_dir = (fs::path(run_dir) / "final").string();
  // runtime.save_dtype shapes this output only; the checkpoints keep full precision.
  const bool bf16 = cfg.runtime.save_dtype == weights_dtype::bf16;
  save_model_dir(final_dir, *policy.model, policy.tokenizer.get(),
                 bf16 ? st_dtype::bf16 : st_dtype::f32);
  out.params_sha256 = params_sha256(*policy.model);
  out.final_model = final_dir;
  if (cfg.runtime.eval_after)
    out.final_eval_accuracy = greedy_accuracy(policy, data, env, cfg, "final");
}

}  // namespace

// Where a run's checkpoints go: checkpoint.dir, or <run_dir>/checkpoints.
std::string checkpoint_dir_of(const run_config& cfg) {
  return cfg.checkpoint.dir.empty() ? (fs::path(cfg.runtime.run_dir) / "checkpoints").string()
                                    : cfg.checkpoint.dir;
}

train_report run_training(const loaded_config& given, const train_options& opt) {
  // A resume reads its checkpoint first: the live settings it restores shape everything else.
  std::optional<resume_point> from;
  std::unique_ptr<loaded_config> saved, restored;
  // The faults injected over every attempt below: each attempt's result counts its own only
  // (a checkpoint does not carry them), so the restarts' results are summed here.
  fault_counts faults;
  if (!opt.resume_dir.empty()) {
    const auto dir = checkpoint_dir_of(given.cfg);
    from = latest_checkpoint(dir, faults);
    if (!from) throw std::runtime_error("cannot resume: no usable checkpoint in " + dir);
    saved = saved_config(*from);
    restored = restore_live_settings(given, *saved, *from);
  }
  const loaded_config& lc = restored ? *restored : given;
  const auto& cfg = lc.cfg;
  auto run = start_run(lc);
  auto policy = load_fitting_policy(cfg, run.device, cfg.rollout.num_workers, true);
  // What the run's parts share (parameters, model architecture, tokenizer, prompt format, core
  // split), built once: the length check, the evaluations and every actor use this one.
  const auto env = make_env(make_role_params(cfg), policy.config, policy.tokenizer,
                            /*detached=*/true);
  check_lengths(run.data, *policy.tokenizer, env->prompt, cfg, policy.config);
  train_paths paths{run.dir, checkpoint_dir_of(cfg)};  // run.dir is runtime.run_dir
  check_free_space(run.dir, disk_needed(cfg, policy.config.num_parameters()));
  if (from) check_resume(lc, *saved, *from);
  spdlog::info("train: mode {}, {} prompts x {} responses per step, {} steps, model {} ({} params)",
               to_string(cfg.async_training.mode), cfg.data.train_batch_size, cfg.rollout.n,
               cfg.trainer.total_steps, model_source(cfg), policy.config.num_parameters());

  train_report rep;
  rep.run_dir = run.dir;
  rep.checkpoint_dir = paths.checkpoint_dir;
  auto& out = rep.outcome;
  if (cfg.runtime.eval_before && !from)
    out.initial_eval_accuracy = greedy_accuracy(policy, run.data, *env, cfg, "initial");
  const auto config_yaml = lc.schema.dump_yaml();
  auto result = run_actors(cfg, env, policy, run.data, paths, config_yaml, std::move(from),
                           opt.show_progress);
  faults += result.faults;
  // supervision.trainer_failure=restart: a crashed trainer restarts the run in-process from its
  // last checkpoint, at most supervision.max_restarts times.
  while (!result.ok && result.restartable && out.trainer_restarts < cfg.supervision.max_restarts) {
    auto again = latest_checkpoint(paths.checkpoint_dir, faults);
    if (!again) {
      result.error += "; no checkpoint to restart from";
      break;
    }
    ++out.trainer_restarts;
    spdlog::warn("supervision: {}; restarting from {} ({} of {})", result.error, again->path,
                 out.trainer_restarts, cfg.supervision.max_restarts);
    result = run_actors(cfg, env, policy, run.data, paths, config_yaml, std::move(again),
                        opt.show_progress);
    faults += result.faults;
  }
  result.faults = faults;
  out.tpspd = tokens_per_s_per_device(result, cfg.rollout.num_workers);
  if (result.ok && result.final_weights.blob)
    save_final_model(policy, result, run.data, *env, cfg, run.dir, out);

  rep.summary = train_summary(result, out);
  try {
    write_summary((fs::path(run.dir) / "summary.json").string(), rep.summary);
  } catch (const std::exception& e) {
    // The summary still reaches stdout; the exit code says the run's record is incomplete.
    rep.summary_error = e.what();
  }
  rep.result = std::move(result);
  return rep;
}

int run_train_command(const loaded_config& lc, const std::string& resume_dir) {
  train_options opt;
  opt.resume_dir = resume_dir;
  auto rep = run_training(lc, opt);
  print_line(rep.summary);
  const auto& result = rep.result;
  if (!rep.summary_error.empty())
    std::cerr << "error: cannot write the run's summary: " << rep.summary_error
              << " (the summary above is complete)" << std::endl;
  if (result.ok) return rep.summary_error.empty() ? 0 : 1;
  if (result.status == run_status::stopped) {  // the console's stop: as asked, not a failure
    std::cerr << "stopped: " << result.error << "\nresume with: asyncrl train --resume "
              << rep.run_dir << std::endl;
    return 0;
  }
  std::cerr << (result.status == run_status::interrupted ? "interrupted: " : "error: ")
            << result.error << std::endl;
  if (!list_checkpoints(rep.checkpoint_dir).empty())
    std::cerr << "resume with: asyncrl train --resume " << rep.run_dir << std::endl;
  return result.status == run_status::interrupted ? 130 : 1;
}

}  // namespace asyncrl
