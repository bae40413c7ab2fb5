#include "runtime/console/live_keys.hpp"

#include <utility>

namespace asyncrl {

namespace {

const char* const kAtBoundary = "from the announced step (the trainer's next step boundary)";

const std::vector<live_key> kLive = {
    {"async_training.staleness_threshold", "staleness_threshold", live_target::trainer,
     kAtBoundary},
    {"async_training.max_staleness", "max_staleness", live_target::trainer, kAtBoundary},
    {"async_training.trigger_parameter_sync_step", "trigger_parameter_sync_step",
     live_target::trainer, kAtBoundary},
    {"trainer.lr", "lr", live_target::trainer, kAtBoundary},
    {"checkpoint.every_steps", "", live_target::trainer, kAtBoundary},
    {"eval.every_steps", "", live_target::trainer, kAtBoundary},
    {"rollout.temperature", "temperature", live_target::rollouters,
     "for the groups the rollouters start from now on"},
    {"runtime.progress_timeout_s", "", live_target::controller, "at once"},
};

// Reasons by key, then by section; the first match wins.
const std::vector<std::pair<const char*, const char*>> kReasons = {
    {"rollout.num_workers",
     "the rollouters are added and removed with add-rollouter and "
     "remove-rollouter (or asyncrl worker processes)"},
    {"rollout.n", "the group size fixes the layout of every batch, checkpoint and ledger entry"},
    {"async_training.mode", "the mode fixes the schedule the run and its checkpoints follow"},
    {"async_training.partial_rollout", "the rollouters' interrupt behaviour is fixed at start"},
    {"async_training.require_batches", "the local update's size fixes the proximal policy"},
    {"trainer.total_steps", "the schedule (and the lr schedule) is derived from it at start"},
    {"faults.", "faults are injected live with the console's kill, hang and delay-sync commands"},
    {"model.", "the model's architecture and starting weights are fixed when the run starts"},
    {"data.",
     "the dataset, its order and the batch layout are fixed when the run starts (the "
     "loader's position is in every checkpoint)"},
    {"algorithm.", "the objective is fixed for a run; change it with train --resume DIR KEY=VALUE"},
    {"trainer.", "the optimizer and the micro-batching are set up when the run starts"},
    {"rollout.", "the generators' buffers and sampling streams are set up when the run starts"},
    {"reward.", "the reward pool is built when the run starts"},
    {"cluster.", "the listener and its TLS settings are set up when the run starts"},
    {"runtime.", "process settings (threads, device, run_dir) are fixed when the run starts"},
    {"checkpoint.", "the checkpoint location and retention are fixed when the run starts"},
    {"supervision.", "the supervision policy is fixed when the run starts"},
    {"eval.", "the evaluation settings are fixed when the run starts"},
};

bool starts_with(const std::string& s, const char* p) {
  return s.rfind(p, 0) == 0;
}

}  // namespace

const std::vector<live_key>& live_keys() {
  return kLive;
}

std::string resolve_live_key(const std::string& name) {
  for (auto& k : kLive)
    if (name == k.key || (*k.alias && name == k.alias)) return k.key;
  return "";
}

std::string why_not_live(const std::string& key) {
  std::string live;
  for (auto& k : kLive)
    live += std::string(live.empty() ? "" : ", ") + k.key;
  for (auto& [prefix, why] : kReasons) {
    const std::string p = prefix;
    if (key == p || (p.back() == '.' && starts_with(key, prefix)))
      return key + " cannot change during a run: " + why + " (live keys: " + live + ")";
  }
  return key + " cannot change during a run (live keys: " + live + ")";
}

}  // namespace asyncrl
