#pragma once

// Every JSON the `asyncrl` app writes, in one place: the line each command prints on stdout and
// the run summaries (summary.json, sft_summary.json). Keys, their order and the number types
// here are the documented output formats; scripts and bench/ parse them. Torch-free header.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace asyncrl {

class tokenizer;
struct eval_result;
struct gen_result;
struct run_result;
struct sft_report;
struct sim_params;
struct sim_result;
struct task_data;

/// summary.json's fields that come from the actor run.
nlohmann::ordered_json summarize(const run_result& r);

/// What `asyncrl train` reports around the actor run's fields.
struct train_outcome {
  std::optional<double> initial_eval_accuracy;  // runtime.eval_before
  double tpspd = 0.0;  // trained tokens per second per device (rollouters + trainer)
  std::optional<std::string> params_sha256;   // these two when the run ended with weights
  std::optional<std::string> final_model;     // <run_dir>/final
  std::optional<double> final_eval_accuracy;  // runtime.eval_after
  int64_t trainer_restarts = 0;               // supervision.trainer_failure=restart
};

/// summary.json of `asyncrl train`; its stdout is the same object on one line.
nlohmann::ordered_json train_summary(const run_result& r, const train_outcome& o);

/// sft_summary.json of `asyncrl sft`.
nlohmann::ordered_json sft_summary(const sft_report& r);

/// The stdout line of `asyncrl sft`.
nlohmann::ordered_json sft_line(const sft_report& r);

/// The stdout line of `asyncrl simulate`; with per_step, every simulated step too.
nlohmann::ordered_json simulate_line(const sim_params& p, const sim_result& r, bool per_step);

/// The stdout line of `asyncrl data`: where the splits were written and how many examples.
nlohmann::ordered_json data_line(const task_data& d, const std::string& out_dir);

/// The stdout line of `asyncrl eval`; mean@N, samples and temperature only when samples > 1.
nlohmann::ordered_json eval_line(const std::string& model_dir, const std::string& data_path,
                                 const eval_result& r, int64_t samples, double temperature);

/// One stdout line of `asyncrl generate`: a response, its final answer and summed log-prob.
nlohmann::ordered_json sample_line(const gen_result& res, const tokenizer& tok);

/// One stdout line of `asyncrl score`: log p(token i | tokens < i) for i = 1 .. n-1.
nlohmann::ordered_json score_line(const std::vector<double>& logprobs);

/// Prints `j` on one line of stdout and flushes.
void print_line(const nlohmann::ordered_json& j);

/// Writes `j` indented by 2, with a final newline: how run summaries are stored. Atomic (a
/// full disk leaves the old file, never a truncated one); throws std::runtime_error naming the
/// file and the reason.
void write_summary(const std::string& path, const nlohmann::ordered_json& j);

}  // namespace asyncrl
