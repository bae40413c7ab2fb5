#include "runtime/config/run_config.hpp"

#include <algorithm>

#include "runtime/cluster/address.hpp"

namespace asyncrl {

using namespace checks;

namespace {

// One binder per section. Key order here does not matter for the output: the schema sorts the
// keys for the dump and for --describe.
void bind_model(config_schema& s, model_section& model) {
  auto& mi = model.init;
  s.add("model.path", &model.path, "starting model directory (HF layout); empty = fresh init");
  s.add("model.tokenizer", &model.tokenizer,
        "a fresh model's tokenizer: directory with a Hugging Face tokenizer.json; empty = the "
        "built-in char vocabulary (only without model.path)");
  s.add_enum("model.init.arch", &mi.arch,
             "architecture of a fresh model: qwen2 has q/k/v biases, llama has none");
  s.add("model.init.hidden_size", &mi.hidden_size, "hidden width", positive_int());
  s.add("model.init.intermediate_size", &mi.intermediate_size, "MLP width", positive_int());
  s.add("model.init.num_hidden_layers", &mi.num_hidden_layers, "decoder layers", positive_int());
  s.add("model.init.num_attention_heads", &mi.num_attention_heads, "query heads", positive_int());
  s.add("model.init.num_key_value_heads", &mi.num_key_value_heads, "key/value heads (GQA)",
        positive_int());
  s.add("model.init.max_position_embeddings", &mi.max_position_embeddings,
        "longest sequence (prompt + response)", positive_int());
  s.add("model.init.rope_theta", &mi.rope_theta, "RoPE base", positive());
  s.add("model.init.rms_norm_eps", &mi.rms_norm_eps, "RMSNorm epsilon", positive());
  s.add("model.init.tie_word_embeddings", &mi.tie_word_embeddings,
        "share the embedding and LM-head weights");
  s.add("model.init.init_std", &mi.init_std, "std of the normal weight init", positive());
}

void bind_data(config_schema& s, data_section& data) {
  s.add_choice("data.task", &data.task, {"arith", "arith_tools"},
               "built-in task when no JSONL paths are given: arith (sums and differences), "
               "arith_tools (multi-step products and sums, solved with the calculator tool)");
  s.add("data.arith_tools.terms_min", &data.arith_tools.terms_min, "arith_tools: fewest terms",
        positive_int());
  s.add("data.arith_tools.terms_max", &data.arith_tools.terms_max, "arith_tools: most terms",
        positive_int());
  s.add("data.arith_tools.digits", &data.arith_tools.digits, "arith_tools: digits of every term",
        positive_int());
  s.add("data.arith_tools.ops", &data.arith_tools.ops,
        "arith_tools: the operators drawn, a subset of '*+-' holding '*'");
  s.add("data.arith_tools.traces", &data.arith_tools.traces,
        "arith_tools: worked answers (the warm start's) as calculator traces; false: '#### N'");
  s.add("data.train_path", &data.train_path,
        "training JSONL, or Parquet (a file, a glob, or a hub directory's train-*.parquet); "
        "empty = built-in task");
  s.add("data.test_path", &data.test_path,
        "test JSONL, or Parquet (a file, a glob, or a hub directory's test-*.parquet); empty = "
        "built-in task");
  s.alias("data.train_files", "data.train_path");
  s.alias("data.val_files", "data.test_path");
  s.add("data.prompt_key", &data.prompt_key,
        "JSONL field of the prompt: a string, or a list of {role, content} chat messages; a "
        "dotted path reaches into nested objects",
        [](const std::string& v) { return v.empty() ? std::string("must not be empty") : ""; });
  s.add("data.answer_key", &data.answer_key,
        "JSONL field of the answer: a GSM8K solution ending in '#### N', a MATH solution with "
        "\\boxed{...}, or the bare answer; a dotted path reaches into nested objects",
        [](const std::string& v) { return v.empty() ? std::string("must not be empty") : ""; });
  s.add_enum("data.chat_template", &data.chat_template,
             "prompt format: auto = the tokenizer's chat template (Qwen or Llama-3 style) or none "
             "without one; none = <bos> question newline");
  s.add("data.system_prompt", &data.system_prompt,
        "system turn of chat prompts; empty = the chat template's default (if it has one)");
  s.add("data.train_size", &data.train_size, "built-in train split size", positive_int());
  s.add("data.test_size", &data.test_size, "built-in test split size", positive_int());
  s.add("data.seed", &data.seed, "seed of the built-in task generator");
  s.add("data.arith.min_digits", &data.arith.min_digits, "fewest digits per operand",
        int_at_least(1));
  s.add("data.arith.max_digits", &data.arith.max_digits, "most digits per operand",
        int_at_least(1));
  s.add("data.arith.ops", &data.arith.ops, "operators to draw from, a subset of '+-'",
        [](const std::string& v) {
          if (v.empty()) return std::string("must name at least one operator");
          for (char c : v)
            if (c != '+' && c != '-') return std::string("may only contain '+' and '-'");
          return std::string();
        });
  s.add("data.train_batch_size", &data.train_batch_size, "prompts per RL step", positive_int());
  s.add("data.max_prompt_length", &data.max_prompt_length, "longest prompt in tokens",
        positive_int());
}

void bind_sft(config_schema& s, sft_section& sft) {
  s.add("sft.steps", &sft.steps, "optimizer steps of the warm-start", positive_int());
  s.add("sft.batch_size", &sft.batch_size, "sequences per warm-start step", positive_int());
  s.add("sft.lr", &sft.lr, "peak learning rate", positive());
  s.add("sft.min_lr_ratio", &sft.min_lr_ratio, "final lr as a share of peak (cosine)",
        in_range(0, 1));
  s.add("sft.weight_decay", &sft.weight_decay, "AdamW weight decay", non_negative());
  s.add("sft.grad_clip", &sft.grad_clip, "global grad-norm clip; 0 = off", non_negative());
  s.add("sft.warmup_steps", &sft.warmup_steps, "linear warmup steps", non_negative_int());
  s.add_enum("sft.schedule", &sft.schedule, "learning-rate schedule");
  s.add("sft.log_every", &sft.log_every, "steps between log lines", positive_int());
  s.add("sft.stop_at_accuracy", &sft.stop_at_accuracy,
        "stop once greedy accuracy on sft.val_size held-out training examples reaches this "
        "(checked every sft.eval_every steps); 0 = run all sft.steps",
        in_range(0, 1));
  s.add("sft.eval_every", &sft.eval_every, "steps between sft.stop_at_accuracy checks",
        positive_int());
  s.add("sft.val_size", &sft.val_size,
        "training examples held out (not trained on) for sft.stop_at_accuracy", positive_int());
}

void bind_rollout(config_schema& s, rollout_section& rollout) {
  s.add("rollout.n", &rollout.n, "responses per prompt (group size G)", positive_int());
  s.add("rollout.temperature", &rollout.temperature, "sampling temperature; 0 = greedy",
        non_negative());
  s.add("rollout.top_k", &rollout.top_k, "keep the k most likely tokens; 0 = off",
        non_negative_int());
  s.add("rollout.top_p", &rollout.top_p, "nucleus sampling mass; 1 = off", [](const double& v) {
    return (v > 0 && v <= 1) ? std::string() : std::string("must be in (0, 1]");
  });
  s.add("rollout.max_new_tokens", &rollout.max_new_tokens,
        "response length limit (of each model turn of a multi-turn episode)", positive_int());
  s.add("rollout.max_turns", &rollout.max_turns,
        "model turns per episode; after the last one the episode ends (> 1 needs env.kind)",
        positive_int());
  s.add("rollout.max_episode_tokens", &rollout.max_episode_tokens,
        "model and environment tokens of one episode's response, together; 0 = "
        "rollout.max_new_tokens",
        non_negative_int());
  s.add("rollout.num_workers", &rollout.num_workers,
        "rollout workers in this process; 0 = only remote ones (asyncrl worker)",
        non_negative_int());
  s.add("rollout.max_batch", &rollout.max_batch, "KV-cache slots per worker", positive_int());
  s.add("rollout.chunk_tokens", &rollout.chunk_tokens,
        "decode steps between control-message checks; they run on the device back to back and "
        "the host reads their tokens once (larger: fewer host round trips, later interrupts)",
        positive_int());

  s.add("rollout.threads", &rollout.threads,
        "torch threads per rollout worker; 0 = all cores in sync+colocate, else shared",
        non_negative_int());
  s.add_enum("rollout.dtype", &rollout.dtype,
             "the rollouters' weights, activations and KV cache (bf16: cast once per weights "
             "version; log-probs and sampling stay float32)");
  s.add("rollout.fused_decode", &rollout.fused_decode,
        "decode steps by the fused kernels (add + RMSNorm, rotary + KV-cache write, attention "
        "over the cache, silu * up; CUDA kernels in a CUDA build) and one matmul for q/k/v and "
        "for gate/up: a few operators per layer instead of about forty; false = the plain ATen "
        "composition (equal up to the order of float additions)");
  s.add("rollout.batch_invariant", &rollout.batch_invariant,
        "the rollouters and the trainer compute with batch-invariant CPU kernels: a token's "
        "log-prob does not depend on the batch, padding or packing, so the rollout's equals the "
        "trainer's bit for bit under the same weights (mismatch_abs_max 0); slower (CPU only; "
        "needs trainer.precision = rollout.dtype)");
  s.add("rollout.device", &rollout.device,
        "torch device of the rollouters: cpu, cuda or cuda:N; empty = runtime.device",
        device_or_empty());
  s.add("rollout.devices", &rollout.devices,
        "the rollouters' devices, e.g. [cuda:1, cuda:2]: rollouter w runs on devices[w mod n]; "
        "empty = rollout.device",
        device_or_empty());
}

void bind_reward(config_schema& s, reward_section& reward) {
  s.add("reward.num_workers", &reward.num_workers, "reward worker pool size", positive_int());
  s.add("reward.detached_workers", &reward.detached_workers,
        "give each scoring worker its own thread (for reward functions that block; "
        "function=external always does)");
  s.add("reward.timeout_ms", &reward.timeout_ms,
        "per-response scoring timeout (function=external: the slack added to the calls' "
        "reward.external.timeout_s queued on a worker)",
        positive_int());
  s.add_enum("reward.function", &reward.function,
             "math: the final answer against the ground truth; prefix: 1 iff the response "
             "starts with reward.prefix (a bandit with a known optimum, for tests); external: "
             "a scorer process or server, reward.external.* (docs/reward-protocol.md)");
  s.add("reward.prefix", &reward.prefix, "reward.function=prefix: the rewarded start");
  s.add("reward.max_failure_rate", &reward.max_failure_rate,
        "the run stops with an error when more than this share of the last "
        "reward.failure_window scored responses failed (timeouts, exceptions, a scorer's "
        "crashes and malformed answers) instead of training on their zero rewards; 1 never stops",
        in_range(0, 1));
  s.add("reward.failure_window", &reward.failure_window,
        "how many of the latest scored responses reward.max_failure_rate judges (none before "
        "that many were scored)",
        positive_int());
  auto& ex = reward.external;
  s.add("reward.external.command", &ex.command,
        "function=external: the scorer's command line, split on whitespace (no shell, no "
        "quoting); each worker runs one process (on its own thread) and talks to it over "
        "stdin/stdout");
  s.add("reward.external.socket", &ex.socket,
        "function=external: instead of a command, the Unix socket of a running scorer server; "
        "each worker opens one connection");
  s.add("reward.external.timeout_s", &ex.timeout_s,
        "function=external: bound of one call (a new process's start-up included); a timeout "
        "scores 0 and kills the process",
        positive());
  s.add("reward.external.max_start_failures", &ex.max_start_failures,
        "function=external: failed scorer starts in a row (exec or connect error, or exit before "
        "the first answer) after which a worker gives up (supervision.max_restarts bounds "
        "its replacements)",
        positive_int());
}

void bind_env(config_schema& s, env_section& env) {
  s.add_enum("env.kind", &env.kind,
             "what answers the model's turns of a multi-turn episode: none (single turn), "
             "calculator (the built-in tool: <<EXPR>> or a calculator tool call), external (a "
             "process or server speaking docs/env-protocol.md)");
  s.add_enum("env.reward", &env.reward,
             "an episode's reward: scorer (reward.function on the final model turn), env (the "
             "environment's reward on its last step; 0 without one), sum (both)");
  s.add("env.num_workers", &env.num_workers, "environment calls in flight per rollouter",
        positive_int());
  s.add("env.timeout_ms", &env.timeout_ms,
        "per environment call; a timeout counts as a failure and restarts the environment",
        positive_int());
  s.add("env.max_retries", &env.max_retries,
        "an episode whose environment failed is replayed from its recorded turns this often, "
        "then ends with reward 0",
        non_negative_int());
  s.add("env.max_failure_rate", &env.max_failure_rate,
        "the run stops with an error when more than this share of the last env.failure_window "
        "environment calls failed; 1 never stops",
        in_range(0, 1));
  s.add("env.failure_window", &env.failure_window,
        "how many of the latest environment calls env.max_failure_rate judges", positive_int());
  s.add("env.max_observation_tokens", &env.max_observation_tokens,
        "an environment turn longer than this many tokens is cut (counted)", positive_int());
  s.add("env.command", &env.command,
        "kind=external: the environment's command line, split on whitespace (no shell); one "
        "process per environment worker");
  s.add("env.socket", &env.socket,
        "kind=external: instead of a command, a running environment server's Unix socket");
  s.add("env.latency_median_ms", &env.latency_median_ms,
        "injected tool latency (benchmarks, tests): the median of a log-normal draw per call; "
        "0 = none",
        non_negative());
  s.add("env.latency_p99_ratio", &env.latency_p99_ratio,
        "injected tool latency: its p99 as a multiple of the median (>= 1)",
        [](const double& v) { return v >= 1 ? std::string() : std::string("must be >= 1"); });
  s.add("env.sync_waits_for_tools", &env.sync_waits_for_tools,
        "a weight sync first waits for every episode's outstanding tool call (verl's behaviour, "
        "for comparison); false: the sync pauses at once and the episode continues under the "
        "new weights when its tool answers");
}

void bind_async_training(config_schema& s, async_section& async_training) {
  auto& at = async_training;
  s.add_enum("async_training.mode", &at.mode,
             "sync: generate the whole batch, then train; periodic: train on groups as they "
             "arrive, one update per batch; fully_async: streaming with a staleness bound");
  s.add("async_training.colocate", &at.colocate,
        "sync mode: generation and training each use every core, in turn");
  s.add("async_training.staleness_threshold", &at.staleness_threshold,
        "s: up to (1 + s) * k * R new groups between syncs (verl)", non_negative());
  s.add("async_training.trigger_parameter_sync_step", &at.trigger_parameter_sync_step,
        "k: local updates between weight syncs", positive_int());
  s.add("async_training.require_batches", &at.require_batches,
        "mini-batches of ppo_mini_batch_size prompts per local update", positive_int());
  s.add("async_training.partial_rollout", &at.partial_rollout,
        "interrupt generation at a sync and resume it under the new weights (needs s > 0)");
  s.add("async_training.max_staleness", &at.max_staleness,
        "eta of AReaL: admission and delivery bound on staleness; -1 = off", int_at_least(-1));
  s.add_enum("async_training.stale_policy", &at.stale_policy,
             "how eta is kept: a group over it at delivery is dropped, or its prompt generated "
             "again; wait: the trainer waits for running groups at their last chance, none is "
             "dropped (no length bias)");
  s.add("async_training.queue_capacity", &at.queue_capacity,
        "groups admitted and not yet trained; 0 = (1 + s) * k * R + 2 * R", non_negative_int());
  s.add("async_training.sync_timeout_ms", &at.sync_timeout_ms,
        "watchdog: a weight sync (pause at a token boundary, load) that takes longer fails the run",
        positive_int());
  s.add("async_training.drain_timeout_ms", &at.drain_timeout_ms,
        "without partial rollout: the longest a pause may wait for the responses in flight",
        positive_int());
  s.add("async_training.sync_retries", &at.sync_retries,
        "a weight sync that failed (a deadline, a lost message, a crashed rollouter) is tried "
        "again this many times before the run fails",
        non_negative_int());
}

void bind_workload(config_schema& s, workload_section& workload) {
  s.add_enum("workload.lengths", &workload.lengths,
             "response lengths: the model's EOS, or forced from a distribution (benchmarks)");
  s.add("workload.median", &workload.median, "fixed length, or the lognormal's median",
        positive_int());
  s.add("workload.sigma", &workload.sigma, "lognormal spread of log length (~1 = long tail)",
        non_negative());
  s.add("workload.min", &workload.min, "shortest forced response", positive_int());
  s.add("workload.max", &workload.max, "longest forced response", positive_int());
}

void bind_simulate(config_schema& s, simulate_section& simulate) {
  auto& sm = simulate;
  s.add("simulate.calibration", &sm.calibration,
        "cost calibration JSON (bench/bench_calibrate); replaces the cost keys");
  s.add("simulate.devices", &sm.devices,
        "total devices; colocated sync uses all of them for each phase", non_negative_int());
  s.add("simulate.rollout_devices", &sm.rollout_devices, "rollout devices", positive_int());
  s.add("simulate.train_devices", &sm.train_devices, "trainer devices", positive_int());
  s.add("simulate.decode_base_ms", &sm.costs.decode_base_ms, "decode step, fixed part",
        non_negative());
  s.add("simulate.decode_per_seq_ms", &sm.costs.decode_per_seq_ms,
        "decode step, per active sequence", non_negative());
  s.add("simulate.prefill_per_token_ms", &sm.costs.prefill_per_token_ms,
        "prefill per context token", non_negative());
  s.add("simulate.train_per_token_ms", &sm.costs.train_per_token_ms,
        "training per response token on one device", non_negative());
  s.add("simulate.train_step_ms", &sm.costs.train_step_ms, "per optimizer step", non_negative());
  s.add("simulate.sync_ms", &sm.costs.sync_ms, "loading new weights on the rollouters",
        non_negative());
  s.add("simulate.reward_ms", &sm.costs.reward_ms, "scoring a group", non_negative());
  s.add("simulate.train_scaling", &sm.costs.train_scaling,
        "training speed-up on the train devices; 0 = ideal", non_negative());
  s.add("simulate.prompt_tokens", &sm.prompt_tokens, "prompt length", positive_int());
  s.add("simulate.warmup_steps", &sm.warmup_steps, "steps left out of the mean",
        non_negative_int());
}

void bind_eval(config_schema& s, eval_section& eval) {
  s.add("eval.samples", &eval.samples, "samples per question; > 1 adds mean@N", positive_int());
  s.add("eval.max_turns", &eval.max_turns,
        "env.kind=calculator: model turns of an evaluated episode; 0 = rollout.max_turns",
        non_negative_int());
  s.add("eval.max_episode_tokens", &eval.max_episode_tokens,
        "env.kind=calculator: tokens of an evaluated episode; 0 = rollout.max_episode_tokens",
        non_negative_int());
  s.add("eval.tool", &eval.tool,
        "env.kind=calculator: whether the calculator answers during evaluation (false: every "
        "call is answered 'error: tool unavailable', to measure the policy without its tool)");
  s.add("eval.max_new_tokens", &eval.max_new_tokens, "response length limit", positive_int());
  s.add("eval.batch", &eval.batch, "KV-cache slots during eval", positive_int());
  s.add("eval.every_steps", &eval.every_steps,
        "train: greedy accuracy on the test split every n steps (metrics.jsonl eval_accuracy; "
        "the time it takes is reported as eval_time_s); 0 = off",
        non_negative_int());
}

void bind_algorithm(config_schema& s, algorithm_section& algorithm) {
  auto& al = algorithm;
  s.add_enum("algorithm.adv_estimator", &al.adv_estimator,
             "grpo: (r - mean) / (std + 1e-6) per group; drgrpo: r - mean");
  s.add("algorithm.filter_groups", &al.filter_groups,
        "skip groups whose rewards are all equal (counted in filtered_groups)");
  s.add("algorithm.refill", &al.refill,
        "with filter_groups: generate a new group in place of each filtered one, so that every "
        "step trains on ppo_mini_batch_size groups with a signal (DAPO's dynamic sampling)");
  s.add("algorithm.max_refill_rounds", &al.max_refill_rounds,
        "refill: at most this many batches (ppo_mini_batch_size groups each) of replacements "
        "per step; a step that runs out trains on fewer groups, logged and marked "
        "refill_exhausted in metrics.jsonl",
        positive_int());
  s.add_enum("algorithm.loss", &al.loss,
             "grpo: coupled PPO clip; decoupled: AReaL's behaviour/proximal split");
  s.add_enum("algorithm.prox_logp", &al.prox_logp,
             "decoupled proximal log-probs: a forward pass, or A-3PO's interpolation");
  s.add("algorithm.use_rollout_logprobs", &al.use_rollout_logprobs,
        "coupled loss: take logp_old from the rollout instead of an old-policy forward");
  s.add("algorithm.clip_eps_low", &al.clip_eps_low, "ratio clip below: 1 - eps_low",
        in_range(0, 1));
  s.add("algorithm.clip_eps_high", &al.clip_eps_high, "ratio clip above: 1 + eps_high",
        non_negative());
  s.add("algorithm.dual_clip_c", &al.dual_clip_c, "dual clip for A < 0: min(L, -c A); 0 = off",
        [](const double& v) {
          return (v == 0 || v > 1) ? std::string() : std::string("must be 0 (off) or > 1");
        });
  s.add("algorithm.kl_coef", &al.kl_coef, "beta of the k3 KL penalty", non_negative());
  s.add("algorithm.imp_weight_cap", &al.imp_weight_cap,
        "decoupled: mask tokens whose behaviour weight exceeds this; 0 = off", non_negative());
  s.add_enum("algorithm.loss_agg", &al.loss_agg,
             "token-mean over the whole batch, or the mean of per-sequence means");
  // Rollout correction (docs/algorithms.md §18), verl's meanings; l_t = log pi_train - log
  // pi_rollout per token with pi_train the old (grpo) or proximal (decoupled) policy.
  auto& rc = al.rollout_correction;
  s.add_enum("algorithm.rollout_correction.is", &rc.is,
             "truncated importance sampling (TIS): none; token: w_t = min(exp(l_t), "
             "is_threshold); sequence: w = min(exp(sum l_t), is_threshold) for every token of a "
             "response. The decoupled loss's behaviour weight is this weight (none: untruncated)");
  s.add("algorithm.rollout_correction.is_threshold", &rc.is_threshold,
        "TIS: the upper bound on the importance weight", positive());
  s.add_enum("algorithm.rollout_correction.rs", &rc.rs,
             "masked importance sampling (MIS, rejection): none; token: drop tokens whose ratio "
             "exp(l_t) is outside [rs_threshold_lower, rs_threshold]; sequence: drop responses "
             "whose exp(sum l_t) is outside; geometric: drop responses whose exp(mean l_t) is "
             "outside (bounds inclusive)");
  s.add("algorithm.rollout_correction.rs_threshold", &rc.rs_threshold,
        "MIS: the upper bound on the ratio", positive());
  s.add("algorithm.rollout_correction.rs_threshold_lower", &rc.rs_threshold_lower,
        "MIS: the lower bound on the ratio; 0 = 1 / rs_threshold", non_negative());
  s.add("algorithm.rollout_correction.veto_threshold", &rc.veto_threshold,
        "drop a whole response holding a token whose ratio exp(l_t) is below this (a token the "
        "trainer finds far less likely than the sampler did); 0 = off",
        non_negative());
}

void bind_trainer(config_schema& s, trainer_section& trainer) {
  auto& tr = trainer;
  s.add("trainer.micro_batch_size", &tr.micro_batch_size,
        "responses per forward/backward; with group_aligned_micro_batches a micro-batch never "
        "spans groups, so it holds at most rollout.n responses",
        positive_int());
  s.add("trainer.micro_batch_tokens", &tr.micro_batch_tokens,
        "> 0: fill each forward/backward with whole responses up to this many packed tokens, "
        "across groups and prompts (replaces micro_batch_size; on a GPU, large micro-batches "
        "keep the kernels busy). With group_aligned_micro_batches the step's groups are packed "
        "in group-id order when the step closes, so arrival order still changes no bit; "
        "without, they are packed as they arrive. 0 = off",
        non_negative_int());
  s.add("trainer.group_aligned_micro_batches", &tr.group_aligned_micro_batches,
        "a micro-batch holds one group's responses only, so arrival order cannot change a bit "
        "of the update; false fills micro-batches across groups (faster, equal to ~1e-6)");
  s.add("trainer.eager_micro_batches", &tr.eager_micro_batches,
        "with unaligned micro-batches: when the queue has no more groups ready, train the "
        "part-filled micro-batch at once instead of waiting for it to fill (the trainer starts "
        "on the first group and never idles with work in hand)");
  s.add("trainer.ppo_mini_batch_size", &tr.ppo_mini_batch_size,
        "prompts (groups) per optimizer step; 0 = data.train_batch_size", non_negative_int());
  s.add("trainer.shared_prompt_attention", &tr.shared_prompt_attention,
        "pack each prompt with its responses into one sequence");
  s.add("trainer.activation_checkpointing", &tr.activation_checkpointing,
        "keep only each decoder layer's input during the forward and recompute the layer in the "
        "backward: activation memory of one layer instead of all, for about a third more "
        "compute (for models or micro-batches that do not fit otherwise)");
  s.add("trainer.padding_free", &tr.padding_free,
        "put a micro-batch's sequences into one row with attention per sequence, so no token is "
        "padding; false = one row per sequence, padded to the longest");
  s.add("trainer.deterministic_accumulation", &tr.deterministic_accumulation,
        "accumulate gradients in float64 so that arrival order does not change the result");
  s.add_enum("trainer.precision", &tr.precision,
             "the trainer's weights and arithmetic; float64 makes updates independent of the "
             "micro-batch partition to ~1e-12; bf16 is mixed precision (float32 master weights "
             "and AdamW state, bf16 forward and backward, float32 log-probs and loss)");
  s.add("trainer.compute_ref", &tr.compute_ref,
        "run the reference model for the kl metric even when kl_coef is 0");
  s.add("trainer.logprob_chunk_tokens", &tr.logprob_chunk_tokens,
        "compute log-probs and entropy from the LM head this many tokens at a time, the "
        "backward recomputing each chunk's logits, so a micro-batch's (tokens x vocab) logits "
        "never exist at once (vocab 151,936: 2048 tokens of float32 logits are 1.2 GB, 8192 "
        "are 5 GB); 0 = the whole micro-batch's logits at once. Not used with "
        "rollout.batch_invariant",
        non_negative_int());
  s.add("trainer.lr", &tr.lr, "peak learning rate", positive());
  s.add("trainer.min_lr_ratio", &tr.min_lr_ratio, "final lr as a share of peak (cosine)",
        in_range(0, 1));
  s.add_enum("trainer.lr_schedule", &tr.lr_schedule, "learning-rate schedule");
  s.add("trainer.warmup_steps", &tr.warmup_steps, "linear warmup steps", non_negative_int());
  s.add("trainer.weight_decay", &tr.weight_decay, "AdamW weight decay", non_negative());
  s.add("trainer.beta1", &tr.beta1, "Adam beta1", in_range(0, 0.999999));
  s.add("trainer.beta2", &tr.beta2, "Adam beta2", in_range(0, 0.999999));
  s.add("trainer.grad_clip", &tr.grad_clip, "global grad-norm clip; 0 = off", non_negative());
  s.add("trainer.total_steps", &tr.total_steps, "optimizer steps of an RL run", positive_int());
  s.add("trainer.threads", &tr.threads, "torch threads of the trainer; 0 = by mode",
        non_negative_int());
  s.add("trainer.device", &tr.device,
        "torch device of the trainer: cpu, cuda or cuda:N; empty = runtime.device",
        device_or_empty());
  s.add("trainer.devices", &tr.devices,
        "one data-parallel rank per device, e.g. [cuda:0, cuda:1]; empty = every rank on "
        "trainer.device",
        device_or_empty());
  s.add("trainer.data_parallel", &tr.data_parallel,
        "data-parallel trainer ranks, each a process (docs/scaling.md); 0 = the length of "
        "trainer.devices, else 1",
        non_negative_int());
  s.add("trainer.shard_optimizer", &tr.shard_optimizer,
        "split the AdamW moments over the data-parallel ranks (ZeRO-1): each rank steps its "
        "shard and the weights are all-gathered; the same update as unsharded");
  s.add("trainer.grad_bucket_mb", &tr.grad_bucket_mb,
        "data parallel: the ranks' gradients are summed in buckets of this many MiB, issued as "
        "the backward finishes each one",
        positive());
  s.add("trainer.overlap_grad_reduce", &tr.overlap_grad_reduce,
        "data parallel: sum the gradients over the ranks while the step's last backward runs "
        "(the same update as summing after it)");
  s.add("trainer.remote_ranks", &tr.remote_ranks,
        "of the data-parallel ranks, the last this many join from other machines (asyncrl "
        "trainer-rank --connect HOST:PORT, the cluster listener) instead of being started here",
        non_negative_int());
  s.add("trainer.dist_listen", &tr.dist_listen,
        "host:port of the data-parallel rendezvous (rank 0's c10d TCPStore; port 0 = any free "
        "port, written to <run_dir>/dp.json)",
        [](const std::string& v) { return check_host_port(v); });
  s.add("trainer.dist_timeout_s", &tr.dist_timeout_s,
        "bound of the data-parallel rendezvous and of every collective: a rank that does not "
        "answer within it fails the run",
        positive());
}

void bind_runtime(config_schema& s, runtime_section& runtime) {
  s.add("runtime.seed", &runtime.seed, "seed of every RNG stream");
  s.add("runtime.run_dir", &runtime.run_dir, "output directory of the run",
        [](const std::string& v) {
          return v.empty() ? std::string("must not be empty") : std::string();
        });
  s.add("runtime.device", &runtime.device,
        "torch device: cpu, cuda or cuda:N (of every role unless trainer.device or "
        "rollout.device says otherwise)",
        [](const std::string& v) {
          return v.empty() ? std::string("expected cpu, cuda or cuda:N") : device_or_empty()(v);
        });
  s.add("runtime.threads", &runtime.threads, "torch threads; 0 = all cores", non_negative_int());
  s.add("runtime.caf_threads", &runtime.caf_threads,
        "CAF scheduler threads of the cooperative actors (controller, queue, reward, "
        "synchronizer; the compute roles have their own); 0 = one",
        non_negative_int());
  s.add_enum("runtime.affinity", &runtime.affinity,
             "roles: pin the trainer and each local rollouter to their own CPUs of the process's "
             "allowed set (as many CPUs as each has torch threads; not when colocated (sync mode "
             "with async_training.colocate), whose roles take turns on every core); none: the "
             "kernel places every thread");
  s.add_enum("runtime.save_dtype", &runtime.save_dtype,
             "weights of the model directory a train or sft run writes at its end (final/): "
             "float32 as trained, or bf16 (half the size, each weight rounded); checkpoints keep "
             "full precision either way");
  s.add("runtime.eval_before", &runtime.eval_before, "train: evaluate the starting model");
  s.add("runtime.eval_after", &runtime.eval_after, "train: evaluate the final model");
  s.add("runtime.progress_timeout_s", &runtime.progress_timeout_s,
        "watchdog: a run in which no optimizer step completes for this long fails, naming what "
        "each role waits on; 0 = off",
        non_negative());
  s.add_choice("runtime.log_level", &runtime.log_level, {"trace", "debug", "info", "warn", "error"},
               "log verbosity");
  s.add("runtime.tensorboard", &runtime.tensorboard,
        "train: also write TensorBoard event files in <run_dir>/tensorboard/ (every metrics.jsonl "
        "number, the config as text, histograms of each step's rewards and response lengths)");
}

void bind_checkpoint(config_schema& s, checkpoint_section& c) {
  s.add("checkpoint.every_steps", &c.every_steps,
        "train: a checkpoint every n optimizer steps (sync/periodic: at the first weight sync "
        "at or after it); 0 = only at a signal or a failure",
        non_negative_int());
  s.add("checkpoint.keep", &c.keep, "the newest n checkpoints are kept", positive_int());
  s.add("checkpoint.dir", &c.dir, "checkpoint directory; empty = <run_dir>/checkpoints");
}

void bind_supervision(config_schema& s, supervision_section& sv) {
  s.add("supervision.max_restarts", &sv.max_restarts,
        "restarts of crashed rollouters and reward workers allowed within "
        "supervision.restart_window_s; one more fails the run",
        non_negative_int());
  s.add("supervision.restart_window_s", &sv.restart_window_s,
        "the window of supervision.max_restarts", positive());
  s.add_enum("supervision.trainer_failure", &sv.trainer_failure,
             "a crashed trainer: fail (resumable from the last checkpoint) or restart in-process "
             "from the last checkpoint");
}

void bind_faults(config_schema& s, faults_section& f) {
  auto every = [&](const char* key, int64_t* v, const char* what) {
    s.add(key, v, std::string("fault injection: ") + what + "; 0 = off", non_negative_int());
  };
  every("faults.kill_rollouter_every_steps", &f.kill_rollouter_every_steps,
        "after every n-th optimizer step a rollouter dies (round robin)");
  every("faults.kill_reward_worker_every", &f.kill_reward_worker_every,
        "the reward worker scoring every n-th response (by uid) dies");
  every("faults.reward_throw_every", &f.reward_throw_every,
        "every n-th response's scoring throws (scored 0, counted)");
  every("faults.reward_hang_every", &f.reward_hang_every,
        "every n-th response's scoring never answers (reward.timeout_ms scores it 0)");
  every("faults.sync_delay_every", &f.sync_delay_every,
        "every n-th weight sync's load is delayed by faults.sync_delay_ms");
  every("faults.sync_delay_ms", &f.sync_delay_ms, "the delay of faults.sync_delay_every");
  every("faults.sync_drop_every", &f.sync_drop_every,
        "every n-th weight sync loses its load message to rollouter 0 (the sync's deadline "
        "fires and it is retried)");
  every("faults.slow_rollouter_ms", &f.slow_rollouter_ms,
        "rollouter 0 waits this long before each decode chunk");
  every("faults.crash_trainer_at_step", &f.crash_trainer_at_step,
        "the trainer throws right after this optimizer step (once per run)");
  every("faults.corrupt_checkpoint_at_step", &f.corrupt_checkpoint_at_step,
        "the checkpoint written after this step is damaged on disk");
  every("faults.kill_trainer_rank_at_step", &f.kill_trainer_rank_at_step,
        "the last data-parallel trainer rank kills itself (SIGKILL) when this step starts "
        "(fresh runs only)");
  every("faults.corrupt_link_every", &f.corrupt_link_every,
        "cluster.weights_transport=collective: every n-th version sent over each weights link "
        "(the join's first) arrives with one byte flipped (its SHA-256, sent by CAF, is the true "
        "one): the worker must refuse it, and is dropped");
  every("faults.env_fault_every", &f.env_fault_every,
        "every n-th call to each rollouter's environment pool fails its first attempt, in turn "
        "a hang (answered env.timeout_ms late), a crash, a garbage answer (each replayed, up to "
        "env.max_retries times) and a flood (an observation 4x over env.max_observation_tokens, "
        "cut)");
}

void bind_cluster(config_schema& s, cluster_section& c) {
  s.add("cluster.listen", &c.listen,
        "train: host:port where workers join (port 0 = any free port, written to "
        "<run_dir>/cluster.json); off = no listener",
        [](const std::string& v) { return v == "off" ? std::string() : check_host_port(v); });
  s.add("cluster.allow_insecure", &c.allow_insecure,
        "allow plain TCP on an address other than loopback (anyone who can reach the port can "
        "join the run and read the weights)");
  s.add("cluster.tls.certificate", &c.tls.certificate,
        "this node's certificate chain (PEM); with cluster.tls.key and cluster.tls.ca turns on "
        "TLS with mutual authentication");
  s.add("cluster.tls.key", &c.tls.key, "this node's private key (PEM)");
  s.add("cluster.tls.ca", &c.tls.ca, "the CA every peer's certificate must be signed by (PEM)");
  s.add("cluster.chunk_bytes", &c.chunk_bytes,
        "weights cross the network in chunks of this many bytes", int_at_least(1024));
  s.add("cluster.request_timeout_ms", &c.request_timeout_ms,
        "bound of every request to a remote node (join, weight chunk, load); a node that misses "
        "it is dropped and its work regenerated",
        positive_int());
  s.add_enum("cluster.weights_transport", &c.weights,
             "how weight versions reach worker processes: caf = checksummed chunks over the "
             "controller's connection; collective = a c10d (Gloo) broadcast over a link of two "
             "processes per worker, in buckets of cluster.chunk_bytes, its SHA-256 still checked "
             "(a worker that cannot join its link gets CAF chunks, and the logs say so)");
  s.add("cluster.weights_listen", &c.weights_listen,
        "collective: the host (of this machine) where each worker's link listens; empty = the "
        "host of cluster.listen",
        [](const std::string& v) {
          // One colon is host:port (IPv6 addresses have several).
          return std::count(v.begin(), v.end(), ':') == 1
                     ? std::string("a host, without a port (each link picks a free port)")
                     : std::string();
        });
}

}  // namespace

std::string weights_link_host(const cluster_section& c) {
  if (!c.weights_listen.empty()) return c.weights_listen;
  if (c.listen == "off") return "";
  return split_host_port(c.listen).first;
}

void run_config::bind(config_schema& s) {
  bind_model(s, model);
  bind_data(s, data);
  bind_sft(s, sft);
  bind_rollout(s, rollout);
  bind_reward(s, reward);
  bind_env(s, env);
  bind_async_training(s, async_training);
  bind_workload(s, workload);
  bind_simulate(s, simulate);
  bind_eval(s, eval);
  bind_algorithm(s, algorithm);
  bind_trainer(s, trainer);
  bind_runtime(s, runtime);
  bind_checkpoint(s, checkpoint);
  bind_supervision(s, supervision);
  bind_faults(s, faults);
  bind_cluster(s, cluster);
}

namespace {

// Checks that involve more than one key; reported against the later-set key's origin.
void cross_check(const loaded_config& lc) {
  auto& c = lc.cfg;
  auto& s = lc.schema;
  auto fail = [&](const std::string& key, const std::string& what) {
    throw config_error(s.origin(key).where + ": key '" + key + "': " + what);
  };
  if (c.data.arith_tools.terms_min > c.data.arith_tools.terms_max)
    fail("data.arith_tools.terms_max", "must be >= data.arith_tools.terms_min (" +
                                           std::to_string(c.data.arith_tools.terms_min) + ")");
  if (c.data.arith.min_digits > c.data.arith.max_digits)
    fail("data.arith.max_digits",
         "must be >= data.arith.min_digits (" + std::to_string(c.data.arith.min_digits) + ")");
  if (!c.model.tokenizer.empty() && !c.model.path.empty())
    fail("model.tokenizer",
         "must be empty when model.path is set: the model directory's own "
         "tokenizer is used");
  if (c.model.init.num_attention_heads % c.model.init.num_key_value_heads != 0)
    fail("model.init.num_key_value_heads", "must divide model.init.num_attention_heads");
  if (c.model.init.hidden_size % c.model.init.num_attention_heads != 0)
    fail("model.init.num_attention_heads", "must divide model.init.hidden_size");
  if ((c.model.init.hidden_size / c.model.init.num_attention_heads) % 2 != 0)
    fail("model.init.num_attention_heads", "head_dim must be even for rotary embeddings");
  if (c.algorithm.refill && !c.algorithm.filter_groups)
    fail("algorithm.refill",
         "needs algorithm.filter_groups=true (only filtered groups are refilled)");
  const auto& at = c.async_training;
  if (at.partial_rollout && at.staleness_threshold <= 0)
    fail("async_training.partial_rollout",
         "needs async_training.staleness_threshold > 0 (verl: partial rollout only takes effect "
         "with stale samples)");
  if (at.mode != async_mode::fully_async && (at.staleness_threshold > 0 || at.partial_rollout))
    fail(s.origin("async_training.staleness_threshold").where == "default"
             ? "async_training.partial_rollout"
             : "async_training.staleness_threshold",
         "only applies to async_training.mode=fully_async (sync and periodic are on-policy)");
  const int64_t mini =
      c.trainer.ppo_mini_batch_size > 0 ? c.trainer.ppo_mini_batch_size : c.data.train_batch_size;
  if (at.mode != async_mode::fully_async && c.data.train_batch_size % mini != 0)
    fail("trainer.ppo_mini_batch_size",
         "must divide data.train_batch_size (" + std::to_string(c.data.train_batch_size) + ")");
  // Within one sync window the j-th optimizer step trains on groups generated j steps ago; a
  // bound eta below the window's last step drops (or regenerates, just as stale) every group of
  // that step, forever.
  const int64_t window_steps = at.require_batches * at.trigger_parameter_sync_step;
  if (at.mode == async_mode::fully_async && at.max_staleness >= 0 &&
      at.max_staleness < window_steps - 1)
    fail("async_training.max_staleness",
         "must be >= async_training.require_batches * trigger_parameter_sync_step - 1 (" +
             std::to_string(window_steps - 1) +
             "): the last step of a sync window trains on groups that many versions old, so a "
             "smaller eta drops every one of them and the run cannot progress");
  // The trainer waits for a whole batch (sync) or a whole local update (require_batches > 1):
  // a queue that cannot hold it never fills.
  const int64_t whole = at.mode == async_mode::sync ? c.data.train_batch_size
                        : at.mode == async_mode::fully_async && at.require_batches > 1
                            ? at.require_batches * mini
                            : 1;
  if (at.queue_capacity > 0 && at.queue_capacity < whole)
    fail("async_training.queue_capacity",
         "must be 0 (automatic) or >= " + std::to_string(whole) +
             (at.mode == async_mode::sync
                  ? " (data.train_batch_size: sync trains on whole batches)"
                  : " (require_batches * ppo_mini_batch_size: one local update)"));
  if (c.reward.function == reward_function::prefix && c.reward.prefix.empty())
    fail("reward.prefix", "must not be empty with reward.function=prefix");
  if (c.reward.function == reward_function::external) {
    const auto& ex = c.reward.external;
    if (ex.command.empty() && ex.socket.empty())
      fail("reward.function",
           "external needs reward.external.command (a scorer process) or reward.external.socket "
           "(a scorer server)");
    if (!ex.command.empty() && !ex.socket.empty())
      fail("reward.external.socket", "must be empty when reward.external.command is set: give one");
  }
  if (c.rollout.max_turns > 1 && c.env.kind == env_kind::none)
    fail("rollout.max_turns",
         "is " + std::to_string(c.rollout.max_turns) +
             ": more than one turn needs an environment to answer the model (env.kind)");
  if (c.env.kind != env_kind::none && c.rollout.max_turns < 2)
    fail("env.kind", "needs rollout.max_turns >= 2: the model could never see an answer");
  if (c.env.kind == env_kind::external) {
    if (c.env.command.empty() && c.env.socket.empty())
      fail("env.kind",
           "external needs env.command (an environment process) or env.socket (a server)");
    if (!c.env.command.empty() && !c.env.socket.empty())
      fail("env.socket", "must be empty when env.command is set: give one");
  }
  if (c.rollout.max_episode_tokens > 0 && c.rollout.max_episode_tokens < c.rollout.max_new_tokens)
    fail("rollout.max_episode_tokens", "must be 0 or >= rollout.max_new_tokens (" +
                                           std::to_string(c.rollout.max_new_tokens) +
                                           "): one model turn must fit in an episode");
  const auto& tls = c.cluster.tls;
  const int tls_keys = !tls.certificate.empty() + !tls.key.empty() + !tls.ca.empty();
  if (tls_keys != 0 && tls_keys != 3)
    fail(tls.certificate.empty() ? "cluster.tls.certificate"
         : tls.key.empty()       ? "cluster.tls.key"
                                 : "cluster.tls.ca",
         "must be set: TLS needs cluster.tls.certificate, cluster.tls.key and cluster.tls.ca "
         "together (scripts/make-certs.sh makes a test set)");
  const auto& tr = c.trainer;
  const int64_t ranks = data_parallel_ranks(tr);
  if (tr.data_parallel > 0 && !tr.devices.empty() &&
      tr.data_parallel != static_cast<int64_t>(tr.devices.size()))
    fail("trainer.data_parallel", "is " + std::to_string(tr.data_parallel) +
                                      " but trainer.devices names " +
                                      std::to_string(tr.devices.size()) +
                                      " devices: one rank per device (or leave one of them unset)");
  if (tr.remote_ranks >= ranks && tr.remote_ranks > 0)
    fail("trainer.remote_ranks",
         "must be below the data-parallel ranks (" + std::to_string(ranks) + "): rank 0 runs here");
  if (tr.remote_ranks > 0 && c.cluster.listen == "off")
    fail("trainer.remote_ranks",
         "remote ranks join through the cluster listener (trainer-rank --connect), and "
         "cluster.listen is off");
  if (ranks > 1 && is_wildcard_host(split_host_port(tr.dist_listen).first))
    fail("trainer.dist_listen",
         "'" + tr.dist_listen +
             "' names no address: the other ranks connect to it; give this machine's address "
             "on the network they share");
  if (c.faults.kill_trainer_rank_at_step > 0 && ranks < 2)
    fail("faults.kill_trainer_rank_at_step", "needs trainer.data_parallel >= 2");
  if (ranks > 1 && !is_loopback_host(split_host_port(tr.dist_listen).first) &&
      !c.cluster.allow_insecure)
    fail("trainer.dist_listen",
         "'" + tr.dist_listen +
             "' is not a loopback address: c10d's traffic is not encrypted; set "
             "cluster.allow_insecure=true on a network you trust (docs/scaling.md)");
  if (c.cluster.weights == weights_transport::collective && !c.cluster.allow_insecure &&
      !weights_link_host(c.cluster).empty() && !is_loopback_host(weights_link_host(c.cluster)))
    fail("cluster.weights_transport",
         "collective sends the weights unencrypted (Gloo over TCP) and listens on '" +
             weights_link_host(c.cluster) +
             "', not a loopback address: set cluster.allow_insecure=true on a network you trust, "
             "or keep caf (TLS applies to it)");
  if (c.rollout.batch_invariant) {
    const bool same =
        (c.rollout.dtype == rollout_dtype::bf16 && tr.precision == train_precision::bf16) ||
        (c.rollout.dtype == rollout_dtype::float32 && tr.precision == train_precision::float32);
    if (!same)
      fail("rollout.batch_invariant",
           "needs the rollouts and the trainer in one precision (rollout.dtype=float32 with "
           "trainer.precision=float32, or bf16 with bf16): log-probs of two precisions never "
           "agree bit for bit");
    auto on_gpu = [](const std::string& d) { return d.rfind("cuda", 0) == 0; };
    bool gpu =
        on_gpu(rollout_device(c.rollout, c.runtime)) || on_gpu(trainer_device(tr, c.runtime));
    for (const auto& d : c.rollout.devices)
      gpu = gpu || on_gpu(d);
    for (const auto& d : tr.devices)
      gpu = gpu || on_gpu(d);
    if (gpu)
      fail("rollout.batch_invariant",
           "has CPU kernels only: set rollout.device and trainer.device to cpu, or turn it off");
  }
  if (c.rollout.num_workers == 0 && c.cluster.listen == "off")
    fail("rollout.num_workers",
         "0 (remote rollouters only) needs cluster.listen: workers could never join");
  if (c.cluster.listen != "off" && !tls.enabled() && !c.cluster.allow_insecure &&
      !is_loopback_host(split_host_port(c.cluster.listen).first))
    fail("cluster.listen",
         "'" + c.cluster.listen +
             "' is not a loopback address and TLS is off: set cluster.tls.certificate, "
             "cluster.tls.key and cluster.tls.ca, or cluster.allow_insecure=true");
}

// fully_async with the coupled loss: samples can be stale, and an old policy reset at every
// step makes the ratio start at 1 however stale the tokens are. As verl does, the generator's
// own log-probs become the behaviour policy; an explicit `false` is refused.
void resolve_defaults(loaded_config& lc) {
  auto& c = lc.cfg;
  // Evaluation runs the episodes training runs, unless told otherwise.
  c.eval.env = c.env;
  if (c.eval.max_turns == 0) c.eval.max_turns = c.rollout.max_turns;
  if (c.eval.max_episode_tokens == 0)
    c.eval.max_episode_tokens =
        c.rollout.max_episode_tokens > 0 ? c.rollout.max_episode_tokens : c.eval.max_new_tokens;
  if (c.async_training.mode != async_mode::fully_async || c.algorithm.loss != loss_kind::grpo)
    return;
  const auto& origin = lc.schema.origin("algorithm.use_rollout_logprobs");
  if (origin.where != "default" && !c.algorithm.use_rollout_logprobs)
    throw config_error(
        origin.where +
        ": key 'algorithm.use_rollout_logprobs': must be true with async_training.mode="
        "fully_async and algorithm.loss=grpo (stale samples need the generator's log-probs as "
        "the behaviour policy); or use algorithm.loss=decoupled");
  c.algorithm.use_rollout_logprobs = true;
}

// Checks on what resolve_defaults settled.
void check_resolved(const loaded_config& lc) {
  const auto& c = lc.cfg;
  const auto& rc = c.algorithm.rollout_correction;
  if (rc.rs != rc_rs_level::none && rc.rs_lower() > rc.rs_threshold)
    throw config_error(lc.schema.origin("algorithm.rollout_correction.rs_threshold_lower").where +
                       ": key 'algorithm.rollout_correction.rs_threshold_lower': must be <= "
                       "algorithm.rollout_correction.rs_threshold (" +
                       std::to_string(rc.rs_threshold) + ")");
  // With the rollout's log-probs as the old policy the ratio is 1 on every token: a correction
  // would silently do nothing.
  if (rc.active() && c.algorithm.loss == loss_kind::grpo && c.algorithm.use_rollout_logprobs) {
    const char* key = rc.is != rc_is_level::none   ? "algorithm.rollout_correction.is"
                      : rc.rs != rc_rs_level::none ? "algorithm.rollout_correction.rs"
                                                   : "algorithm.rollout_correction.veto_threshold";
    throw config_error(
        lc.schema.origin(key).where + ": key '" + key +
        "': has nothing to correct with algorithm.use_rollout_logprobs=true (the old policy is "
        "the rollout's, so every ratio is 1" +
        (c.async_training.mode == async_mode::fully_async
             ? std::string(", as async_training.mode=fully_async requires for algorithm.loss=grpo")
             : std::string()) +
        "); use algorithm.loss=decoupled, or a recomputed old policy");
  }
}

}  // namespace

std::unique_ptr<loaded_config> load_config(const std::string& path,
                                           const std::vector<std::string>& overrides) {
  auto lc = std::make_unique<loaded_config>();
  lc->cfg.bind(lc->schema);
  if (!path.empty()) lc->schema.load_yaml_file(path);
  for (auto& o : overrides)
    lc->schema.apply_override(o);
  cross_check(*lc);
  resolve_defaults(*lc);
  check_resolved(*lc);
  return lc;
}

std::unique_ptr<loaded_config> load_config_text(const std::string& yaml, const std::string& name,
                                                const std::vector<std::string>& overrides) {
  auto lc = std::make_unique<loaded_config>();
  lc->cfg.bind(lc->schema);
  lc->schema.load_yaml_text(yaml, name);
  for (auto& o : overrides)
    lc->schema.apply_override(o);
  cross_check(*lc);
  resolve_defaults(*lc);
  check_resolved(*lc);
  return lc;
}

}  // namespace asyncrl
