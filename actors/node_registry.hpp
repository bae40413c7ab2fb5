#pragma once

// The controller's record of the cluster: the worker processes (nodes) that joined, by their
// agent, the rollouter ids each hosts, and the next rollouter id (ids are never reused: a
// node that comes back gets new ones). Plain data: the controller does the messaging.

#include <caf/actor.hpp>
#include <caf/actor_addr.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace asyncrl {

class node_registry {
 public:
  struct node {
    caf::actor agent;
    std::string host;
    int32_t pid = 0;
    std::vector<int32_t> workers;  // rollouter ids it hosts now
  };

  /// Ids from `first` on are free (the local rollouters hold those below).
  void start_ids_at(int32_t first) { next_id_ = first; }
  /// `n` consecutive new rollouter ids; returns the first.
  int32_t take_ids(int32_t n);

  /// A node joins (replacing any record of the same agent).
  node& add(const caf::actor_addr& addr, caf::actor agent, std::string host, int32_t pid);
  node* find(const caf::actor_addr& addr);
  bool is_node(const caf::actor_addr& addr) const { return nodes_.count(addr) > 0; }

  /// Rollouter `worker` now runs on node `addr` (which must be registered).
  void host(const caf::actor_addr& addr, int32_t worker);
  /// Whether `worker` was ever hosted by a node: a remote rollouter is never restarted here.
  bool is_remote(int32_t worker) const { return node_of_.count(worker) > 0; }
  /// A rollouter of a live node leaves it (it crashed there, or the console removed it).
  void leave(int32_t worker);
  /// Where `worker` runs: "host (pid N)" for a live node's, else "local".
  std::string where(int32_t worker) const;

  /// A node is gone: its record, or nothing when it was not (or no longer) registered.
  std::optional<node> remove(const caf::actor_addr& addr);
  /// Every node, removed (the run ends).
  std::map<caf::actor_addr, node> take_all();

 private:
  std::map<caf::actor_addr, node> nodes_;
  std::map<int32_t, caf::actor_addr> node_of_;  // remote worker id -> its node's agent
  int32_t next_id_ = 0;
};

}  // namespace asyncrl
