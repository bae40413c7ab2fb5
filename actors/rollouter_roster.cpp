#include "actors/rollouter_roster.hpp"

#include <caf/actor_cast.hpp>

namespace asyncrl {

rollouter_roster::rollouter_roster(rollouter_params rollouters,
                                   std::vector<std::string> rank_devices)
    : placement_(std::move(rollouters)), rank_devices_(std::move(rank_devices)) {}

void rollouter_roster::enlist(int32_t w, const rollouter_actor& r) {
  live_[w] = r;
  worker_of_[caf::actor_cast<caf::actor_addr>(r)] = w;
}

std::optional<int32_t> rollouter_roster::worker_of(const caf::actor_addr& incarnation) const {
  auto it = worker_of_.find(incarnation);
  if (it == worker_of_.end()) return std::nullopt;
  return it->second;
}

void rollouter_roster::forget(const caf::actor_addr& incarnation) {
  worker_of_.erase(incarnation);
}

std::optional<rollouter_actor> rollouter_roster::remove(int32_t w) {
  auto it = live_.find(w);
  if (it == live_.end()) return std::nullopt;
  auto r = it->second;
  const auto addr = caf::actor_cast<caf::actor_addr>(r);
  fenced_.insert(addr);
  worker_of_.erase(addr);
  live_.erase(it);
  return r;
}

void rollouter_roster::report(rollout_progress p) {
  const auto w = p.worker;
  progress_[w] = std::move(p);
}

std::optional<rollout_progress> rollouter_roster::bury(int32_t w) {
  auto it = progress_.find(w);
  if (it == progress_.end()) return std::nullopt;
  auto p = std::move(it->second);
  progress_.erase(it);
  dead_tokens_[w] += p.tokens_generated;
  return p;
}

int64_t rollouter_roster::dead_tokens() const {
  int64_t n = 0;
  for (auto& [w, t] : dead_tokens_)
    n += t;
  return n;
}

int64_t rollouter_roster::tokens_generated() const {
  int64_t n = dead_tokens();
  for (auto& [w, p] : progress_)
    n += p.tokens_generated;
  return n;
}

std::map<int32_t, double> rollouter_roster::busy_ms() const {
  std::map<int32_t, double> out;
  for (auto& [w, p] : progress_)
    out[w] = p.busy_ms;
  return out;
}

std::string rollouter_roster::device(int32_t w) const {
  if (nodes_.is_remote(w)) return "";
  return rollouter_device(placement_, w);
}

}  // namespace asyncrl
