#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/config/schema.hpp"
#include "runtime/config/sections.hpp"

namespace asyncrl {

/// Every key of the YAML config, grouped by section.
struct run_config {
  model_section model;
  data_section data;
  sft_section sft;
  rollout_section rollout;
  eval_section eval;
  algorithm_section algorithm;
  trainer_section trainer;
  reward_section reward;
  env_section env;
  async_section async_training;
  workload_section workload;
  simulate_section simulate;
  runtime_section runtime;
  checkpoint_section checkpoint;
  supervision_section supervision;
  faults_section faults;
  cluster_section cluster;

  /// Binds every field to its dotted key with help text and checks.
  void bind(config_schema& schema);
};

/// A loaded config: the values plus the schema that knows where each came from.
struct loaded_config {
  run_config cfg;
  config_schema schema;
};

/// Loads defaults, then `path` (if not empty), then `key=value` overrides in order, then runs
/// cross-key checks. Throws config_error naming file:line or the argument, and the key.
std::unique_ptr<loaded_config> load_config(const std::string& path,
                                           const std::vector<std::string>& overrides);
/// The same from YAML text; `name` stands for the file in error messages.
std::unique_ptr<loaded_config> load_config_text(const std::string& yaml, const std::string& name,
                                                const std::vector<std::string>& overrides);

/// Where the weights links listen (cluster.weights_transport=collective): cluster.weights_listen,
/// else the host of cluster.listen ("" when there is no listener).
std::string weights_link_host(const cluster_section& c);

}  // namespace asyncrl
