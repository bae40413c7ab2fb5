#include "actors/node_registry.hpp"

#include <algorithm>
#include <utility>

namespace asyncrl {

int32_t node_registry::take_ids(int32_t n) {
  const auto first = next_id_;
  next_id_ += n;
  return first;
}

node_registry::node& node_registry::add(const caf::actor_addr& addr, caf::actor agent,
                                        std::string host, int32_t pid) {
  auto& n = nodes_[addr];
  n = node{std::move(agent), std::move(host), pid, {}};
  return n;
}

node_registry::node* node_registry::find(const caf::actor_addr& addr) {
  auto n = nodes_.find(addr);
  return n == nodes_.end() ? nullptr : &n->second;
}

void node_registry::host(const caf::actor_addr& addr, int32_t worker) {
  node_of_[worker] = addr;
  nodes_.at(addr).workers.push_back(worker);
}

void node_registry::leave(int32_t worker) {
  auto a = node_of_.find(worker);
  if (a == node_of_.end()) return;
  if (auto* n = find(a->second)) {
    auto& ws = n->workers;
    ws.erase(std::remove(ws.begin(), ws.end(), worker), ws.end());
  }
}

std::string node_registry::where(int32_t worker) const {
  if (auto a = node_of_.find(worker); a != node_of_.end())
    if (auto n = nodes_.find(a->second); n != nodes_.end())
      return n->second.host + " (pid " + std::to_string(n->second.pid) + ")";
  return "local";
}

std::optional<node_registry::node> node_registry::remove(const caf::actor_addr& addr) {
  auto n = nodes_.find(addr);
  if (n == nodes_.end()) return std::nullopt;
  auto out = std::move(n->second);
  nodes_.erase(n);
  return out;
}

std::map<caf::actor_addr, node_registry::node> node_registry::take_all() {
  return std::exchange(nodes_, {});
}

}  // namespace asyncrl
