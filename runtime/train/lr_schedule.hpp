#pragma once

#include <cstdint>

#include "runtime/train/train_modes.hpp"

namespace asyncrl {

/// Learning rate as a function of the optimizer step (0-based).
/// - constant: `peak` throughout;
/// - warmup: linear from peak/warmup to peak over `warmup` steps, then constant;
/// - cosine: the same warmup, then a half cosine from peak down to min_ratio * peak at `total`.
struct lr_schedule {
  lr_schedule_kind kind = lr_schedule_kind::constant;
  double peak = 1e-3;
  int64_t warmup = 0;
  int64_t total = 1;
  double min_ratio = 0.0;

  double at(int64_t step) const;
};

}  // namespace asyncrl
