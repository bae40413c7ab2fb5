#pragma once

// The node agent of an `asyncrl worker` process (docs/cluster.md). It joins the run at the
// controller, builds the run's environment from the config it gets back, receives each weight
// version in checksummed chunks (runtime/cluster/weight_chunks.hpp), launches the process's
// rollouters under the first complete version and loads every later one into all of them from
// one shared copy. Nothing is loaded before all of a version arrived and its digest matched.
// It quits when the controller's node is gone, when the controller drops it (a missed deadline:
// its rollouters are fenced), or when the run is over. The first two set `lost`, so that the
// worker process can rejoin as a new node (apps/asyncrl/worker_command.cpp).

#include <caf/actor_system.hpp>

#include <atomic>
#include <functional>
#include <memory>
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
  /// Whether this node accepts a weights link when the run offers one (a worker started with
  /// cluster.weights_transport=caf declines and gets CAF chunks).
  bool collective_weights = true;
  /// Builds the environment from the run's parameters (the app's local overrides apply).
  /// Throws on parameters this node cannot run.
  std::function<env_ptr(const worker_setup& setup)> make_env;
  /// Set (before the agent quits) when the controller was lost or dropped this node, as
  /// opposed to the run ending, a refused join, or a signal. Read by the process after the
  /// agent's down message.
  std::shared_ptr<std::atomic<bool>> lost = std::make_shared<std::atomic<bool>>(false);
};

node_agent_actor spawn_node_agent(caf::actor_system& sys, node_agent_args args);

}  // namespace asyncrl
