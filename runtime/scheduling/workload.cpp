#include "runtime/scheduling/workload.hpp"

#include <algorithm>
#include <cmath>

#include "runtime/common/rng.hpp"

namespace asyncrl {

int32_t workload_length(const workload_section& w, uint64_t seed, uint64_t group, uint32_t sample) {
  double len = static_cast<double>(w.median);
  if (w.lengths == workload_lengths::lognormal) {
    // Box-Muller from this response's own stream (salted so it is not the sampling stream).
    rng_stream rng(seed ^ 0x5a17e1e9d1ULL, group, sample);
    const double u1 = std::max(rng.uniform(0), 1e-12), u2 = rng.uniform(1);
    const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    len = static_cast<double>(w.median) * std::exp(w.sigma * z);
  }
  return static_cast<int32_t>(
      std::clamp<int64_t>(std::llround(len), std::max<int64_t>(1, w.min), w.max));
}

}  // namespace asyncrl
