#include "runtime/common/progress.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace asyncrl {

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  auto total = static_cast<int64_t>(s + 0.5);
  char buf[32];
  if (total >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", long(total / 3600), long(total / 60 % 60));
  else if (total >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", long(total / 60), long(total % 60));
  else
    std::snprintf(buf, sizeof buf, "%lds", long(total));
  return buf;
}

std::string format_number(double v) {
  char buf[32];
  double a = std::fabs(v);
  if (a >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
  else if (a >= 1e4)
    std::snprintf(buf, sizeof buf, "%.1fk", v / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

progress_line::progress_line(std::string label, int64_t total, int64_t every)
    : label_(std::move(label)),
      total_(total),
      every_(every > 0 ? every : 1),
      tty_(::isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

double progress_line::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string progress_line::render(int64_t done,
                                  const std::vector<std::pair<std::string, double>>& fields) const {
  double el = elapsed_s();
  double eta = done > 0 ? el / done * double(total_ - done) : NAN;
  char head[96];
  std::snprintf(head, sizeof head, "[%s] %ld/%ld %3.0f%%", label_.c_str(), long(done), long(total_),
                total_ > 0 ? 100.0 * done / total_ : 0.0);
  std::string line = head;
  for (auto& [k, v] : fields)
    line += " | " + k + " " + format_number(v);
  line += " | " + format_duration(el) + " elapsed, ETA " + format_duration(eta);
  return line;
}

void progress_line::update(int64_t done,
                           const std::vector<std::pair<std::string, double>>& fields) {
  auto now = std::chrono::steady_clock::now();
  if (tty_) {
    last_ = render(done, fields);
    if (now - last_draw_ < std::chrono::milliseconds(200) && done != total_) return;
    last_draw_ = now;
    std::fprintf(stderr, "\r\033[K%s", last_.c_str());
    std::fflush(stderr);
  } else if (done % every_ == 0 || done == total_ || done == 1) {
    std::fprintf(stderr, "%s\n", render(done, fields).c_str());
    std::fflush(stderr);
  }
}

void progress_line::finish() {
  if (tty_ && !last_.empty()) std::fprintf(stderr, "\r\033[K%s\n", last_.c_str());
  last_.clear();
}

void init_logging(const std::string& level) {
  auto logger = spdlog::get("asyncrl");
  if (!logger) logger = spdlog::stderr_color_mt("asyncrl");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%H:%M:%S.%e %^%l%$ %v");
  spdlog::set_level(spdlog::level::from_str(level));
}

}  // namespace asyncrl
