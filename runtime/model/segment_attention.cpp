#include "runtime/model/segment_attention.hpp"

#include "runtime/model/precision.hpp"

#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

namespace asyncrl {

namespace {

int64_t real_work(const attention_block& b) {
  return b.q_len * (b.prefix_len + b.q_len);
}

at::Tensor long_tensor(const std::vector<int64_t>& v, at::Device d) {
  return at::tensor(v, at::TensorOptions().dtype(at::kLong)).to(d);
}

void check_blocks(const std::vector<attention_block>& blocks, int64_t T) {
  std::vector<int> seen(static_cast<size_t>(T), 0);
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto& b = blocks[i];
    auto where = "plan_segments: block " + std::to_string(i);
    if (b.q_len < 0 || b.prefix_len < 0 || b.q_begin < 0 || b.prefix_begin < 0 ||
        b.q_begin + b.q_len > T || b.prefix_begin + b.prefix_len > T)
      throw std::invalid_argument(where + " reaches outside the row of " + std::to_string(T) +
                                  " tokens");
    for (int64_t t = b.q_begin; t < b.q_begin + b.q_len; ++t)
      if (seen[t]++)
        throw std::invalid_argument(where + " repeats query token " + std::to_string(t));
  }
  for (int64_t t = 0; t < T; ++t)
    if (!seen[t])
      throw std::invalid_argument("plan_segments: token " + std::to_string(t) + " is in no block");
}

// Builds one bucket from blocks `ids`; appends the tokens of its kept queries to `kept_tokens`.
attention_bucket make_bucket(const std::vector<attention_block>& blocks,
                             const std::vector<size_t>& ids, at::Device device,
                             std::vector<int64_t>& kept_tokens) {
  int64_t Lq = 0, P = 0;
  for (auto i : ids) {
    Lq = std::max(Lq, blocks[i].q_len);
    P = std::max(P, blocks[i].prefix_len);
  }
  const int64_t nb = static_cast<int64_t>(ids.size()), Lk = P + Lq;
  std::vector<int64_t> q_idx(nb * Lq, 0), k_idx(nb * Lk, 0), keep;
  std::vector<uint8_t> mask(nb * Lq * Lk, 0);
  for (int64_t s = 0; s < nb; ++s) {
    const auto& b = blocks[ids[s]];
    for (int64_t j = 0; j < b.prefix_len; ++j)
      k_idx[s * Lk + j] = b.prefix_begin + j;
    for (int64_t i = 0; i < b.q_len; ++i) {
      q_idx[s * Lq + i] = b.q_begin + i;
      k_idx[s * Lk + P + i] = b.q_begin + i;
      keep.push_back(s * Lq + i);
      kept_tokens.push_back(b.q_begin + i);
      uint8_t* row = &mask[(s * Lq + i) * Lk];
      std::fill(row, row + b.prefix_len, 1);
      std::fill(row + P, row + P + i + 1, 1);
    }
    // Padding queries see nothing: their rows come out uniform (not NaN) and are dropped.
  }
  attention_bucket out;
  out.q_idx = long_tensor(q_idx, device);
  out.k_idx = long_tensor(k_idx, device);
  out.mask = at::tensor(mask, at::TensorOptions().dtype(at::kByte))
                 .view({nb, 1, 1, Lq, Lk})
                 .to(at::kBool)
                 .to(device);
  out.keep = long_tensor(keep, device);
  out.blocks = nb;
  out.q_len = Lq;
  out.k_len = Lk;
  return out;
}

}  // namespace

segment_plan plan_segments(const std::vector<attention_block>& blocks, int64_t T, at::Device device,
                           double slack) {
  check_blocks(blocks, T);
  // Largest prefix first, then longest: neighbours in this order have similar shapes.
  std::vector<size_t> order;
  for (size_t i = 0; i < blocks.size(); ++i)
    if (blocks[i].q_len > 0) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (blocks[a].prefix_len != blocks[b].prefix_len)
      return blocks[a].prefix_len > blocks[b].prefix_len;
    return blocks[a].q_len > blocks[b].q_len;
  });
  segment_plan plan;
  plan.tokens = T;
  std::vector<int64_t> kept_tokens;
  std::vector<size_t> cur;
  int64_t cur_q = 0, cur_p = 0, cur_real = 0;
  auto flush = [&] {
    if (cur.empty()) return;
    auto b = make_bucket(blocks, cur, device, kept_tokens);
    plan.score_elements += b.blocks * b.q_len * b.k_len;
    plan.buckets.push_back(std::move(b));
    cur.clear();
  };
  for (auto i : order) {
    const auto& b = blocks[i];
    plan.real_elements += real_work(b);
    const int64_t q = std::max(cur_q, b.q_len), p = std::max(cur_p, b.prefix_len);
    const int64_t n = static_cast<int64_t>(cur.size()) + 1;
    const int64_t real = cur_real + real_work(b);
    if (!cur.empty() && double(n * q * (p + q)) > slack * double(real)) {
      flush();
      cur = {i};
      cur_q = b.q_len;
      cur_p = b.prefix_len;
      cur_real = real_work(b);
    } else {
      cur.push_back(i);
      cur_q = q;
      cur_p = p;
      cur_real = real;
    }
  }
  flush();
  std::vector<int64_t> row_of(static_cast<size_t>(T), 0);
  for (size_t r = 0; r < kept_tokens.size(); ++r)
    row_of[kept_tokens[r]] = static_cast<int64_t>(r);
  plan.order = long_tensor(row_of, device);
  return plan;
}

