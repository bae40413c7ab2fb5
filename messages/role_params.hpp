#pragma once

// The parameters of a rollouter and of the process that hosts it: what a worker process needs
// to build its rollouters, sent to it as typed data in the join reply (join_reply::setup), and
// what the train process gives its own rollouters. Built from the run config in one place
// (actors/role_params.cpp); the actors never read the config.

#include <caf/meta/type_name.hpp>

#include <cstdint>
#include <string>

#include "runtime/common/cpu_affinity.hpp"
#include "runtime/config/modes.hpp"     // rollout_dtype, chat_format, model_arch
#include "runtime/config/sections.hpp"  // model_section
#include "runtime/scheduling/async_section.hpp"
#include "runtime/scheduling/workload.hpp"

namespace asyncrl {

/// One rollouter: sampling, the KV-cache slots, the forced benchmark lengths and its faults.
struct rollouter_params {
  std::string device = "cpu";        // rollout.device, else runtime.device
  std::vector<std::string> devices;  // rollout.devices: rollouter w on devices[w % n]
  rollout_dtype dtype = rollout_dtype::float32;
  bool batch_invariant = false;             // rollout.batch_invariant: the batch-invariant kernels
  bool fused_decode = kFusedDecodeDefault;  // rollout.fused_decode: the fused decode kernels
  int64_t group_size = 8;                   // rollout.n
  double temperature = 1.0;
  int64_t top_k = 0;                // 0 = off
  double top_p = 1.0;               // 1 = off
  int64_t max_new_tokens = 48;      // per model turn
  int64_t max_turns = 1;            // model turns per episode (rollout.max_turns)
  int64_t max_episode_tokens = 48;  // model + environment tokens of a response, resolved
  env_section env;                  // what answers the model's turns (env.kind != none)
  int64_t max_prompt_length = 64;
  int64_t max_batch = 128;                     // KV-cache slots
  int64_t chunk_tokens = kDefaultChunkTokens;  // decode steps between control-message checks
  bool partial_rollout = false;
  bool report_starts = false;  // stale_policy wait: the queue learns each group's start version
  uint64_t seed = 1;           // runtime.seed: sampling streams and forced lengths
  workload_section workload;   // lengths != model: benchmark lengths, EOS ignored
  // Injected faults (faults.*, 0 = off): rollouter 0's slow chunks and its dropped or delayed
  // loads.
  int64_t slow_ms = 0;
  int64_t sync_drop_every = 0;
  int64_t sync_delay_every = 0;
  int64_t sync_delay_ms = 0;
  int64_t env_fault_every = 0;  // every n-th call to this rollouter's environment pool fails once
};

/// The device of rollouter `worker`: rollout.devices[worker mod n], else rollout.device.
inline const std::string& rollouter_device(const rollouter_params& p, int32_t worker) {
  if (p.devices.empty()) return p.device;
  return p.devices[static_cast<size_t>(worker) % p.devices.size()];
}

/// How a process runs its compute roles: threads, CPU pinning and the prompt format.
struct node_params {
  int64_t rollouters = 1;       // rollout.num_workers of this process
  int64_t rollout_threads = 0;  // rollout.threads; 0 = by mode
  int64_t trainer_threads = 0;  // trainer.threads; 0 = by mode
  bool colocated = false;       // sync mode with colocate: the roles take turns on every core
  cpu_affinity affinity = cpu_affinity::none;
  chat_format chat_template = chat_format::auto_detect;
  std::string system_prompt;
};

/// What a worker process needs from the run: its rollouters' parameters, its process's, and
/// the model's source (architecture and tokenizer; the weights arrive from the controller).
struct worker_setup {
  rollouter_params rollouter;
  node_params node;
  model_section model;
  int64_t seed = 1;  // runtime.seed (a fresh model's initialisation, never used for weights)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, workload_section& x) {
  return f(caf::meta::type_name("workload_section"), x.lengths, x.median, x.sigma, x.min, x.max);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, env_section& x) {
  return f(caf::meta::type_name("env_section"), x.kind, x.reward, x.num_workers, x.timeout_ms,
           x.max_retries, x.max_failure_rate, x.failure_window, x.max_observation_tokens, x.command,
           x.socket, x.latency_median_ms, x.latency_p99_ratio, x.sync_waits_for_tools);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rollouter_params& x) {
  return f(caf::meta::type_name("rollouter_params"), x.device, x.dtype, x.group_size, x.temperature,
           x.top_k, x.top_p, x.max_new_tokens, x.max_prompt_length, x.max_batch, x.chunk_tokens,
           x.partial_rollout, x.report_starts, x.seed, x.workload, x.slow_ms, x.sync_drop_every,
           x.sync_delay_every, x.sync_delay_ms, x.devices, x.max_turns, x.max_episode_tokens, x.env,
           x.env_fault_every, x.batch_invariant, x.fused_decode);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_params& x) {
  return f(caf::meta::type_name("node_params"), x.rollouters, x.rollout_threads, x.trainer_threads,
           x.colocated, x.affinity, x.chat_template, x.system_prompt);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, model_init_config& x) {
  return f(caf::meta::type_name("model_init_config"), x.arch, x.hidden_size, x.intermediate_size,
           x.num_hidden_layers, x.num_attention_heads, x.num_key_value_heads,
           x.max_position_embeddings, x.rope_theta, x.rms_norm_eps, x.tie_word_embeddings,
           x.init_std);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, model_section& x) {
  return f(caf::meta::type_name("model_section"), x.path, x.tokenizer, x.init);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_setup& x) {
  return f(caf::meta::type_name("worker_setup"), x.rollouter, x.node, x.model, x.seed);
}

}  // namespace asyncrl
