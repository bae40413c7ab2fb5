#pragma once

// Turns a micro-batch of responses into model inputs (docs/algorithms.md §11). A *sequence* is
// [prompt, response], or with shared-prompt attention [prompt, r_1, ..., r_K] for the responses
// of one prompt. Padding-free (the default): every sequence of the micro-batch goes into one row
// back to back, positions restart per sequence, and attention runs per block (segments), so no
// token is padding. Padded: one right-padded row per sequence, with a dense (B, T, T) mask for
// shared prompts. Pulls in torch.

#include <ATen/ATen.h>

#include <vector>

#include "runtime/model/segment_attention.hpp"
#include "runtime/train/samples.hpp"

namespace asyncrl {

struct packed_batch {
  at::Tensor ids, pos;           // (B, T) int64; B = 1 when padding-free
  at::Tensor mask;               // padded + shared prompt: (B, T, T) bool; else undefined
  segment_plan segments;         // padding-free: which keys each token sees; else empty
  at::Tensor src;                // (N,) int64 index into B*T of the position predicting each token
  at::Tensor targets;            // (N,) int64 response tokens
  at::Tensor row, col;           // (N,) int64 sample index in [0, M) and offset in its response
  at::Tensor trained;            // (N,) bool: a model token (in the loss), not the environment's
  int64_t loss_tokens = 0;       // how many of the N are in the loss
  int64_t samples = 0;           // M
  int64_t max_response = 0;      // longest response, for (M, max_response) per-token tensors
  int64_t tokens_real = 0;       // non-padding tokens in ids
  int64_t tokens_processed = 0;  // B * T: positions the forward pass computes
};

/// Packs `samples` for the forward pass. With `shared_prompt`, responses with the same
/// group_id (and so the same prompt) share one copy of it: positions restart at Lp for every
/// response, and each response sees the prompt and its own earlier tokens only.
packed_batch pack_samples(const std::vector<const scored_sample*>& samples, bool shared_prompt,
                          at::Device device, bool padding_free = true);

/// Scatters per-token values (N,) of a packed batch into (M, max_response), zero elsewhere;
/// differentiable.
at::Tensor to_rows(const at::Tensor& flat, const packed_batch& b);

/// (M, max_response) bool mask of real response tokens.
at::Tensor response_mask(const packed_batch& b);

/// (M, max_response) bool mask of the tokens in the loss: the model's response tokens, without
/// padding and without an episode's environment tokens (scored_sample::loss_mask).
at::Tensor loss_mask(const packed_batch& b);

}  // namespace asyncrl
