#pragma once

// Attention over packed sequences without a dense (T, T) mask (docs/algorithms.md §11).
//
// A padding-free micro-batch is one row of T tokens holding many sequences back to back. Each
// query token belongs to one *block*: it sees a prefix in full (the shared prompt, for a
// response packed after its prompt; nothing for a whole sequence) and the earlier tokens of its
// own block. Blocks of similar shape are gathered into buckets, padded to the bucket's largest
// block and attended as a batch, so the attention work follows the real lengths: a bucket costs
// at most `slack` times the work of its blocks computed one by one. Pulls in ATen.

#include <ATen/ATen.h>

#include <vector>

namespace asyncrl {

/// Queries are tokens [q_begin, q_begin + q_len); query i sees the keys
/// [prefix_begin, prefix_begin + prefix_len) and [q_begin, q_begin + i].
struct attention_block {
  int64_t q_begin = 0, q_len = 0;
  int64_t prefix_begin = 0, prefix_len = 0;
};

/// Blocks of one shape class, padded to (blocks, q_len) queries and (blocks, k_len) keys with
/// k_len = the largest prefix + q_len; key slot j < prefix_len of block b is its prefix, slot
/// (largest prefix + i) is its own token i.
struct attention_bucket {
  at::Tensor q_idx;  // (blocks * q_len,) int64 token of each query slot (0 for padding)
  at::Tensor k_idx;  // (blocks * k_len,) int64 token of each key slot (0 for padding)
  at::Tensor mask;   // (blocks, 1, 1, q_len, k_len) bool, true = attend
  at::Tensor keep;   // (real queries,) int64 query slots holding a real token, in slot order
  int64_t blocks = 0, q_len = 0, k_len = 0;
};

struct segment_plan {
  std::vector<attention_bucket> buckets;
  at::Tensor order;    // (T,) int64: row of token t among the buckets' kept queries, concatenated
  int64_t tokens = 0;  // T
  int64_t score_elements = 0;  // sum over buckets of blocks * q_len * k_len (per head)
  int64_t real_elements = 0;   // sum over blocks of q_len * (prefix_len + q_len)

  bool empty() const { return buckets.empty(); }
};

/// Groups `blocks` (their queries must cover [0, T) exactly once) into buckets whose padded
/// work stays within `slack` times their real work, and builds the index tensors on `device`.
/// Throws std::invalid_argument on blocks that overlap, leave a token out or reach past T.
segment_plan plan_segments(const std::vector<attention_block>& blocks, int64_t T, at::Device device,
                           double slack = 1.3);

/// How each bucket's attention is computed. `eager`: matmul, masked float32 softmax, matmul
/// (scores materialised). `fused`: libtorch 2.x's scaled_dot_product_attention with the
/// bucket's mask (the memory-efficient kernel on CUDA: no scores in memory, one launch).
/// `automatic`: fused on CUDA where libtorch has it, eager elsewhere (the CPU path).
enum class attention_kernel : uint8_t { automatic, eager, fused };

/// Whether this libtorch has scaled_dot_product_attention (2.x).
bool fused_attention_available();

/// Scaled dot-product attention of one packed row. q: (1, H, T, D); k, v: (1, KVH, T, D) with
/// H a multiple of KVH (grouped-query heads h = kv * H/KVH + g). Returns (1, T, H * D);
/// differentiable in q, k and v. Both kernels compute the same function (tested against each
/// other and a dense reference); `fused` throws where fused_attention_available() is false.
at::Tensor segment_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const segment_plan& plan,
                             attention_kernel kernel = attention_kernel::automatic);

}  // namespace asyncrl
