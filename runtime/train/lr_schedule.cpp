#include "runtime/train/lr_schedule.hpp"

#include <algorithm>
#include <cmath>

namespace asyncrl {

double lr_schedule::at(int64_t step) const {
  if (kind == lr_schedule_kind::constant) return peak;
  if (step < warmup) return peak * double(step + 1) / double(warmup);
  if (kind == lr_schedule_kind::warmup) return peak;
  const int64_t span = std::max<int64_t>(1, total - warmup);
  const double progress = std::clamp(double(step - warmup) / double(span), 0.0, 1.0);
  const double floor = min_ratio * peak;
  return floor + (peak - floor) * 0.5 * (1.0 + std::cos(M_PI * progress));
}

}  // namespace asyncrl
