#include "runtime/scheduling/admission.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace asyncrl {

admission_control::admission_control(admission_params p) {
  set_params(p);
}

void admission_control::set_params(admission_params p) {
  if (p.window <= 0 || p.consumer_batch <= 0 || p.capacity <= 0)
    throw std::invalid_argument("admission: window, consumer batch and capacity must be > 0");
  if (p.staleness_threshold < 0) throw std::invalid_argument("admission: s must be >= 0");
  p_ = p;
}

int64_t admission_control::window_budget() const {
  auto full = static_cast<int64_t>(std::floor((1.0 + p_.staleness_threshold) * p_.window + 1e-9));
  return std::max<int64_t>(0, full - carried_);
}

int64_t admission_control::grant(int64_t want) {
  last_limit_.clear();
  int64_t n = std::max<int64_t>(0, want);
  auto limit = [&](int64_t cap, const char* why) {
    cap = std::max<int64_t>(0, cap);
    if (cap < n) {
      n = cap;
      last_limit_ = why;
    }
  };
  limit(window_budget() - window_admitted_ + owed_, "window");
  if (p_.max_staleness >= 0)
    limit((p_.max_staleness + trainer_version_ + 1) * p_.consumer_batch - (accepted_ + running_),
          "eta");
  limit(p_.capacity - (running_ + queued_), "capacity");
  running_ += n;
  // Refills owed go first: they are admitted beyond the window's budget.
  const auto o = std::min(n, owed_);
  owed_ -= o;
  window_admitted_ += n - o;
  return n;
}

void admission_control::on_put() {
  if (running_ <= 0) throw std::logic_error("admission: put without a running group");
  --running_;
  ++queued_;
  ++accepted_;
}

void admission_control::on_abandoned() {
  if (running_ <= 0) throw std::logic_error("admission: abandon without a running group");
  --running_;
}

void admission_control::on_lost() {
  on_abandoned();
  if (window_admitted_ > 0)
    --window_admitted_;
  else if (carried_ > 0)
    --carried_;
}

void admission_control::restore(int64_t accepted, int64_t queued) {
  if (queued < 0 || accepted < queued)
    throw std::invalid_argument("admission: restore needs 0 <= queued <= accepted");
  queued_ = queued;
  accepted_ = accepted;
  running_ = 0;
  on_sync();
}

void admission_control::on_delivered() {
  if (queued_ <= 0) throw std::logic_error("admission: delivery from an empty queue");
  --queued_;
}

void admission_control::on_dropped() {
  on_delivered();
  // A dropped group will never be trained, so it must not keep using AReaL's capacity
  // (eta + v + 1) * B: with enough drops the queue would admit nothing and the run would hang.
  --accepted_;
}

void admission_control::on_filtered(int64_t consumed, int64_t replace) {
  if (consumed < 0 || replace < 0 || replace > consumed)
    throw std::invalid_argument("admission: on_filtered needs 0 <= replace <= consumed");
  accepted_ -= consumed;
  owed_ += replace;
}

void admission_control::on_trainer_version(int64_t v) {
  trainer_version_ = std::max(trainer_version_, v);
}

void admission_control::on_sync() {
  carried_ = running_ + queued_;
  window_admitted_ = 0;
}

}  // namespace asyncrl
