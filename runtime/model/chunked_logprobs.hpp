#pragma once

// Log-probs of given tokens under an LM head, computed a chunk of tokens at a time so that the
// full (N, V) logits never exist at once: at vocab 151,936, 8192 tokens of float32 logits are
// 5 GB, and the plain composition keeps several such tensors (logits, log-softmax, its gradient)
// alive through the backward. With gradients the backward recomputes each chunk's logits from
// the saved h and W; only h, W, the targets and the per-token logsumexp are kept in between.
// Pulls in ATen: include it from .cpp files only.

#include <ATen/ATen.h>

namespace asyncrl {

/// What chunked_token_logprobs returns.
struct chunked_logprobs_out {
  at::Tensor logp;     // (N,) log softmax(h W^T / T)[target], float32 (float64 for float64 h)
  at::Tensor entropy;  // (N,) entropy of softmax(h W^T / T), no gradient; undefined unless asked
};

/// log softmax(h W^T / T)[targets] for h (N, H) in the compute dtype, the LM head's weight
/// W (V, H) (tied or untied; cast to h's dtype as the model's forward casts it, as_compute),
/// targets (N,) int64 and temperature T, `chunk_tokens` rows of logits at a time (> 0). The
/// softmax statistics run in at least float32. Differentiable in h and W: the gradient of W is
/// summed over the chunks in W's own dtype (float32 masters of a bf16 forward get a float32
/// sum). With one chunk (N <= chunk_tokens) the values equal token_logprobs(lm_logits(h) / T)
/// bit for bit. `with_entropy`: also the per-token entropy (the trainer's metric).
chunked_logprobs_out chunked_token_logprobs(const at::Tensor& h, const at::Tensor& weight,
                                            const at::Tensor& targets, double temperature,
                                            int64_t chunk_tokens, bool with_entropy = false);

}  // namespace asyncrl
