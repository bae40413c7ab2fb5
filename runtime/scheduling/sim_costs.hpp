#pragma once

// The simulator's per-device costs. One struct for the config section (simulate.*), the
// simulator's parameters and the calibration file, so a cost is named once, in fields().
// Torch-free and CAF-free.

#include "runtime/common/fields.hpp"

namespace asyncrl {

/// What compute costs, per device ("device" = a GPU, or a core on the CPU).
struct sim_costs {
  double decode_base_ms = 1.0;         // one decode step of a rollout device, fixed part
  double decode_per_seq_ms = 0.05;     // ... plus this per active sequence
  double prefill_per_token_ms = 0.01;  // prefill, per context token (once per group prompt)
  double train_per_token_ms = 0.1;     // trainer forward + backward, per response token, 1 device
  double train_step_ms = 5.0;          // optimizer step and snapshot, per step
  double sync_ms = 1.0;                // loading new weights on the rollouters
  double reward_ms = 0.1;              // scoring a group
  double train_scaling = 0.0;          // speed-up of training on all train devices; 0 = ideal
  // Core contention: how much slower a decode step (a training chunk) runs while training
  // (generation) runs at the same time on other cores of the same machine. 1 = none. Applied
  // to a decode event or a training chunk that starts while the other phase is busy; never in
  // colocated sync, whose phases do not overlap.
  double gen_contention = 1.0;
  double train_contention = 1.0;

  /// The costs by the names of their config keys (simulate.<name>) and calibration keys.
  static constexpr auto fields() {
    using s = sim_costs;
    return std::make_tuple(named("decode_base_ms", &s::decode_base_ms),
                           named("decode_per_seq_ms", &s::decode_per_seq_ms),
                           named("prefill_per_token_ms", &s::prefill_per_token_ms),
                           named("train_per_token_ms", &s::train_per_token_ms),
                           named("train_step_ms", &s::train_step_ms), named("sync_ms", &s::sync_ms),
                           named("reward_ms", &s::reward_ms),
                           named("train_scaling", &s::train_scaling),
                           named("gen_contention", &s::gen_contention),
                           named("train_contention", &s::train_contention));
  }
};

}  // namespace asyncrl
