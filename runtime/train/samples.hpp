#pragma once

// Rollout results as the trainer consumes them. Torch-free plain data, so that they can travel
// as CAF messages (see messages/) and be built by anyone.

#include <cstdint>
#include <string>
#include <vector>

namespace asyncrl {

/// One scored response with everything the losses need per token. A multi-turn episode's
/// response is its model turns and environment turns back to back, in the order the model saw
/// them; `loss_mask` tells them apart (docs/episodes.md).
struct scored_sample {
  uint64_t uid = 0;       // unique in the run: group_id * group size + index
  uint64_t group_id = 0;  // the prompt instance this response answers
  uint32_t index = 0;     // sample index within the group
  std::vector<int32_t> prompt;
  std::vector<int32_t> response;
  std::vector<float> logprobs;    // behaviour log-probs from the generator, per response token
  std::vector<int64_t> versions;  // weight version that generated each token
  // Per response token: 1 = sampled by the model (in the loss), 0 = written by the environment
  // (context only: out of the loss, its log-prob 0 and its version that of the model token
  // before it, so no staleness bound ever sees it). Empty: every token is the model's.
  std::vector<uint8_t> loss_mask;
  double reward = 0.0;
  double advantage = 0.0;
  int32_t interruptions = 0;   // times this response was interrupted and resumed
  bool reward_failed = false;  // the reward function threw or timed out (scored 0)
  int32_t turns = 1;           // model turns of the episode
  bool env_failed = false;     // the environment failed the episode (scored 0, counted)
  // The environment's reward at the episode's end (env.reward=env|sum), when it gave one.
  bool has_env_reward = false;
  double env_reward = 0.0;
};

/// Whether response token `j` of `s` is the model's (in the loss).
inline bool model_token(const scored_sample& s, size_t j) {
  return s.loss_mask.empty() || s.loss_mask[j] != 0;
}

/// The G responses to one prompt.
struct scored_group {
  uint64_t group_id = 0;
  uint64_t prompt_index = 0;  // position in the training data
  uint64_t seq = 0;           // position in the run's prompt schedule (epoch * N + cursor)
  std::string ground_truth;
  bool filtered = false;  // all rewards equal and algorithm.filter_groups: no training signal
  int32_t worker = -1;    // the rollouter that generated it (for its share of the credits)
  std::vector<scored_sample> samples;
};

}  // namespace asyncrl
