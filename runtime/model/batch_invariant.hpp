#pragma once

// Batch-invariant CPU kernels (rollout.batch_invariant, docs/algorithms.md §19).
//
// A BLAS matmul picks its blocking, its vector path and its threads' split from the shapes,
// so row i of x @ W^T can change in its last bits with the number of rows beside it; ATen's
// elementwise exp/cos run vectorised in the body of a tensor and scalar at its tail, so a
// value's bits can depend on where it sits. The sampler sees a few rows at a time and the
// trainer thousands, so their log-probs of the same token differ by ~1e-6 (float32) to ~1e-2
// (bf16). These kernels fix the order of every sum and compute every transcendental by the
// same scalar call, so each output element depends on its own inputs only: not on the other
// rows, their number, the thread count or the element's position. Each output is computed by
// one thread, whole. Accumulation in float32 (float64 for float64 inputs); bf16 inputs are
// widened exactly and the result rounded once. CPU tensors only. Pulls in ATen.

#include <ATen/ATen.h>

#include <utility>

#include "runtime/model/segment_attention.hpp"

namespace asyncrl {

/// x (..., K) @ w (N, K)^T (+ b (N,)) -> (..., N) in x's dtype. One dot product's order: lane
/// l of 8 (4 in float64) sums the products k = l, l + 8, ... of the whole blocks, the lanes are
/// added pairwise, the K mod 8 tail follows one by one, then the bias.
at::Tensor bi_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b = {});

/// RMSNorm of each row of x (..., D): w * (x * 1 / sqrt(mean(x^2) + eps)), the statistics in
/// at least float32 and summed in index order; w in x's dtype.
at::Tensor bi_rms_norm(const at::Tensor& x, const at::Tensor& w, double eps);

/// (cos(a), sin(a)) element by element (std::cos, std::sin), in a's dtype (float or double).
std::pair<at::Tensor, at::Tensor> bi_cos_sin(const at::Tensor& angles);

/// silu(g) * u: silu = g / (1 + exp(-g)) in at least float32, rounded to g's dtype, then the
/// product in g's dtype (as ATen's silu and mul round).
at::Tensor bi_silu_mul(const at::Tensor& g, const at::Tensor& u);

/// The keys each query sees, in order: query r sees idx[ptr[r]], ..., idx[ptr[r+1] - 1].
/// Queries are numbered b * T + t. CPU int64.
struct key_lists {
  at::Tensor ptr;  // (Q + 1,)
  at::Tensor idx;  // (nnz,) key positions in [0, S)
};

/// From a bool mask (B, T, S), true = attend; keys in index order.
key_lists keys_from_mask(const at::Tensor& mask);
/// Plain causal attention of T queries that are the last T of S keys: t sees 0..t + S - T.
key_lists keys_causal(int64_t B, int64_t T, int64_t S);
/// A padding-free row's plan (B = 1): each token sees its block's prefix, then its own block's
/// earlier tokens, in the order the decoder saw them (prompt, then response).
key_lists keys_from_segments(const segment_plan& plan);

/// Softmax attention: q (B, H, T, D), k and v (B, KVH, S, D) with grouped-query heads
/// h = kv * H / KVH + g. For each query: scores q.k / sqrt(D) (dot in index order), their max,
/// exp(score - max) summed in key-list order, and sum_j p_j v_j / sum_j p_j accumulated in the
/// same order. A query with no key gets zeros. Returns (B, T, H * D) in q's dtype.
at::Tensor bi_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const key_lists& keys);

/// log softmax(logits / temperature)[token] per row: logits (N, V) float32, tokens (N,) int64,
/// temperature (N,) float32. Max, then sum of exp in vocabulary order. Returns (N,) float32.
at::Tensor bi_token_logprobs(const at::Tensor& logits, const at::Tensor& tokens,
                             const at::Tensor& temperature);

}  // namespace asyncrl
