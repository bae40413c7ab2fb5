#pragma once

// CPU-time accounting of a run: how much of the process's CPU time (all threads) went into
// compute (generation, training, reward scoring, weight snapshots and loads) and how much is
// left for the runtime (message handling, mailboxes, scheduling, bookkeeping). Each compute
// region reads its thread's CPU clock (and those of the OpenMP team the thread leads) at its
// start and end, and adds the difference to one process-wide counter; the controller reads that
// counter and the process clock once per step (metrics.jsonl cpu_total_s, cpu_compute_s,
// overhead_cpu_share). Torch-free.

#include <time.h>

#include <cstdint>
#include <vector>

namespace asyncrl {

/// CPU time of the calling thread, ns (CLOCK_THREAD_CPUTIME_ID).
int64_t thread_cpu_ns();
/// CPU time of the whole process, every thread, ns (CLOCK_PROCESS_CPUTIME_ID).
int64_t process_cpu_ns();

/// The CPU clocks of the threads that compute for the calling thread: itself and the OpenMP
/// workers torch starts from it (set by set_torch_threads). Empty = the calling thread only.
void set_compute_team(std::vector<clockid_t> clocks);
/// CPU time of the calling thread's compute team, ns.
int64_t team_cpu_ns();

/// CPU time booked by every compute region of the process so far, ns.
int64_t compute_cpu_ns();

/// A compute region: books the CPU time of the calling thread's team between construction and
/// destruction. Two clock reads per team thread; regions on one thread must not nest.
class compute_region {
 public:
  compute_region() : start_(team_cpu_ns()) {}
  ~compute_region();
  compute_region(const compute_region&) = delete;
  compute_region& operator=(const compute_region&) = delete;

 private:
  int64_t start_;
};

/// One window of the process's CPU time.
struct cpu_window {
  double total_s = 0;         // process CPU time in the window, every thread
  double compute_s = 0;       // of it, inside compute regions
  double overhead_share = 0;  // (total - compute) / total; 0 for an empty window
};

/// The window between two readings (total and compute counters, ns). A region is booked when
/// it ends, so one that straddles the window's start counts wholly in this window: a window's
/// share can be off by one region's CPU time (even slightly negative); sums over windows are
/// exact.
cpu_window cpu_window_of(int64_t total0_ns, int64_t compute0_ns, int64_t total1_ns,
                         int64_t compute1_ns);

/// Successive windows: each next() covers the time since the previous one (or construction).
class cpu_meter {
 public:
  cpu_meter() : total_(process_cpu_ns()), compute_(compute_cpu_ns()) {}
  cpu_window next();

 private:
  int64_t total_, compute_;
};

}  // namespace asyncrl
