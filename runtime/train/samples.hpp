#pragma once

// Rollout results as the trainer consumes them. Torch-free plain data, so that they can travel
// as CAF messages (see messages/) and be built by anyone.

#include <cstdint>
#include <string>
#include <vector>

namespace asyncrl {

/// One scored response with everything the losses need per token.
struct scored_sample {
  uint64_t uid = 0;       // unique in the run: group_id * group size + index
  uint64_t group_id = 0;  // the prompt instance this response answers
  uint32_t index = 0;     // sample index within the group
  std::vector<int32_t> prompt;
  std::vector<int32_t> response;
  std::vector<float> logprobs;    // behaviour log-probs from the generator, per response token
  std::vector<int64_t> versions;  // weight version that generated each token
  double reward = 0.0;
  double advantage = 0.0;
  int32_t interruptions = 0;   // times this response was interrupted and resumed
  bool reward_failed = false;  // the reward function threw or timed out (scored 0)
};

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
