#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace asyncrl {

/// A progress line for long work on stderr: "[sft] step 120/400 30% | loss 0.812 | tok/s 12.3k
/// | ETA 1m12s". On a terminal it redraws one line at most every `min_interval`; otherwise it
/// prints a line every `every` steps, so logs stay readable in CI.
class progress_line {
 public:
  progress_line(std::string label, int64_t total, int64_t every);
  /// Reports step `done` (1-based count of finished units) with named values.
  void update(int64_t done, const std::vector<std::pair<std::string, double>>& fields);
  /// Ends the line (on a terminal) with a final redraw.
  void finish();
  double elapsed_s() const;

 private:
  std::string render(int64_t done, const std::vector<std::pair<std::string, double>>& fields) const;
  std::string label_;
  int64_t total_, every_;
  bool tty_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  std::string last_;
};

/// "1h02m", "3m07s", "12s".
std::string format_duration(double seconds);
/// 12345 -> "12.3k", 0.00123 -> "0.00123".
std::string format_number(double v);

/// Sets up spdlog on stderr at `level` ("info", ...).
void init_logging(const std::string& level);

}  // namespace asyncrl
