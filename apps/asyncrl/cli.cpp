#include "apps/asyncrl/cli.hpp"

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "apps/asyncrl/model_commands.hpp"
#include "apps/asyncrl/reports.hpp"
#include "apps/asyncrl/sft_command.hpp"
#include "apps/asyncrl/train_command.hpp"
#include "runtime/common/progress.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/scheduling/simulator.hpp"
#include "runtime/task/dataset.hpp"
#include "runtime/task/task_data.hpp"

namespace asyncrl {

namespace {

// The --config FILE [key=value ...] pair that config-driven subcommands share.
struct config_args {
  std::string path;
  std::vector<std::string> overrides;
  void attach(CLI::App* cmd, bool required) {
    auto* opt = cmd->add_option("--config,-c", path, "YAML config file (see configs/)");
    if (required) opt->required();
    cmd->add_option("overrides", overrides, "dotted key=value overrides, e.g. sft.steps=100");
  }
};

void add_model_options(CLI::App* cmd, common_model_options& m) {
  cmd->add_option("--model,-m", m.model_dir, "model directory (config.json, model.safetensors)")
      ->required();
  cmd->add_option("--device", m.device, "torch device: cpu, cuda, cuda:N")->capture_default_str();
}

void add_sampling_options(CLI::App* cmd, sampling_params& s, uint64_t& seed,
                          int64_t& max_new_tokens) {
  cmd->add_option("--temperature", s.temperature, "sampling temperature; 0 = greedy")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--top-k", s.top_k, "top-k; 0 = off")->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", s.top_p, "top-p; 1 = off")->check(CLI::Range(1e-9, 1.0));
  cmd->add_option("--seed", seed, "seed of the sampling streams")->capture_default_str();
  cmd->add_option("--max-new-tokens", max_new_tokens, "response length limit")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

int run_data(const config_args& a, const std::string& out_dir) {
  auto lc = load_config(a.path, a.overrides);
  auto d = load_task_data(lc->cfg.data);
  write_task_data(d, out_dir);
  print_line(data_line(d, out_dir));
  return 0;
}

int run_simulate_cmd(const config_args& a, bool per_step) {
  auto lc = load_config(a.path, a.overrides);
  auto p = sim_params_from(lc->cfg);
  auto r = simulate(p);
  print_line(simulate_line(p, r, per_step));
  return 0;
}

int run_sft_cmd(const config_args& a) {
  auto lc = load_config(a.path, a.overrides);
  print_line(sft_line(run_sft(*lc)));
  return 0;
}

}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{"asyncrl: asynchronous RL post-training of LLMs on CAF actors"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("asyncrl ") + ASYNCRL_VERSION);

  config_args sft_args, train_args, sim_args, data_args, config_cmd_args;
  auto* sft = app.add_subcommand("sft", "supervised warm-start on the task's worked answers");
  sft_args.attach(sft, true);

  auto* train = app.add_subcommand("train", "RL post-training on the actor runtime (the main job)");
  train_args.attach(train, true);

  bool sim_steps = false;
  auto* sim = app.add_subcommand(
      "simulate", "discrete-event model of a run: the same scheduling rules, modelled costs");
  sim_args.attach(sim, true);
  sim->add_flag("--per-step", sim_steps, "also print every simulated step");

  eval_command ev;
  auto* eval = app.add_subcommand("eval", "accuracy: greedy pass@1, and mean@N with --samples");
  add_model_options(eval, ev.model);
  eval->add_option("--data,-d", ev.data_path, "GSM8K-style JSONL (question, answer)")->required();
  eval->add_option("--samples,-n", ev.samples, "sampled responses per question for mean@N")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  eval->add_option("--batch", ev.batch, "KV-cache slots")->check(CLI::PositiveNumber);
  add_sampling_options(eval, ev.sampling, ev.seed, ev.max_new_tokens);

  generate_command gen;
  auto* generate = app.add_subcommand("generate", "sample responses to one prompt");
  add_model_options(generate, gen.model);
  generate->add_option("--prompt,-p", gen.prompt, "question text")->required();
  generate->add_option("--samples,-n", gen.samples, "responses to sample")
      ->check(CLI::PositiveNumber);
  generate->add_flag("--raw", gen.raw,
                     "use the prompt as is, without the <bos> ... '\\n' template");
  add_sampling_options(generate, gen.sampling, gen.seed, gen.max_new_tokens);

  score_command sc;
  auto* score = app.add_subcommand("score", "per-token log-probs of given sequences");
  add_model_options(score, sc.model);
  score
      ->add_option("--input,-i", sc.input_path,
                   "JSONL of {\"token_ids\": [...]} or {\"text\": ...}")
      ->required();

  std::string data_out;
  auto* data = app.add_subcommand("data", "write the task's train/test JSONL files");
  data_args.attach(data, false);
  data->add_option("--out,-o", data_out, "output directory")->required();

  bool describe = false;
  std::string get_key;
  auto* config = app.add_subcommand("config", "print the resolved config, or every key");
  config_cmd_args.attach(config, false);
  config->add_flag("--describe", describe, "list every key with its type, value and help");
  config->add_option("--get", get_key, "print only this key's value");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  try {
    if (sft->parsed()) return run_sft_cmd(sft_args);
    if (sim->parsed()) return run_simulate_cmd(sim_args, sim_steps);
    if (train->parsed()) {
      auto lc = load_config(train_args.path, train_args.overrides);
      return run_train_command(*lc);
    }
    if (eval->parsed()) {
      init_logging("warn");
      return run_eval_command(ev);
    }
    if (generate->parsed()) {
      init_logging("warn");
      return run_generate_command(gen);
    }
    if (score->parsed()) {
      init_logging("warn");
      return run_score_command(sc);
    }
    if (data->parsed()) return run_data(data_args, data_out);
    if (config->parsed()) {
      auto lc = load_config(config_cmd_args.path, config_cmd_args.overrides);
      if (!get_key.empty())
        std::cout << lc->schema.value(get_key) << "\n";
      else
        std::cout << (describe ? lc->schema.describe() : lc->schema.dump_yaml());
      return 0;
    }
  } catch (const config_error& e) {
    std::cerr << "config error: " << e.what() << std::endl;
    return 2;
  } catch (const data_error& e) {
    std::cerr << "data error: " << e.what() << std::endl;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}

}  // namespace asyncrl
