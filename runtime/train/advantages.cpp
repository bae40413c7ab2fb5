#include "runtime/train/advantages.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace asyncrl {

// The same formula as rl::group_advantages (losses.hpp), in plain loops: a group is a handful
// of rewards, scored on the Reward actor's cooperative thread, where building and reducing
// (1, G) tensors cost ~100x the arithmetic and was a fifth of the runtime's own CPU time.
// tests/test_losses.cpp checks the two agree.
bool assign_advantages(scored_group& g, advantage_estimator estimator, bool filter_zero_variance) {
  const size_t n = g.samples.size();
  if (n == 0) throw std::invalid_argument("group " + std::to_string(g.group_id) + " is empty");
  constexpr double eps = 1e-6;  // rl::group_advantages' default
  double mean = 0, sd = 1;      // a group of one: mean 0 and std 1, as in verl
  double lo = g.samples[0].reward, hi = lo;
  if (n > 1) {
    double sum = 0;
    for (const auto& s : g.samples) {
      sum += s.reward;
      lo = std::min(lo, s.reward);
      hi = std::max(hi, s.reward);
    }
    mean = sum / static_cast<double>(n);
    double sq = 0;  // two passes: no cancellation for rewards far from 0
    for (const auto& s : g.samples)
      sq += (s.reward - mean) * (s.reward - mean);
    sd = std::sqrt(sq / static_cast<double>(n - 1));  // unbiased
  }
  const bool by_std = estimator == advantage_estimator::grpo;
  for (auto& s : g.samples) {
    const double centred = s.reward - mean;
    s.advantage = by_std ? centred / (sd + eps) : centred;
  }
  return !(filter_zero_variance && n > 1 && lo == hi);
}

}  // namespace asyncrl
