#include "runtime/scheduling/simulator.hpp"

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "runtime/scheduling/sim_engine.hpp"

namespace asyncrl {

sim_result simulate(const sim_params& p) {
  if (p.rollout_devices <= 0 || p.train_devices <= 0 || p.slots <= 0 || p.chunk_tokens <= 0)
    throw std::invalid_argument("simulate: devices, slots and chunk_tokens must be > 0");
  if (p.colocated && p.plan.mode != async_mode::sync)
    throw std::invalid_argument("simulate: colocated only applies to sync mode");
  return run_event_simulation(p);
}

void load_calibration(const std::string& path, sim_params& p) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open calibration");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path + ": invalid JSON: " + e.what());
  }
  auto& c = p.costs;
  for_each_field(c, [&](const char* key, double& field) {
    // train_scaling is measured per device count: a table, read below.
    if (std::strcmp(key, "train_scaling") != 0 && j.contains(key)) field = j.at(key).get<double>();
  });
  // Measured training speed-up on n devices (cores), e.g. {"1": 1.0, "2": 1.62}.
  auto key = std::to_string(p.train_devices);
  if (c.train_scaling == 0 && j.contains("train_scaling") && j["train_scaling"].contains(key))
    c.train_scaling = j["train_scaling"][key].get<double>();
  if (j.contains("prompt_tokens")) p.prompt_tokens = j["prompt_tokens"].get<int64_t>();
  if (j.contains("response_lengths")) {
    p.replay_lengths = j["response_lengths"].get<std::vector<int32_t>>();
    for (auto len : p.replay_lengths)
      if (len <= 0) throw std::runtime_error(path + ": response_lengths: expected lengths > 0");
  }
}

}  // namespace asyncrl
