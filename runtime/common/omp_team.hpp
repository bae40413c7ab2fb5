#pragma once

// The CPU clocks of the OpenMP team that the calling thread leads. torch's CPU kernels (and an
// OpenMP build of OpenBLAS) run their parallel regions on this team, so a compute region that
// sums these clocks books the whole team's time (cpu_time.hpp). Compiled with OpenMP on
// (CMakeLists.txt): without it the parallel region below would quietly run on one thread, which
// is how an earlier version inside weight_sync.cpp (through at::parallel_for, an inline header
// template) booked only the calling thread.

#include <time.h>

#include <vector>

namespace asyncrl {

/// Runs one parallel region of `n` threads from the calling thread and returns the CPU clock of
/// each thread in it (the calling thread's first). libgomp keeps that team for the calling
/// thread's later regions of up to `n` threads. Empty when n <= 1.
std::vector<clockid_t> omp_team_clocks(int n);

}  // namespace asyncrl
