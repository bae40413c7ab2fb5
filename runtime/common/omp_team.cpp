#include "runtime/common/omp_team.hpp"

#include <omp.h>
#include <pthread.h>

namespace asyncrl {

std::vector<clockid_t> omp_team_clocks(int n) {
  if (n <= 1) return {};
  std::vector<clockid_t> clocks(static_cast<size_t>(n), clockid_t{-1});
  int got = 0;
#pragma omp parallel num_threads(n)
  {
    clockid_t c;
    const int i = omp_get_thread_num();
    if (pthread_getcpuclockid(pthread_self(), &c) == 0) clocks[static_cast<size_t>(i)] = c;
#pragma omp single
    got = omp_get_num_threads();
  }
  clocks.resize(static_cast<size_t>(got));
  std::vector<clockid_t> out;
  for (auto c : clocks)
    if (c != clockid_t{-1}) out.push_back(c);
  return out;
}

}  // namespace asyncrl
