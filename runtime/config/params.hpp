#pragma once

// The run config turned into each component's own parameters, as llama.cpp's common/ turns
// its app parameters into llama_model_params: the components in runtime/ never see run_config.

#include "runtime/scheduling/schedule.hpp"
#include "runtime/scheduling/simulator.hpp"
#include "runtime/train/policy_trainer_params.hpp"

namespace asyncrl {

struct run_config;

/// The async_training section and the batch sizes (rollout.n, data.train_batch_size,
/// trainer.ppo_mini_batch_size, trainer.total_steps).
schedule_params schedule_params_from(const run_config& cfg);

/// The algorithm and trainer sections, and the rollout temperature the trainer divides its
/// logits by as the generator did (1 for greedy rollouts, temperature 0).
policy_trainer_params policy_trainer_params_from(const run_config& cfg);

/// The schedule plan, workload, slots and micro-batching of a run plus the `simulate.*` keys
/// (devices and costs, or a calibration file measured by bench/bench_calibrate). Throws
/// std::runtime_error naming an unreadable calibration file.
sim_params sim_params_from(const run_config& cfg);

}  // namespace asyncrl
