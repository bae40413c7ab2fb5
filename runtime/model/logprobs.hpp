#pragma once

// Log-probabilities of given tokens under a model's logits: the one computation behind SFT's
// loss, the trainer's policy log-probs, the sampler's and `asyncrl score`. Pulls in ATen.

#include <ATen/ATen.h>

namespace asyncrl {

/// log softmax(logits)[token] along the last dimension: logits (..., V), tokens (...) int64
/// -> (...), e.g. (B, T, V) and (B, T) -> (B, T). Computed in the logits' own dtype (no
/// upcast), so float32 and float64 callers keep their precision and their exact results.
at::Tensor token_logprobs(const at::Tensor& logits, const at::Tensor& tokens);

}  // namespace asyncrl
