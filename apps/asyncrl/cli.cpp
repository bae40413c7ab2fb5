#include "apps/asyncrl/cli.hpp"

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <memory>

#include "apps/asyncrl/chaos_command.hpp"
#include "apps/asyncrl/config_command.hpp"
#include "apps/asyncrl/data_command.hpp"
#include "apps/asyncrl/eval_command.hpp"
#include "apps/asyncrl/export_command.hpp"
#include "apps/asyncrl/generate_command.hpp"
#include "apps/asyncrl/repl_command.hpp"
#include "apps/asyncrl/score_command.hpp"
#include "apps/asyncrl/serve_command.hpp"
#include "apps/asyncrl/sft_command.hpp"
#include "apps/asyncrl/simulate_command.hpp"
#include "apps/asyncrl/tokenize_command.hpp"
#include "apps/asyncrl/train_command.hpp"
#include "apps/asyncrl/trainer_rank_command.hpp"
#include "apps/asyncrl/worker_command.hpp"
#include "runtime/common/progress.hpp"
#include "runtime/config/params.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/task/dataset.hpp"

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
  std::unique_ptr<loaded_config> load() const { return load_config(path, overrides); }
};

// Every subcommand's parsed arguments, and the subcommand objects to ask which one ran.
struct cli_args {
  config_args sft, train, simulate, data, config, chaos;
  int64_t chaos_rounds = 1;  // chaos --rounds
  double chaos_minutes = 0;  // chaos --minutes
  double chaos_rss_growth_mb = 256;
  bool per_step = false;     // simulate --per-step
  std::string data_out;      // data --out
  std::string resume_dir;    // train --resume
  bool tensorboard = false;  // train --tensorboard
  config_query query;        // config --describe / --get
  eval_command eval;
  generate_command generate;
  score_command score;
  tokenize_command tokenize;
  export_command export_model;
  serve_command serve;
  // The subcommands, to ask which one was parsed.
  CLI::App* sft_cmd = nullptr;
  CLI::App* train_cmd = nullptr;
  CLI::App* chaos_cmd = nullptr;
  CLI::App* worker_cmd = nullptr;
  worker_options worker;
  CLI::App* rank_cmd = nullptr;
  trainer_rank_options rank;
  CLI::App* repl_cmd = nullptr;
  repl_options repl;
  CLI::App* simulate_cmd = nullptr;
  CLI::App* eval_cmd = nullptr;
  CLI::App* generate_cmd = nullptr;
  CLI::App* score_cmd = nullptr;
  CLI::App* tokenize_cmd = nullptr;
  CLI::App* export_cmd = nullptr;
  CLI::App* serve_cmd = nullptr;
  CLI::App* data_cmd = nullptr;
  CLI::App* config_cmd = nullptr;
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

void add_run_commands(CLI::App& app, cli_args& a) {
  a.sft_cmd = app.add_subcommand("sft", "supervised warm-start on the task's worked answers");
  a.sft.attach(a.sft_cmd, true);

  a.train_cmd = app.add_subcommand("train", "RL post-training on the actor runtime (the main job)");
  a.train.attach(a.train_cmd, false);
  a.train_cmd->add_option("--resume", a.resume_dir,
                          "continue the run in this directory from its newest usable checkpoint "
                          "(its config.yaml, with any key=value overrides)");
  a.train_cmd->add_flag("--tensorboard", a.tensorboard,
                        "also write TensorBoard event files in RUN_DIR/tensorboard/ (the same as "
                        "runtime.tensorboard=true)");

  a.worker_cmd = app.add_subcommand(
      "worker", "join a running train job with rollouters, from this or another machine");
  a.worker_cmd->add_option("--connect", a.worker.connect, "HOST:PORT of the train job's listener")
      ->required();
  a.worker_cmd->add_option("--rollouters", a.worker.rollouters, "rollouters in this process")
      ->capture_default_str();
  a.worker_cmd->add_option("--reward-workers", a.worker.reward_workers,
                           "reward workers in this process (not supported yet)");
  a.worker_cmd->add_option("--tls-dir", a.worker.tls_dir,
                           "DIR with ca.pem, node.pem, node.key (scripts/make-certs.sh)");
  a.worker_cmd->add_option("--secret-file", a.worker.secret_file,
                           "a run without TLS: its RUN_DIR/run.secret (or set ASYNCRL_RUN_SECRET)");
  a.worker_cmd
      ->add_option("--rejoin-s", a.worker.rejoin_s,
                   "after losing the controller (a partition, a missed deadline), try to join "
                   "again as a new node for this many seconds; 0 = exit at once")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  a.worker_cmd->add_option("overrides", a.worker.overrides,
                           "this machine's settings: runtime.device=..., rollout.threads=..., "
                           "cluster.tls.*=...");
  a.rank_cmd = app.add_subcommand(
      "trainer-rank",
      "one data-parallel trainer rank: join a run from another machine with --connect (train "
      "starts its local ranks itself; docs/scaling.md)");
  a.rank_cmd->add_option("--connect", a.rank.connect,
                         "HOST:PORT of the run's cluster listener: a rank on another machine");
  a.rank_cmd->add_option("--secret-file", a.rank.secret_file,
                         "with --connect, a run without TLS: its RUN_DIR/run.secret (or set "
                         "ASYNCRL_RUN_SECRET)");
  a.rank_cmd->add_option("--tls-dir", a.rank.tls_dir,
                         "with --connect: DIR with ca.pem, node.pem, node.key");
  a.rank_cmd->add_option("--config,-c", a.rank.config,
                         "with --join: the run's config (<run_dir>/dp_config.yaml)");
  a.rank_cmd->add_option("--rank", a.rank.rank, "with --join: 1 .. trainer.data_parallel - 1");
  a.rank_cmd->add_option("--join", a.rank.join,
                         "HOST:PORT of the rendezvous, for the ranks asyncrl train starts");
  a.rank_cmd->add_option("overrides", a.rank.overrides,
                         "key=value; with --connect only this machine's: trainer.device, "
                         "model.path, runtime.log_level, cluster.tls.*");
  a.repl_cmd = app.add_subcommand(
      "repl", "the console: watch and steer a live run (attach to one, or start one)");
  a.repl_cmd->add_option("--attach", a.repl.attach,
                         "RUN_DIR (its cluster.json) or HOST:PORT of a run in progress");
  a.repl_cmd->add_option("--config,-c", a.repl.config,
                         "start `asyncrl train --config FILE` in the background and attach");
  a.repl_cmd->add_option(
      "--exec,-e", a.repl.exec,
      "run these commands (separated by ';') and exit, e.g. \"status; checkpoint\"");
  a.repl_cmd->add_flag("--json", a.repl.json, "one JSON object per command (for scripts)");
  a.repl_cmd->add_flag("--read-only", a.repl.read_only,
                       "refuse every command that changes the run");
  a.repl_cmd->add_option("--tls-dir", a.repl.tls_dir,
                         "DIR with ca.pem, node.pem, node.key, as for workers");
  a.repl_cmd->add_option("--secret-file", a.repl.secret_file,
                         "a run without TLS: its run.secret (default: RUN_DIR/run.secret with "
                         "--attach RUN_DIR, or ASYNCRL_RUN_SECRET)");
  a.repl_cmd->add_option("overrides", a.repl.overrides,
                         "with --config: the run's key=value overrides; with --attach: "
                         "cluster.tls.*, cluster.request_timeout_ms, runtime.log_level");
  a.chaos_cmd = app.add_subcommand(
      "chaos", "fault-injection soak: short train runs, one fault kind each, invariants checked");
  a.chaos.attach(a.chaos_cmd, true);
  a.chaos_cmd
      ->add_option("--rounds", a.chaos_rounds,
                   "repeat the whole series this many times, runtime.seed + 0, 1, ...")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  a.chaos_cmd->add_option("--minutes", a.chaos_minutes,
                          "a soak: repeat the series until this many minutes have passed");
  a.chaos_cmd
      ->add_option("--max-rss-growth-mb", a.chaos_rss_growth_mb,
                   "with --minutes: the resident memory may grow at most this much from the end "
                   "of the first series to the end")
      ->capture_default_str();

  a.simulate_cmd = app.add_subcommand(
      "simulate", "discrete-event model of a run: the same scheduling rules, modelled costs");
  a.simulate.attach(a.simulate_cmd, true);
  a.simulate_cmd->add_flag("--per-step", a.per_step, "also print every simulated step");
}

// An enum option spelled as in configs (enum_names.hpp: one table for both).
template <class E>
CLI::Option* add_enum_option(CLI::App* app, const std::string& flag, E& into,
                             const std::string& help) {
  std::vector<std::string> names;
  for (const auto& n : enum_names(E{}))
    names.emplace_back(n.name);
  return app
      ->add_option_function<std::string>(
          flag, [&into](const std::string& s) { into = *parse_enum<E>(s); }, help)
      ->check(CLI::IsMember(names));
}

void add_eval(CLI::App& app, cli_args& a) {
  auto& ev = a.eval;
  auto* eval = a.eval_cmd =
      app.add_subcommand("eval", "accuracy: greedy pass@1, and mean@N with --samples");
  add_model_options(eval, ev.model);
  eval->add_option("--data,-d", ev.data_path,
                   "GSM8K-style JSONL or Parquet (question, answer); a hub dir: its test split")
      ->required();
  eval->add_option("--samples,-n", ev.samples, "sampled responses per question for mean@N")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  eval->add_option("--batch", ev.batch, "KV-cache slots")->check(CLI::PositiveNumber);
  add_sampling_options(eval, ev.sampling, ev.seed, ev.max_new_tokens);
  add_enum_option(eval, "--tool", ev.env.kind,
                  "what answers model turns: none, calculator or external (docs/env-protocol.md)");
  eval->add_option("--env-command", ev.env.command,
                   "--tool external: the environment's command line (split on whitespace)");
  eval->add_option("--env-socket", ev.env.socket,
                   "--tool external: or the Unix socket of an environment server");
  add_enum_option(eval, "--env-reward", ev.env.reward,
                  "what scores an episode: scorer (the final model turn), env or sum");
  eval->add_option("--env-timeout-ms", ev.env.timeout_ms, "--tool external: per call")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  eval->add_option("--max-turns", ev.max_turns,
                   "model turns per episode (with --tool; --max-new-tokens is per turn)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  eval->add_option("--max-episode-tokens", ev.max_episode_tokens,
                   "model and tool tokens per episode; 0 = --max-new-tokens")
      ->check(CLI::NonNegativeNumber);
  eval->add_flag("--tool-off", ev.tool_off,
                 "the tool answers every call 'error: tool unavailable' (accuracy without it)");
  eval->add_option("--responses", ev.responses_path,
                   "write the greedy responses as JSONL (question, ground_truth, response, "
                   "reward, turns)");
}

void add_generate(CLI::App& app, cli_args& a) {
  auto& gen = a.generate;
  auto* generate = a.generate_cmd =
      app.add_subcommand("generate", "sample responses to one prompt");
  add_model_options(generate, gen.model);
  generate->add_option("--prompt,-p", gen.prompt, "question text")->required();
  generate->add_option("--samples,-n", gen.samples, "responses to sample")
      ->check(CLI::PositiveNumber);
  generate->add_flag("--raw", gen.raw,
                     "use the prompt as is, without the chat template (or <bos> ... '\\n')");
  generate->add_flag("--stream", gen.stream,
                     "print one response's text as it is generated (whole UTF-8 characters), "
                     "not JSON");
  add_sampling_options(generate, gen.sampling, gen.seed, gen.max_new_tokens);
}

void add_score(CLI::App& app, cli_args& a) {
  auto* score = a.score_cmd = app.add_subcommand("score", "per-token log-probs of given sequences");
  add_model_options(score, a.score.model);
  score
      ->add_option("--input,-i", a.score.input_path,
                   "JSONL of {\"token_ids\": [...]} or {\"text\": ...}")
      ->required();
}

void add_tokenize(CLI::App& app, cli_args& a) {
  auto* t = a.tokenize_cmd =
      app.add_subcommand("tokenize", "text to token ids (and back) with a model's tokenizer");
  t->add_option("--model,-m", a.tokenize.model_dir,
                "directory with tokenizer.json (Hugging Face) or char_tokenizer.json")
      ->required();
  t->add_option("--input,-i", a.tokenize.input_path,
                "JSONL of {\"text\": ...} (or {\"ids\": [...]} with --decode); - = stdin")
      ->required();
  t->add_flag("--decode", a.tokenize.decode, "ids to text");
  t->add_flag("--skip-special", a.tokenize.skip_special, "--decode: drop special tokens");
}

void add_serve(CLI::App& app, cli_args& a) {
  auto& s = a.serve;
  auto* x = a.serve_cmd = app.add_subcommand(
      "serve", "the OpenAI API over a model directory, or following a run (docs/serve.md)");
  x->add_option("--model,-m", s.model.model_dir,
                "model directory (config.json, model.safetensors)");
  x->add_option("--follow", s.follow,
                "a run directory: serve its newest checkpoint's weights, and switch to each "
                "newer one");
  x->add_option("--follow-every-s", s.follow_every_s, "--follow: how often to look")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  x->add_option("--device", s.model.device, "torch device: cpu, cuda, cuda:N")
      ->capture_default_str();
  x->add_option("--host", s.host, "address to listen on (non-loopback: TLS and an API key)")
      ->capture_default_str();
  x->add_option("--port", s.port, "port; 0 = any free one (printed)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  x->add_option("--served-model-name", s.served_model_name,
                "the model name clients send (default: the directory's name)");
  x->add_option("--api-key", s.api_key,
                "clients must send Authorization: Bearer KEY (or set ASYNCRL_API_KEY)");
  x->add_option("--tls-cert", s.tls_cert, "PEM certificate: serve HTTPS");
  x->add_option("--tls-key", s.tls_key, "PEM private key of --tls-cert");
  x->add_flag("--allow-insecure", s.allow_insecure,
              "plain HTTP on a non-loopback address (a network you trust)");
  add_enum_option(x, "--chat-template", s.chat,
                  "how chat messages become a prompt (auto: the tokenizer's template)");
  x->add_option("--system-prompt", s.system_prompt,
                "system turn when a chat has none (default: the template's)");
  x->add_option("--max-batch", s.max_batch, "choices decoded together (KV-cache slots)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  x->add_option("--max-context", s.max_context,
                "prompt + response tokens; 0 = the model's max_position_embeddings")
      ->check(CLI::NonNegativeNumber);
  x->add_option("--max-tokens", s.limits.max_tokens, "the most tokens a choice may ask for")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  x->add_option("--max-n", s.limits.max_n, "the most choices a request may ask for")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  x->add_option("--max-concurrent", s.limits.max_concurrent,
                "requests in flight; more are answered 429")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  x->add_option("--max-body-bytes", s.limits.max_body_bytes, "request body limit (413 above)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  x->add_option("--steps-per-round", s.steps_per_round,
                "decode steps between looks at new requests and stop strings")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  x->add_option("--seed", s.seed, "seed of the sampling streams (a request's seed picks one)")
      ->capture_default_str();
}

void add_export(CLI::App& app, cli_args& a) {
  auto& e = a.export_model;
  auto* x = a.export_cmd = app.add_subcommand(
      "export", "re-save a model directory for transformers, e.g. as bf16 (docs/hf-models.md)");
  auto* model = x->add_option("--model,-m", e.model_dir, "model directory to read");
  auto* run = x->add_option("--run", e.run_dir,
                            "or: a train run directory; its newest usable checkpoint's policy");
  model->excludes(run);
  x->add_option("--out,-o", e.out_dir, "directory to write")->required();
  x->add_option("--dtype", e.dtype, "weights of the copy")
      ->check(CLI::IsMember({"float32", "bf16"}))
      ->capture_default_str();
}

void add_data_and_config(CLI::App& app, cli_args& a) {
  a.data_cmd = app.add_subcommand("data", "write the task's train/test JSONL files");
  a.data.attach(a.data_cmd, false);
  a.data_cmd->add_option("--out,-o", a.data_out, "output directory")->required();

  a.config_cmd = app.add_subcommand("config", "print the resolved config, or every key");
  a.config.attach(a.config_cmd, false);
  a.config_cmd->add_flag("--describe", a.query.describe,
                         "list every key with its type, value and help");
  a.config_cmd->add_option("--get", a.query.get_key, "print only this key's value");
}

// The model commands log warnings only: their output is the JSON on stdout.
template <class Command>
int quietly(int (*run)(const Command&), const Command& c) {
  init_logging("warn");
  return run(c);
}

// train --config FILE, or train --resume RUN_DIR (the run's own config.yaml + overrides).
int run_train(const cli_args& a) {
  // --tensorboard is an override like any other, so config.yaml (and a resume) keeps it.
  auto overrides = a.train.overrides;
  if (a.tensorboard) overrides.push_back("runtime.tensorboard=true");
  if (a.resume_dir.empty()) {
    if (a.train.path.empty())
      throw config_error("train: --config FILE is required (or --resume RUN_DIR)");
    return run_train_command(*load_config(a.train.path, overrides));
  }
  if (!a.train.path.empty())
    throw config_error(
        "train --resume uses the run's own config.yaml; give changes as key=value "
        "overrides, not --config");
  const auto path = a.resume_dir + "/config.yaml";
  if (!std::ifstream(path))
    throw config_error("train --resume " + a.resume_dir +
                       ": no config.yaml there (not a run "
                       "directory?)");
  overrides.push_back("runtime.run_dir=" + a.resume_dir);
  return run_train_command(*load_config(path, overrides), a.resume_dir);
}

// Runs the one subcommand that was parsed; the config-driven ones load their config first.
int dispatch(const cli_args& a) {
  if (a.sft_cmd->parsed()) return run_sft_command(*a.sft.load());
  if (a.simulate_cmd->parsed()) return run_simulate_command(*a.simulate.load(), a.per_step);
  if (a.train_cmd->parsed()) return run_train(a);
  if (a.worker_cmd->parsed()) return run_worker_command(a.worker);
  if (a.rank_cmd->parsed()) return run_trainer_rank_command(a.rank);
  if (a.repl_cmd->parsed()) return run_repl_command(a.repl);
  if (a.chaos_cmd->parsed())
    return run_chaos_command(
        {a.chaos.path, a.chaos.overrides, a.chaos_rounds, a.chaos_minutes, a.chaos_rss_growth_mb});
  if (a.eval_cmd->parsed()) return quietly(run_eval_command, a.eval);
  if (a.generate_cmd->parsed()) return quietly(run_generate_command, a.generate);
  if (a.score_cmd->parsed()) return quietly(run_score_command, a.score);
  if (a.tokenize_cmd->parsed()) return quietly(run_tokenize_command, a.tokenize);
  if (a.export_cmd->parsed()) return quietly(run_export_command, a.export_model);
  if (a.serve_cmd->parsed()) {
    init_logging("info");
    return run_serve_command(a.serve);
  }
  if (a.data_cmd->parsed()) return run_data_command(*a.data.load(), a.data_out);
  if (a.config_cmd->parsed()) return run_config_command(*a.config.load(), a.query);
  return 0;
}

// The one place errors become exit codes: 2 for bad config or data, 1 for anything else.
int dispatch_reporting_errors(const cli_args& a) {
  try {
    return dispatch(a);
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
}

}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{"asyncrl: asynchronous RL post-training of LLMs on CAF actors"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("asyncrl ") + ASYNCRL_VERSION);
  cli_args a;
  add_run_commands(app, a);
  add_eval(app, a);
  add_generate(app, a);
  add_score(app, a);
  add_tokenize(app, a);
  add_export(app, a);
  add_serve(app, a);
  add_data_and_config(app, a);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return dispatch_reporting_errors(a);
}

}  // namespace asyncrl
