#pragma once

// The node agent of an `asyncrl worker` process (docs/cluster.md). It joins the run at the
// controller, builds the run's environment from the config it gets back, receives each weight
// version in checksummed chunks (runtime/cluster/weight_chunks.hpp), launches the process's
// rollouters under the first complete version and loads every later one into all of them from
// one shared copy. Nothing is loaded before all of a version arrived and its digest matched.
// It quits when the controller's node is gone or the run is over; the process then exits.

#include <caf/actor_system.hpp>

#include <functional>
#include <string>

#include "actors/env.hpp"
#include "messages/interfaces.hpp"

namespace asyncrl {

struct node_agent_args {
  controller_actor controller;  // a proxy of the remote controller
  int32_t rollouters = 1;
  std::string host;
  int32_t pid = 0;
  std::chrono::milliseconds timeout{30000};  // join, and each load into a local rollouter
  std::string secret;  // the run's secret, presented with the join (a run without TLS asks)
  /// Builds the environment from the run's resolved config (the app's local overrides apply).
  /// Throws on a config this node cannot run.
  std::function<env_ptr(const std::string& config_yaml)> make_env;
};

node_agent_actor spawn_node_agent(caf::actor_system& sys, node_agent_args args);

}  // namespace asyncrl
