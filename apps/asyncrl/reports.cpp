#include "apps/asyncrl/reports.hpp"

#include "runtime/common/atomic_file.hpp"

#include <iostream>

#include "apps/asyncrl/sft_command.hpp"
#include "messages/run_result.hpp"
#include "runtime/generation/generator.hpp"
#include "runtime/scheduling/simulator.hpp"
#include "runtime/task/evaluate.hpp"
#include "runtime/task/reward.hpp"
#include "runtime/task/task_data.hpp"
#include "runtime/text/tokenizer.hpp"

namespace asyncrl {

nlohmann::ordered_json summarize(const run_result& r) {
  nlohmann::ordered_json rollouters = nlohmann::json::array();
  for (auto& c : r.rollouters)
    rollouters.push_back({{"worker", c.worker},
                          {"groups_completed", c.groups_completed},
                          {"groups_unfinished", c.groups_unfinished},
                          {"tokens_generated", c.tokens_generated},
                          {"interruptions", c.interruptions},
                          {"env_calls", c.env_calls},
                          {"env_tokens", c.env_tokens},
                          {"observations_cut", c.observations_cut},
                          {"env_retries", c.env_retries},
                          {"env_failures", c.env_failures}});
  // `ok`: the run ended as asked, without an error, exactly when the exit code is 0. The
  // console's stop is asked for (exit 0, resumable): ok, and its message is not an error (it is
  // on stderr; the checkpoint and its step are below). An interrupt (exit 130) is not ok.
  const bool stopped = r.status == run_status::stopped;
  return {{"ok", r.ok || stopped},
          {"status", to_string(r.status)},
          {"error", stopped ? std::string() : r.error},
          {"steps", r.steps},
          {"resumed_from_step", r.resumed_from_step},
          {"checkpoints_written", r.checkpoints},
          {"checkpoint", r.checkpoint},
          {"checkpoint_step", r.checkpoint_step},  // the step it continues from (0: none)
          {"rollouter_restarts", r.rollouter_restarts},
          {"remote_rollouters_joined", r.remote_rollouters_joined},
          {"remote_rollouters_lost", r.remote_rollouters_lost},
          {"sync_retries", r.sync_retries},
          {"groups_generated", r.groups_generated},
          {"groups_trained", r.groups_trained},
          {"groups_dropped", r.groups_dropped},
          {"groups_in_flight", r.groups_in_flight},
          {"groups_filtered", r.groups_filtered},
          {"tokens_generated", r.tokens_generated},
          {"tokens_trained", r.tokens_trained},
          {"syncs", r.syncs},
          {"wall_time_s", r.wall_time_s},
          {"train_time_s", r.train_time_s},  // the first prompt to the last step
          {"rollouters", rollouters},
          {"reward",
           {{"received", r.reward.received},
            {"forwarded", r.reward.forwarded},
            {"in_progress", r.reward.in_progress},
            {"failures", r.reward.failures},
            {"timeouts", r.reward.timeouts},
            {"worker_restarts", r.reward.worker_restarts},
            {"fenced", r.reward.fenced},
            // reward.function=external: how its calls failed (each scored 0, also counted
            // above), and how often a scorer was started again.
            {"scorer",
             {{"timeouts", r.reward.scorer_timeouts},
              {"crashes", r.reward.scorer_crashes},
              {"malformed", r.reward.scorer_malformed},
              {"unavailable", r.reward.scorer_unavailable},
              {"restarts", r.reward.scorer_restarts},
              {"start_failures", r.reward.scorer_start_failures}}}}},
          {"queue",
           {{"received", r.queue.received},
            {"delivered", r.queue.delivered},
            {"depth", r.queue.depth},
            {"dropped_stale", r.queue.dropped_stale},
            {"regenerated", r.queue.regenerated},
            {"abandoned", r.queue.abandoned},
            {"lost", r.queue.lost},
            {"restored", r.queue.restored},
            {"max_delivered_staleness", r.queue.max_delivered_staleness},
            // The length bias of staleness drops: mean response length of what was generated
            // (received) against what was dropped; stale_waits: stale_policy wait's holds.
            {"received_tokens", r.queue.received_tokens},
            {"dropped_tokens", r.queue.dropped_tokens},
            {"stale_waits", r.queue.stale_waits}}},
          {"trainer",
           {{"deliveries", r.trainer.deliveries},
            {"received", r.trainer.received},
            {"trained", r.trainer.trained},
            {"filtered", r.trainer.filtered},
            {"held", r.trainer.held},
            {"steps", r.trainer.steps},
            {"skipped_steps", r.trainer.skipped_steps},
            {"version", r.trainer.version}}},
          // Injected (faults.*, the console), counted where each fired; asyncrl chaos reads
          // them. checkpoints_skipped: damaged ones passed over when resuming.
          {"faults",
           {{"rollouter_kills", r.faults.rollouter_kills},
            {"reward_worker_kills", r.faults.reward_worker_kills},
            {"reward_throws", r.faults.reward_throws},
            {"reward_hangs", r.faults.reward_hangs},
            {"sync_drops", r.faults.sync_drops},
            {"sync_delays", r.faults.sync_delays},
            {"trainer_crashes", r.faults.trainer_crashes},
            {"checkpoints_damaged", r.faults.checkpoints_damaged},
            {"checkpoints_skipped", r.faults.checkpoints_skipped},
            {"trainer_rank_kills", r.faults.trainer_rank_kills},
            {"env_faults", r.faults.env_faults},
            {"env_faults_recovered", r.faults.env_faults_recovered}}}};
}

nlohmann::ordered_json train_summary(const run_result& r, const train_outcome& o) {
  nlohmann::ordered_json summary;
  if (o.initial_eval_accuracy) summary["initial_eval_accuracy"] = *o.initial_eval_accuracy;
  auto out = summarize(r);
  for (auto& [k, v] : out.items())
    summary[k] = v;
  summary["tpspd"] = o.tpspd;
  summary["trainer_restarts"] = o.trainer_restarts;
  if (o.params_sha256) summary["params_sha256"] = *o.params_sha256;
  if (o.final_model) summary["final_model"] = *o.final_model;
  if (o.final_eval_accuracy) summary["final_eval_accuracy"] = *o.final_eval_accuracy;
  return summary;
}

nlohmann::ordered_json sft_summary(const sft_report& r) {
  return {{"steps", r.steps},
          {"skipped_steps", r.skipped_steps},
          {"first_loss", r.first_loss},
          {"final_loss", r.final_loss},
          {"tokens_per_s", r.tokens_per_s},
          {"wall_time_s", r.seconds},
          {"parameters", r.parameters},
          {"model_dir", r.model_dir},
          {"eval_accuracy", r.eval.pass1},
          {"val_accuracy", r.val_accuracy},
          {"eval_questions", r.eval.questions}};
}

nlohmann::ordered_json sft_line(const sft_report& r) {
  return {{"model_dir", r.model_dir},           {"steps", r.steps},
          {"final_loss", r.final_loss},         {"eval_accuracy", r.eval.pass1},
          {"eval_questions", r.eval.questions}, {"wall_time_s", r.seconds}};
}

nlohmann::ordered_json simulate_line(const sim_params& p, const sim_result& r, bool per_step) {
  nlohmann::ordered_json j{{"mode", to_string(p.plan.mode)},
                           {"rollout_devices", p.rollout_devices},
                           {"train_devices", p.train_devices},
                           {"colocated", p.colocated},
                           {"steps", r.steps.size()},
                           {"mean_step_s", r.mean_step_ms / 1000.0},
                           {"total_s", r.total_ms / 1000.0},
                           {"trainer_idle_ratio", r.trainer_idle_ratio},
                           {"rollout_idle_ratio", r.rollout_idle_ratio},
                           {"tokens_trained_per_s", r.tokens_per_s},
                           {"groups_generated", r.groups_generated},
                           {"groups_dropped", r.groups_dropped},
                           {"len_generated", r.len_generated},
                           {"len_trained", r.len_trained},
                           {"stale_waits", r.stale_waits},
                           {"syncs", r.syncs},
                           {"interruptions", r.interruptions}};
  if (per_step) {
    // A plain (key-sorted) json array: each step's keys print in alphabetical order.
    auto steps = nlohmann::json::array();
    for (auto& s : r.steps)
      steps.push_back({{"step", s.step},
                       {"end_s", s.end_ms / 1000.0},
                       {"step_s", s.step_ms / 1000.0},
                       {"trainer_idle_s", s.trainer_idle_ms / 1000.0},
                       {"tokens", s.tokens},
                       {"stale_samples", s.stale_samples},
                       {"staleness_max", s.staleness_max},
                       {"partial_samples", s.partial_samples},
                       {"max_partial_span", s.max_partial_span}});
    j["per_step"] = steps;
  }
  return j;
}

nlohmann::ordered_json data_line(const task_data& d, const std::string& out_dir) {
  return {{"train", out_dir + "/train.jsonl"},
          {"train_examples", d.train.size()},
          {"test", out_dir + "/test.jsonl"},
          {"test_examples", d.test.size()},
          {"source", d.train_source}};
}

nlohmann::ordered_json eval_line(const std::string& model_dir, const std::string& data_path,
                                 const eval_result& r, int64_t samples, double temperature) {
  nlohmann::ordered_json j{
      {"model", model_dir}, {"data", data_path}, {"questions", r.questions}, {"pass@1", r.pass1}};
  if (samples > 1) {
    j["mean@" + std::to_string(samples)] = r.mean_at_n;
    j["samples"] = samples;
    j["temperature"] = temperature;
  }
  j["mean_response_tokens"] = r.mean_response_tokens;
  if (r.env_calls > 0) {
    j["env_calls"] = r.env_calls;
    j["env_failures"] = r.env_failures;
  }
  j["seconds"] = r.seconds;
  return j;
}

nlohmann::ordered_json sample_line(const gen_result& res, const tokenizer& tok) {
  double lp = 0;
  for (auto v : res.request.logprobs)
    lp += v;
  auto text = tok.decode(res.request.tokens);
  return {{"sample", res.request.sample_index},
          {"text", text},
          {"final_answer", extract_final_answer(text).value_or("")},
          {"tokens", res.request.tokens.size()},
          {"token_ids", res.request.tokens},  // to compare with another runtime's ids
          {"finish", to_string(res.reason)},
          {"logprob", lp}};
}

nlohmann::ordered_json score_line(const std::vector<double>& logprobs) {
  nlohmann::ordered_json out{{"logprobs", nlohmann::ordered_json::array()}};
  for (auto v : logprobs)
    out["logprobs"].push_back(v);
  return out;
}

void print_line(const nlohmann::ordered_json& j) {
  std::cout << j.dump() << std::endl;
}

void write_summary(const std::string& path, const nlohmann::ordered_json& j) {
  write_file_atomically(path, j.dump(2) + "\n");
}

}  // namespace asyncrl