bool fused_attention_available() {
#if TORCH_VERSION_MAJOR >= 2
  return true;
#else
  return false;
#endif
}

namespace {

// One bucket through scaled_dot_product_attention. qb: (nb, H, Lq, D); kb, vb: (nb, KVH, Lk,
// D). Returns (nb, H, Lq, D).
at::Tensor fused_bucket(const at::Tensor& qb, const at::Tensor& kb, const at::Tensor& vb,
                        const attention_bucket& b) {
#if TORCH_VERSION_MAJOR >= 2
  const int64_t G = qb.size(1) / kb.size(1);
  // Query head h reads kv head h / G: repeat each kv head G times in place.
  auto k = G == 1 ? kb : kb.repeat_interleave(G, 1);  // (nb, H, Lk, D)
  auto v = G == 1 ? vb : vb.repeat_interleave(G, 1);
  // (nb, 1, Lq, Lk). Padding queries see nothing; a fully masked row is NaN in some kernels,
  // so they see key slot 0 instead (their outputs are dropped either way, and so is any
  // gradient through them).
  auto mask = b.mask.squeeze(1);
  auto blind = mask.any(-1, /*keepdim=*/true).logical_not();  // (nb, 1, Lq, 1)
  auto first = at::zeros({b.k_len}, mask.options());
  first[0] = true;
  mask = mask.logical_or(blind.logical_and(first));
  return at::scaled_dot_product_attention(qb, k, v, mask);
#else
  (void)qb, (void)kb, (void)vb, (void)b;
  throw std::logic_error("segment_attention: fused attention needs libtorch 2.x");
#endif
}

}  // namespace

at::Tensor segment_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const segment_plan& plan, attention_kernel kernel) {
  if (kernel == attention_kernel::automatic)
    kernel = q.is_cuda() && fused_attention_available() ? attention_kernel::fused
                                                        : attention_kernel::eager;
  TORCH_CHECK(q.dim() == 4 && q.size(0) == 1 && k.size(0) == 1 && v.size(0) == 1,
              "segment_attention: expects one packed row, got q ", q.sizes());
  TORCH_CHECK(q.size(2) == plan.tokens, "segment_attention: the plan is for ", plan.tokens,
              " tokens, the row has ", q.size(2));
  const int64_t H = q.size(1), KVH = k.size(1), D = q.size(3), G = H / KVH;
  const auto qt = q.squeeze(0), kt = k.squeeze(0), vt = v.squeeze(0);  // (heads, T, D)
  const float lowest = std::numeric_limits<float>::lowest();
  const double scale = std::sqrt(double(D));
  std::vector<at::Tensor> parts;
  for (const auto& b : plan.buckets) {
    const int64_t nb = b.blocks, Lq = b.q_len, Lk = b.k_len;
    // (H, nb*Lq, D) -> (nb, H, Lq, D) -> (nb, KVH, G*Lq, D): query heads of one kv head together
    auto qb = qt.index_select(1, b.q_idx).view({H, nb, Lq, D}).permute({1, 0, 2, 3});
    auto kb = kt.index_select(1, b.k_idx).view({KVH, nb, Lk, D}).permute({1, 0, 2, 3});
    auto vb = vt.index_select(1, b.k_idx).view({KVH, nb, Lk, D}).permute({1, 0, 2, 3});
    if (kernel == attention_kernel::fused) {
      auto out = fused_bucket(qb, kb, vb, b)  // (nb, H, Lq, D)
                     .permute({0, 2, 1, 3})   // (nb, Lq, H, D)
                     .reshape({nb * Lq, H * D});
      parts.push_back(out.index_select(0, b.keep));
      continue;
    }
    qb = qb.reshape({nb, KVH, G * Lq, D});
    // Scores, mask and softmax in at least float32; probs back in the values' dtype.
    auto scores =
        at_least_float(at::matmul(qb, kb.transpose(-1, -2))) / scale;  // (nb, KVH, G*Lq, Lk)
    scores = scores.view({nb, KVH, G, Lq, Lk}).masked_fill(b.mask.logical_not(), lowest);
    auto probs = at::softmax(scores, -1).to(vb.scalar_type()).view({nb, KVH, G * Lq, Lk});
    auto out = at::matmul(probs, vb)       // (nb, KVH, G*Lq, D)
                   .view({nb, H, Lq, D})   // heads h = kv * G + g
                   .permute({0, 2, 1, 3})  // (nb, Lq, H, D)
                   .reshape({nb * Lq, H * D});
    parts.push_back(out.index_select(0, b.keep));  // (real queries, H*D)
  }
  return at::cat(parts, 0).index_select(0, plan.order).unsqueeze(0);  // (1, T, H*D)
}

}  // namespace asyncrl
