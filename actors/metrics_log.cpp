#include "actors/metrics_log.hpp"

#include <spdlog/spdlog.h>
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "runtime/common/atomic_file.hpp"
#include "runtime/common/fields.hpp"

namespace asyncrl {

namespace {
// The scalars of a metrics.jsonl line for TensorBoard: every number (a boolean as 0/1) under
// its key, a nested object's as "key/inner"; "step" is the x axis, not a scalar, and null (not
// measured, or not finite) is left out.
void flatten(const nlohmann::json& j, const std::string& prefix,
             std::vector<std::pair<std::string, double>>& out) {
  for (auto& [k, v] : j.items()) {
    const auto tag = prefix.empty() ? k : prefix + "/" + k;
    if (v.is_object())
      flatten(v, tag, out);
    else if (v.is_boolean())
      out.emplace_back(tag, v.get<bool>() ? 1.0 : 0.0);
    else if (v.is_number() && !(prefix.empty() && k == "step"))
      out.emplace_back(tag, v.get<double>());
  }
}

// A duration in ms as seconds; negative (not measured) as null.
nlohmann::ordered_json ms_or_null(double ms) {
  return ms < 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(ms / 1000.0);
}
}  // namespace

std::string metrics_line(const step_report& r, double wall, int64_t tokens_generated,
                         double rollouter_idle, int64_t dropped, int64_t workers,
                         const cpu_window& cpu) {
  const double step_s = r.step_ms / 1000.0;
  const auto& u = r.update;
  nlohmann::ordered_json j{
      {"step", r.step},
      {"policy_version", r.policy_version},
      {"wall_time_s", wall},
      {"step_time_s", step_s},
      {"reward_mean", r.reward_mean},
      {"accuracy", r.accuracy},
      {"tokens_generated", tokens_generated},
      {"tpspd", step_s > 0 ? u.tokens_trained / step_s / double(workers + 1) : 0.0},
      {"trainer_idle_ratio", r.step_ms > 0 ? r.trainer_idle_ms / r.step_ms : 0.0},
      {"rollouter_idle_ratio", rollouter_idle},
      {"stale_samples", r.stale_samples},
      {"partial_ratio", r.partial_ratio},
      {"max_partial_span", r.max_partial_span},
      {"dropped_groups", dropped},
      {"filtered_groups", r.filtered_groups},
      {"groups_trained", r.groups_trained},
      {"refilled_groups", r.refilled_groups},
      {"refill_exhausted", r.refill_exhausted},
      {"reward_failures", r.reward_failures}};
  for_each_field(u, [&](const char* name, const auto& v) { j[name] = v; });
  j.update(nlohmann::ordered_json{{"sync_time_ms", r.sync_time_ms},
                                  {"sync_bytes", r.sync_bytes},
                                  {"params_checksum", r.params_checksum},
                                  {"samples", r.samples},
                                  {"queue_depth", r.queue.depth},
                                  {"admitted_in_window", r.queue.admitted_in_window},
                                  {"window_budget", r.queue.window_budget},
                                  {"published_version", r.queue.published_version},
                                  {"prox_version", r.prox_version},
                                  {"out_of_order_groups", r.out_of_order_groups},
                                  {"eval_time_s", r.eval_time_s},
                                  {"first_group_s", ms_or_null(r.first_group_ms)},
                                  {"last_group_s", ms_or_null(r.last_group_ms)},
                                  {"first_train_s", ms_or_null(r.first_train_ms)},
                                  {"cpu_total_s", cpu.total_s},
                                  {"cpu_compute_s", cpu.compute_s},
                                  {"overhead_cpu_share", cpu.overhead_share}});
  if (r.eval_accuracy >= 0) j["eval_accuracy"] = r.eval_accuracy;
  // JSON has no NaN: a non-finite value (a skipped step's grad norm) becomes null.
  for (auto& [k, v] : j.items())
    if (v.is_number_float() && !std::isfinite(v.get<double>())) v = nullptr;
  return j.dump();
}

void trim_metrics(const std::string& path, int64_t last_step) {
  std::ifstream in(path);
  if (!in) return;
  std::string kept, line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("step") && j["step"].get<int64_t>() <= last_step)
      kept += line + "\n";
  }
  in.close();
  write_file_atomically(path, kept);
}

