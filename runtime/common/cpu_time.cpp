#include "runtime/common/cpu_time.hpp"

#include <atomic>

namespace asyncrl {

namespace {

std::atomic<int64_t> booked_ns{0};
thread_local std::vector<clockid_t> team;

int64_t clock_ns(clockid_t c) {
  timespec ts{};
  if (clock_gettime(c, &ts) != 0) return 0;  // a team thread that has exited
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

int64_t thread_cpu_ns() {
  return clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

int64_t process_cpu_ns() {
  return clock_ns(CLOCK_PROCESS_CPUTIME_ID);
}

void set_compute_team(std::vector<clockid_t> clocks) {
  team = std::move(clocks);
}

int64_t team_cpu_ns() {
  if (team.empty()) return thread_cpu_ns();
  int64_t sum = 0;
  for (auto c : team)
    sum += clock_ns(c);
  return sum;
}

int64_t compute_cpu_ns() {
  return booked_ns.load(std::memory_order_relaxed);
}

compute_region::~compute_region() {
  booked_ns.fetch_add(team_cpu_ns() - start_, std::memory_order_relaxed);
}

cpu_window cpu_window_of(int64_t total0_ns, int64_t compute0_ns, int64_t total1_ns,
                         int64_t compute1_ns) {
  cpu_window w;
  const int64_t total = total1_ns - total0_ns, compute = compute1_ns - compute0_ns;
  w.total_s = static_cast<double>(total) / 1e9;
  w.compute_s = static_cast<double>(compute) / 1e9;
  w.overhead_share =
      total > 0 ? static_cast<double>(total - compute) / static_cast<double>(total) : 0.0;
  return w;
}

cpu_window cpu_meter::next() {
  const int64_t total = process_cpu_ns(), compute = compute_cpu_ns();
  auto w = cpu_window_of(total_, compute_, total, compute);
  total_ = total;
  compute_ = compute;
  return w;
}

}  // namespace asyncrl
