#include "runtime/train/shard_layout.hpp"

#include <algorithm>
#include <stdexcept>

namespace asyncrl {

int64_t shard_layout::max_elements() const {
  return elements.empty() ? 0 : *std::max_element(elements.begin(), elements.end());
}

shard_layout make_shard_layout(const std::vector<int64_t>& numels, int world) {
  if (world < 1) throw std::invalid_argument("shard layout: world must be >= 1");
  std::vector<int64_t> start(numels.size() + 1, 0);  // each parameter's first flat index
  for (size_t i = 0; i < numels.size(); ++i)
    start[i + 1] = start[i] + numels[i];
  const int64_t total = start.back();
  // Boundaries b_0 = 0 <= b_1 <= ... <= b_W = total.
  std::vector<int64_t> bound(world + 1, total);
  bound[0] = 0;
  for (int r = 1; r < world; ++r) {
    const int64_t g = total * r / world;
    // The parameter holding flat index g; the boundary moves to an aligned offset inside it.
    const auto i =
        static_cast<size_t>(std::upper_bound(start.begin(), start.end(), g) - start.begin()) - 1;
    int64_t b = i < numels.size() ? start[i] + (g - start[i]) / kShardAlign * kShardAlign : total;
    bound[r] = std::max(b, bound[r - 1]);
  }
  shard_layout out;
  out.ranks.resize(world);
  out.elements.assign(world, 0);
  for (int r = 0; r < world; ++r) {
    const int64_t lo = bound[r], hi = bound[r + 1];
    for (size_t i = 0; i < numels.size() && lo < hi; ++i) {
      const int64_t a = std::max(lo, start[i]), b = std::min(hi, start[i + 1]);
      if (a >= b) continue;
      out.ranks[r].push_back({i, a - start[i], b - a});
      out.elements[r] += b - a;
    }
  }
  return out;
}

}  // namespace asyncrl
