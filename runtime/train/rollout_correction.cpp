#include "runtime/train/rollout_correction.hpp"

#include <cmath>
#include <stdexcept>

#include <ATen/core/grad_mode.h>

namespace asyncrl::rl {

namespace {

// (M, 1) per-row sum and mean of l over the masked-in tokens; an empty row has sum 0, mean 0.
at::Tensor row_sum(const at::Tensor& l, const at::Tensor& m) {
  return (l * m).sum(1, /*keepdim=*/true);
}
at::Tensor row_mean(const at::Tensor& l, const at::Tensor& m) {
  return row_sum(l, m) / m.sum(1, /*keepdim=*/true).clamp_min(1.0);
}

// Inclusive bounds in log space: a ratio exactly at a threshold is kept.
at::Tensor within(const at::Tensor& stat, double lower, double upper) {
  return stat.ge(std::log(lower)).logical_and(stat.le(std::log(upper)));
}

}  // namespace

correction rollout_correction(const at::Tensor& log_ratio, const at::Tensor& mask,
                              const rollout_correction_params& p) {
  if (!log_ratio.defined() || log_ratio.dim() != 2)
    throw std::invalid_argument("rollout_correction: log_ratio must be (M, L)");
  if (!mask.defined() || mask.sizes() != log_ratio.sizes())
    throw std::invalid_argument("rollout_correction: mask must have log_ratio's shape");
  if (p.is != rc_is_level::none && !(p.is_threshold > 0))
    throw std::invalid_argument("rollout_correction: is_threshold must be > 0");
  if (p.rs != rc_rs_level::none && !(p.rs_threshold > 0 && p.rs_lower() <= p.rs_threshold))
    throw std::invalid_argument(
        "rollout_correction: rs_threshold must be > 0 and rs_threshold_lower <= rs_threshold");
  at::NoGradGuard ng;
  const auto on = mask.to(at::kBool);
  const auto m = on.to(log_ratio.scalar_type());
  correction c;
  c.log_ratio = at::clamp(log_ratio.detach(), -kLogRatioBound, kLogRatioBound) * m;

  // The weight at the IS level, before truncation. A sequence weight is the product of its
  // tokens' ratios, taken in log space and clamped again: a long response sums many l_t.
  if (p.is == rc_is_level::sequence)
    c.raw = at::exp(row_sum(c.log_ratio, m).clamp(-kLogRatioBound, kLogRatioBound))
                .expand_as(c.log_ratio)
                .contiguous();
  else
    c.raw = at::exp(c.log_ratio);
  if (p.is == rc_is_level::none) {
    c.weight = c.raw;
    c.truncated = at::zeros_like(on);
  } else {
    c.weight = c.raw.clamp_max(p.is_threshold);
    c.truncated = c.raw.gt(p.is_threshold).logical_and(on);
  }

  // Rejection: the statistic per token or per row, compared in log space.
  auto keep = on;
  if (p.rs != rc_rs_level::none) {
    const double lo = p.rs_lower(), hi = p.rs_threshold;
    at::Tensor pass;
    if (p.rs == rc_rs_level::token)
      pass = within(c.log_ratio, lo, hi);
    else if (p.rs == rc_rs_level::sequence)
      pass = within(row_sum(c.log_ratio, m), lo, hi).expand_as(on);
    else
      pass = within(row_mean(c.log_ratio, m), lo, hi).expand_as(on);
    keep = keep.logical_and(pass);
  }
  if (p.veto_threshold > 0) {
    // One catastrophic token (pi_train far below pi_rollout) rejects its whole response.
    auto bad = c.log_ratio.lt(std::log(p.veto_threshold)).logical_and(on);
    keep = keep.logical_and(bad.any(1, /*keepdim=*/true).logical_not().expand_as(on));
  }
  c.keep = keep.contiguous();
  return c;
}

}  // namespace asyncrl::rl
