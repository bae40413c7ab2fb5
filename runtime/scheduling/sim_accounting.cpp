#include "runtime/scheduling/sim_accounting.hpp"

#include <algorithm>

namespace asyncrl {

void account_group(sim_step& step, const std::vector<sim_sample>& samples, int64_t version) {
  for (auto& s : samples) {
    step.tokens += s.tokens;
    ++step.samples;
    if (s.first_version < version) ++step.stale_samples;
    step.staleness_max = std::max(step.staleness_max, version - s.first_version);
    if (s.interruptions > 0) ++step.partial_samples;
    step.max_partial_span = std::max(step.max_partial_span, s.last_version - s.first_version);
  }
}

sim_result summarize_steps(std::vector<sim_step> steps, double end_ms, int64_t warmup_steps,
                           double rollout_busy_ms, int64_t rollout_devices) {
  sim_result r;
  r.steps = std::move(steps);
  r.total_ms = end_ms;
  const auto& st = r.steps;
  const auto w = static_cast<size_t>(std::min<int64_t>(warmup_steps, int64_t(st.size()) - 1));
  const double t0 = w > 0 ? st[w - 1].end_ms : 0.0;
  double idle = 0, tokens = 0;
  for (size_t i = w; i < st.size(); ++i)
    idle += st[i].trainer_idle_ms, tokens += st[i].tokens;
  const double span = end_ms - t0;
  r.mean_step_ms = span / double(st.size() - w);
  r.trainer_idle_ratio = span > 0 ? idle / span : 0;
  r.rollout_idle_ratio = 1.0 - rollout_busy_ms / (end_ms * double(rollout_devices));
  r.tokens_per_s = span > 0 ? tokens / (span / 1000.0) : 0;
  return r;
}

}  // namespace asyncrl
