#pragma once

// Batched token sampling. Pulls in torch; include only from tensor code.

#include <ATen/ATen.h>

namespace asyncrl {

/// Per-row sampling settings as tensors on the logits' device:
/// temperature (n,) float (0 = greedy), top_k (n,) int64 (0 = off), top_p (n,) float (1 = off),
/// uniform (n,) float64 draws in [0, 1) from each row's own RNG stream.
struct sample_inputs {
  at::Tensor temperature, top_k, top_p, uniform;
  /// rollout.batch_invariant: the log-probs by bi_token_logprobs, the trainer's own function
  /// (CPU only).
  bool batch_invariant = false;
};

struct sample_outputs {
  at::Tensor tokens;    // (n,) int64
  at::Tensor logprobs;  // (n,) float32: log softmax(logits / T)[token], T = 1 for greedy rows
};

/// Samples one token per row of `logits` (n, V). Every operation is row-wise, so a row's
/// result does not depend on the other rows. Top-k and top-p restrict the support; the draw
/// is an inverse-CDF lookup of the row's uniform in the renormalised, sorted distribution.
sample_outputs sample_tokens(const at::Tensor& logits, const sample_inputs& in);

/// log softmax(logits / T) gathered at `tokens`, in float32 like sample_tokens' log-probs;
/// logits (n, V), tokens (n,), T > 0.
at::Tensor token_logprobs(const at::Tensor& logits, const at::Tensor& tokens, double temperature);

}  // namespace asyncrl
