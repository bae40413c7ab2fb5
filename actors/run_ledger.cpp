#include "actors/run_ledger.hpp"

namespace asyncrl {

void run_ledger::dispatched(const prompt_task& t, int32_t worker) {
  in_flight_[t.group_id] = entry{t, worker, false};
}

void run_ledger::completed(uint64_t id) {
  auto it = in_flight_.find(id);
  if (it != in_flight_.end()) it->second.completed = true;
}

std::vector<prompt_task> run_ledger::trained(const std::vector<uint64_t>& ids) {
  std::vector<prompt_task> out;
  for (auto id : ids) {
    auto it = in_flight_.find(id);
    if (it == in_flight_.end()) continue;  // restored from a checkpoint: recorded there
    trained_seqs_.push_back(it->second.task.seq);
    out.push_back(std::move(it->second.task));
    in_flight_.erase(it);
  }
  return out;
}

std::optional<prompt_task> run_ledger::dropped(uint64_t id, bool regenerate) {
  auto it = in_flight_.find(id);
  if (it == in_flight_.end()) return std::nullopt;
  auto t = std::move(it->second.task);
  in_flight_.erase(it);
  if (regenerate) return t;
  dropped_seqs_.push_back(t.seq);
  return std::nullopt;
}

std::vector<prompt_task> run_ledger::lost_with(int32_t worker) {
  std::vector<prompt_task> out;
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    if (it->second.worker == worker && !it->second.completed) {
      out.push_back(std::move(it->second.task));
      it = in_flight_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::vector<prompt_task> run_ledger::unsaved(const std::set<uint64_t>& saved) const {
  std::vector<prompt_task> out;
  for (auto& [id, e] : in_flight_)
    if (!saved.count(id)) out.push_back(e.task);
  return out;
}

std::vector<uint64_t> run_ledger::in_flight_seqs() const {
  std::vector<uint64_t> out;
  for (auto& [id, e] : in_flight_)
    out.push_back(e.task.seq);
  return out;
}

void run_ledger::restore(std::vector<uint64_t> trained, std::vector<uint64_t> dropped) {
  trained_seqs_ = std::move(trained);
  dropped_seqs_ = std::move(dropped);
}

std::map<int32_t, int64_t> run_ledger::in_flight_by_worker() const {
  // Completed groups are left out: counted here, an idle rollouter showed the groups it had
  // finished long ago while they waited in the trainer's open step (a paused run).
  std::map<int32_t, int64_t> n;
  for (auto& [id, e] : in_flight_)
    if (!e.completed) ++n[e.worker];
  return n;
}

}  // namespace asyncrl
