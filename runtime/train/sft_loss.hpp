#pragma once

// The supervised warm-start's objective (`asyncrl sft`). Pulls in torch.

#include <torch/types.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace asyncrl {

class CausalLMImpl;

/// One encoded training example: prompt tokens followed by response tokens.
struct sft_example {
  std::vector<int32_t> seq;  // prompt + response
  int64_t prompt_len = 0;
  // Per response token: 1 = trained on, 0 = a tool's answer in a worked tool trace (context
  // only, as in RL). Empty: every response token is trained on.
  std::vector<uint8_t> response_mask;
};

/// Masked next-token cross-entropy over response tokens, token-mean over the batch. The batch
/// is right-padded to T = longest seq - 1 and run as one (B, T) forward pass; position t is
/// scored on token t+1 when that is a response token. Returns (loss, number of target tokens).
std::pair<torch::Tensor, int64_t> sft_loss(CausalLMImpl& model,
                                           const std::vector<const sft_example*>& batch,
                                           torch::Device device);

}  // namespace asyncrl
