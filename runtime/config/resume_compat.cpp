#include "runtime/config/resume_compat.hpp"

#include <algorithm>

#include "runtime/config/run_config.hpp"

namespace asyncrl {

bool resume_may_change(const std::string& key) {
  // The placement and the data-parallel keys may change: W ranks take one rank's update
  // (docs/scaling.md), and a checkpoint holds the whole optimizer state, so a resume may use
  // other devices or another rank count.
  static const char* const exact[] = {"trainer.total_steps",
                                      "trainer.threads",
                                      "rollout.threads",
                                      "runtime.threads",
                                      "runtime.caf_threads",
                                      "runtime.log_level",
                                      "runtime.eval_before",
                                      "runtime.eval_after",
                                      "runtime.save_dtype",
                                      "runtime.progress_timeout_s",
                                      "runtime.tensorboard",
                                      "eval.every_steps",
                                      "reward.timeout_ms",
                                      "reward.detached_workers",
                                      "reward.external.timeout_s",
                                      "reward.external.max_start_failures",
                                      "reward.max_failure_rate",
                                      "reward.failure_window",
                                      "async_training.sync_timeout_ms",
                                      "async_training.drain_timeout_ms",
                                      "async_training.sync_retries",
                                      "rollout.num_workers",
                                      "runtime.run_dir",
                                      "runtime.device",
                                      "trainer.device",
                                      "trainer.devices",
                                      "trainer.data_parallel",
                                      "trainer.shard_optimizer",
                                      "trainer.overlap_grad_reduce",
                                      "trainer.remote_ranks",
                                      "trainer.dist_listen",
                                      "trainer.dist_timeout_s",
                                      "rollout.device",
                                      "rollout.devices"};
  for (auto* k : exact)
    if (key == k) return true;
  for (auto* prefix : {"checkpoint.", "supervision.", "faults.", "simulate."})
    if (key.rfind(prefix, 0) == 0) return true;
  return false;
}

std::string resume_conflict(const loaded_config& saved, const loaded_config& now,
                            const std::vector<std::string>& also_may_change) {
  for (const auto& key : now.schema.keys()) {
    if (resume_may_change(key) || !saved.schema.has(key)) continue;
    if (std::find(also_may_change.begin(), also_may_change.end(), key) != also_may_change.end())
      continue;
    const auto before = saved.schema.value(key), after = now.schema.value(key);
    if (before != after)
      return "key '" + key + "' changed from " + before + " (checkpoint) to " + after +
             ": a resume continues the same run, and this key changes what it trains";
  }
  // total_steps may grow, but the lr schedule is a function of it unless it is constant.
  const auto& a = saved.cfg.trainer;
  const auto& b = now.cfg.trainer;
  if (a.total_steps != b.total_steps && a.lr_schedule != lr_schedule_kind::constant)
    return "key 'trainer.total_steps' changed from " + std::to_string(a.total_steps) + " to " +
           std::to_string(b.total_steps) +
           ": with trainer.lr_schedule=" + to_string(a.lr_schedule) +
           " the learning rate of every step depends on it";
  return {};
}

std::vector<std::string> live_values_to_restore(const loaded_config& saved,
                                                const loaded_config& now,
                                                const std::vector<std::string>& keys,
                                                std::vector<std::string>* kept) {
  std::vector<std::string> out;
  for (const auto& key : keys) {
    if (!saved.schema.has(key) || !now.schema.has(key)) continue;
    const auto before = saved.schema.value(key), current = now.schema.value(key);
    if (before == current) continue;
    // Origins read "command line argument 'key=value'" for the resume's own overrides.
    if (now.schema.origin(key).where.rfind("command line", 0) == 0) {
      if (kept) kept->push_back(key + "=" + current + " (the checkpoint had " + before + ")");
      continue;
    }
    out.push_back(key + "=" + before);
  }
  return out;
}

}  // namespace asyncrl
