#include "runtime/train/dp_split.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace asyncrl {

std::vector<int> assign_by_tokens(const std::vector<int64_t>& tokens, int world) {
  if (world < 1) throw std::invalid_argument("assign_by_tokens: world must be >= 1");
  std::vector<size_t> order(tokens.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return tokens[a] > tokens[b]; });
  std::vector<int64_t> load(world, 0);
  std::vector<int> out(tokens.size(), 0);
  for (auto i : order) {
    const int r = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    out[i] = r;
    load[r] += tokens[i];
  }
  return out;
}

}  // namespace asyncrl
