#include "runtime/common/restart_budget.hpp"

namespace asyncrl {

restart_budget::restart_budget(int64_t max_restarts, double window_s)
    : max_restarts_(max_restarts), window_s_(window_s) {}

bool restart_budget::spend(time_point now) {
  const auto window = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(window_s_));
  times_.push_back(now);
  while (now - times_.front() > window)  // never empties: `now` itself stays
    times_.pop_front();
  return static_cast<int64_t>(times_.size()) <= max_restarts_;
}

}  // namespace asyncrl
