#include "runtime/task/epoch_order.hpp"

#include <numeric>
#include <utility>

#include "runtime/common/rng.hpp"

namespace asyncrl {

std::vector<size_t> epoch_order(size_t n, uint64_t seed, int64_t epoch,
                                const epoch_stream& stream) {
  const auto e = static_cast<uint64_t>(epoch);
  rng_stream rng(seed, stream.salt, stream.stream_per_epoch ? e : 0);
  // A shared stream: every epoch makes n-1 draws, so epoch e starts at draw e * (n-1).
  uint64_t draw = stream.stream_per_epoch || n < 2 ? 0 : e * (n - 1);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  for (size_t i = n; i > 1; --i) {
    const uint64_t counter = stream.stream_per_epoch ? i : draw++;
    std::swap(order[i - 1], order[rng.bits(counter) % i]);
  }
  return order;
}

}  // namespace asyncrl
