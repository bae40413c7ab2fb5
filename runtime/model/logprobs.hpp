#pragma once

// Log-probabilities of given tokens under a model's logits: the one computation behind SFT's
// loss, the trainer's policy log-probs, the sampler's and `asyncrl score`. Pulls in ATen.

#include <ATen/ATen.h>

namespace asyncrl {

/// log softmax(logits)[token] along the last dimension: logits (..., V), tokens (...) int64
/// -> (...), e.g. (B, T, V) and (B, T) -> (B, T). float32 and float64 logits are computed in
/// their own dtype (no upcast: those callers keep their exact results); bf16/fp16 logits in
/// float32, and the result is float32.
at::Tensor token_logprobs(const at::Tensor& logits, const at::Tensor& tokens);

}  // namespace asyncrl
