#pragma once

// The simulator's event queue: events in time order, FIFO among equal times, so a run is
// deterministic.

#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

namespace asyncrl {

enum class sim_event_kind { device_step, group_queued, train_done, sync_loaded };

struct sim_event {
  double t;
  uint64_t order;  // FIFO among equal times: deterministic
  sim_event_kind type;
  int64_t a;  // the device, the group or the version, by type
  bool operator>(const sim_event& o) const { return t != o.t ? t > o.t : order > o.order; }
};

/// Pending events, earliest first.
class sim_event_queue {
 public:
  /// Schedules an event of `type` with argument `a` at time `t`.
  void push(double t, sim_event_kind type, int64_t a) { events_.push({t, order_++, type, a}); }
  bool empty() const { return events_.empty(); }
  /// Removes and returns the earliest event.
  sim_event pop() {
    auto e = events_.top();
    events_.pop();
    return e;
  }

 private:
  std::priority_queue<sim_event, std::vector<sim_event>, std::greater<sim_event>> events_;
  uint64_t order_ = 0;
};

}  // namespace asyncrl