void metrics_log::open(const std::string& run_dir, bool append) {
  if (run_dir.empty()) return;
  file_ = std::make_unique<std::ofstream>(run_dir + "/metrics.jsonl",
                                          append ? std::ios::app : std::ios::trunc);
}

void metrics_log::open_tensorboard(const std::string& run_dir, const std::string& config_yaml,
                                   int64_t resumed_step) {
  if (run_dir.empty()) return;
  try {
    // A resume starts a new file instead of appending: the last one may hold steps after the
    // checkpoint (trained, then lost with the failure), which the resumed run trains again.
    // TensorBoard reads a directory's files in name order (the name starts with the unix
    // time) as one run. Each file starts with a SessionLog START at its first step: the
    // server's reader takes the first START it sees as the start and each later one as a
    // restart, dropping every event of an earlier file at or after that step, as for
    // TensorFlow's own restarts. So the steps shown are each written once, like
    // metrics.jsonl's (trim_metrics); a fresh run in a used run_dir (step 0) hides the old
    // files' steps the way metrics.jsonl is truncated.
    tb_ = std::make_unique<tb_event_writer>(run_dir + "/tensorboard");
    const int64_t first = resumed_step >= 0 ? resumed_step + 1 : 0;
    tb_->session_start(first);
    // A Markdown code block: the text plugin renders Markdown, which would run YAML's lines
    // together.
    const bool nl = !config_yaml.empty() && config_yaml.back() == '\n';
    tb_->text(first, "config", "```yaml\n" + config_yaml + (nl ? "" : "\n") + "```");
    spdlog::info("runtime.tensorboard: writing {}", tb_->path());
  } catch (const std::exception& e) {
    spdlog::error("runtime.tensorboard: {}; the run continues without TensorBoard files", e.what());
    tb_.reset();
  }
}

void metrics_log::continue_from(int64_t tokens_generated, double wall_time_s) {
  prev_tokens_ = tokens_generated;
  prev_wall_ = wall_time_s;
}

std::string metrics_log::write(const step_report& r, double wall_time_s, int64_t tokens_generated,
                               const std::map<int32_t, double>& busy_ms, int64_t workers) {
  // The rollouters' idle share of the window since the last line: 1 - busy / (span * workers).
  double busy_delta = 0;
  for (auto& [w, ms] : busy_ms) {
    busy_delta += std::max(0.0, ms - prev_busy_[w]);
    prev_busy_[w] = ms;
  }
  const double span_ms =
      (wall_time_s - prev_wall_) * 1000.0 * double(std::max<int64_t>(1, workers));
  const double idle = span_ms > 0 ? std::clamp(1.0 - busy_delta / span_ms, 0.0, 1.0) : 0.0;
  const int64_t dropped = std::max<int64_t>(0, r.queue.dropped_stale - prev_dropped_);
  auto line = metrics_line(r, wall_time_s, tokens_generated - prev_tokens_, idle, dropped, workers,
                           cpu_.next());
  prev_wall_ = wall_time_s;
  prev_tokens_ = tokens_generated;
  prev_dropped_ = r.queue.dropped_stale;
  if (file_) *file_ << line << "\n" << std::flush;
  if (tb_) {
    try {
      std::vector<std::pair<std::string, double>> scalars;
      flatten(nlohmann::json::parse(line), "", scalars);
      tb_->scalars(r.step, scalars);
      tb_->histogram(r.step, "reward", r.rewards);
      tb_->histogram(r.step, "response_length",
                     std::vector<double>(r.response_lengths.begin(), r.response_lengths.end()));
    } catch (const std::exception& e) {  // a full disk: metrics.jsonl still has the step
      spdlog::error("runtime.tensorboard: {}; no more TensorBoard events in this run", e.what());
      tb_.reset();
    }
  }
  recent_.push_back(line);
  if (recent_.size() > kRecent) recent_.pop_front();
  return line;
}

std::vector<std::string> metrics_log::recent(int64_t n) const {
  const auto size = static_cast<int64_t>(recent_.size());
  return {recent_.begin() + std::max<int64_t>(0, size - std::max<int64_t>(0, n)), recent_.end()};
}

}  // namespace asyncrl
