#include "runtime/common/stall_watch.hpp"

#include <algorithm>
#include <cmath>

namespace asyncrl {

bool stall_watch::set_timeout(double s) {
  const bool was_off = !enabled();
  timeout_s_ = s;
  return was_off;
}

std::chrono::milliseconds stall_watch::tick() const {
  return std::chrono::milliseconds(std::max<int64_t>(1, std::llround(timeout_s_ * 250)));
}

bool stall_watch::on_tick(bool paused) {
  if (last_step_ != seen_step_ || paused) {
    seen_step_ = last_step_;
    quiet_ticks_ = 0;
    return false;
  }
  return ++quiet_ticks_ >= ticks_to_stall;
}

}  // namespace asyncrl
