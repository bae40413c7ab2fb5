#include "runtime/train/advantages.hpp"

#include <stdexcept>

#include "runtime/train/losses.hpp"

namespace asyncrl {

bool assign_advantages(scored_group& g, advantage_estimator estimator, bool filter_zero_variance) {
  if (g.samples.empty())
    throw std::invalid_argument("group " + std::to_string(g.group_id) + " is empty");
  std::vector<double> r;
  for (auto& s : g.samples)
    r.push_back(s.reward);
  auto rewards = at::tensor(r, at::kDouble).unsqueeze(0);  // (1, G)
  auto adv = rl::group_advantages(rewards, estimator == advantage_estimator::grpo);
  auto* a = adv.data_ptr<double>();
  for (size_t i = 0; i < g.samples.size(); ++i)
    g.samples[i].advantage = a[i];
  if (filter_zero_variance && g.samples.size() > 1 &&
      rl::zero_variance_groups(rewards).item<bool>())
    return false;
  return true;
}

}  // namespace asyncrl
