#pragma once

// metrics.jsonl, the controller's part that writes it: one line per optimizer step, the
// run-wide deltas between two lines (tokens generated, rollouter idle time, stale drops, CPU
// time), and the last lines kept for the console's `metrics N`.

#include <cstdint>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "messages/payloads.hpp"
#include "runtime/common/cpu_time.hpp"
#include "runtime/report/tb_event_writer.hpp"

namespace asyncrl {

/// One metrics.jsonl line: the trainer's report plus the run-wide fields, and the process's CPU
/// time over the step's window (cpu_total_s, cpu_compute_s, overhead_cpu_share: the runtime's
/// share, measured directly; rollouters in worker processes are not in it).
std::string metrics_line(const step_report& r, double wall_time_s, int64_t tokens_generated,
                         double rollouter_idle_ratio, int64_t dropped_groups, int64_t workers,
                         const cpu_window& cpu = {});

/// Keeps the lines of steps <= last_step (a resumed run appends from the next step, so the
/// file has no gap and no duplicate); rewritten atomically. A missing file is left missing.
void trim_metrics(const std::string& path, int64_t last_step);

class metrics_log {
 public:
  static constexpr size_t kRecent = 10000;  // lines kept for the console

  /// Opens <run_dir>/metrics.jsonl: appended to when `append` (a resume), else truncated. An
  /// empty run_dir writes no file (the lines are still kept for the console).
  void open(const std::string& run_dir, bool append);

  /// runtime.tensorboard: from now on each line's numbers and the step's reward and response
  /// length histograms also go to a new TensorBoard events file in <run_dir>/tensorboard/,
  /// which starts with `config_yaml` as text. `resumed_step`: the checkpoint's step when the
  /// run resumes from one, else -1. A file that cannot be created is logged, not fatal.
  void open_tensorboard(const std::string& run_dir, const std::string& config_yaml,
                        int64_t resumed_step);

  /// A resume: the deltas continue from the checkpoint's totals.
  void continue_from(int64_t tokens_generated, double wall_time_s);

  /// Formats, writes and keeps the line of `r`. `wall_time_s` and `tokens_generated` are the
  /// run's totals now; `busy_ms` each live rollouter's decode time so far (its worker id ->
  /// ms); `workers` the rollouters in the run.
  std::string write(const step_report& r, double wall_time_s, int64_t tokens_generated,
                    const std::map<int32_t, double>& busy_ms, int64_t workers);

  /// A rollouter that died: a new incarnation's busy time starts from 0 again.
  void forget_worker(int32_t worker) { prev_busy_.erase(worker); }

  /// The last `n` lines, oldest first.
  std::vector<std::string> recent(int64_t n) const;

 private:
  double prev_wall_ = 0;
  int64_t prev_tokens_ = 0;
  int64_t prev_dropped_ = 0;
  std::map<int32_t, double> prev_busy_;
  cpu_meter cpu_;
  std::unique_ptr<std::ofstream> file_;
  std::unique_ptr<tb_event_writer> tb_;  // runtime.tensorboard; null when off
  std::deque<std::string> recent_;
};

}  // namespace asyncrl
