// Per-block attention of padding-free rows (runtime/model/segment_attention.*) against a dense
// masked softmax written out here, the bucketing's work bound on hand-computed shapes, and the
// refusal of blocks that do not tile the row.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <torch/autograd.h>

#include "runtime/model/segment_attention.hpp"

using namespace asyncrl;

namespace {

// Dense reference: out[h, t] = softmax_u(q[h,t].k[kv,u] / sqrt(D) over visible u) . v[kv, u],
// kv = h / G, with visibility spelled out from the blocks.
at::Tensor dense_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const std::vector<attention_block>& blocks, int64_t T) {
  const int64_t H = q.size(1), KVH = k.size(1), D = q.size(3), G = H / KVH;
  auto visible = at::zeros({T, T}, at::kBool);
  for (const auto& b : blocks)
    for (int64_t i = 0; i < b.q_len; ++i) {
      for (int64_t j = 0; j < b.prefix_len; ++j)
        visible[b.q_begin + i][b.prefix_begin + j] = true;
      for (int64_t j = 0; j <= i; ++j)
        visible[b.q_begin + i][b.q_begin + j] = true;
    }
  std::vector<at::Tensor> heads;
  for (int64_t h = 0; h < H; ++h) {
    auto s = at::matmul(q[0][h], k[0][h / G].t()) / std::sqrt(double(D));  // (T, T)
    s = s.masked_fill(visible.logical_not(), -std::numeric_limits<double>::infinity());
    heads.push_back(at::matmul(at::softmax(s, -1), v[0][h / G]));  // (T, D)
  }
  return at::stack(heads, 1).reshape({1, T, H * D});  // (1, T, H*D)
}

// Whole sequences, a shared prompt with three responses of different lengths, a one-token
// sequence, in a scrambled order along the row.
std::vector<attention_block> mixed_blocks(int64_t* T) {
  std::vector<attention_block> b;
  b.push_back({0, 7, 0, 0});   // a whole sequence of 7
  b.push_back({7, 5, 0, 0});   // a prompt of 5 ...
  b.push_back({12, 4, 7, 5});  // ... and its responses of 4, 9 and 1
  b.push_back({16, 9, 7, 5});
  b.push_back({25, 1, 7, 5});
  b.push_back({26, 1, 0, 0});   // a one-token sequence
  b.push_back({27, 12, 0, 0});  // a longer whole sequence
  *T = 39;
  return b;
}

}  // namespace

// Catches: a causal off-by-one (query i seeing token i+1, or not itself), a prefix left out or
// shifted, grouped-query heads mapped to the wrong kv head, and rows put back out of order.
TEST(SegmentAttention, MatchesADenseMaskedSoftmaxAndItsGradients) {
  int64_t T = 0;
  auto blocks = mixed_blocks(&T);
  at::manual_seed(3);
  auto opts = at::TensorOptions().dtype(at::kDouble);
  auto q = at::randn({1, 4, T, 8}, opts).requires_grad_();
  auto k = at::randn({1, 2, T, 8}, opts).requires_grad_();
  auto v = at::randn({1, 2, T, 8}, opts).requires_grad_();
  auto w = at::randn({1, T, 32}, opts);
  for (double slack : {1.0, 1.3, 100.0}) {  // every block alone .. everything in one bucket
    SCOPED_TRACE(testing::Message() << "slack " << slack);
    auto plan = plan_segments(blocks, T, at::kCPU, slack);
    auto got = segment_attention(q, k, v, plan);
    auto want = dense_reference(q, k, v, blocks, T);
    ASSERT_EQ(got.sizes(), want.sizes());
    EXPECT_LE((got - want).abs().max().item<double>(), 1e-12);
    auto grads = [&](const at::Tensor& out) {
      return torch::autograd::grad({(out * w).sum()}, {q, k, v});
    };
    auto g1 = grads(got), g2 = grads(want);
    for (size_t i = 0; i < 3; ++i)
      EXPECT_LE((g1[i] - g2[i]).abs().max().item<double>(), 1e-12) << "input " << i;
  }
}

// The fused kernel (libtorch 2.x's scaled_dot_product_attention, the CUDA path) against the
// eager one and the dense reference, values and gradients, in float64 and float32. Catches a
// kv head repeated in the wrong order (h -> h % KVH instead of h / G), a padding query row left
// fully masked (NaN), and a mask applied transposed.
TEST(SegmentAttention, FusedKernelComputesTheEagerOne) {
  if (!fused_attention_available()) GTEST_SKIP() << "libtorch 1.x has no fused attention";
  int64_t T = 0;
  auto blocks = mixed_blocks(&T);
  for (auto dtype : {at::kDouble, at::kFloat}) {
    SCOPED_TRACE(testing::Message() << "dtype " << dtype);
    const double tol = dtype == at::kDouble ? 1e-12 : 2e-5;
    at::manual_seed(5);
    auto opts = at::TensorOptions().dtype(dtype);
    auto q = at::randn({1, 6, T, 8}, opts).requires_grad_();
    auto k = at::randn({1, 2, T, 8}, opts).requires_grad_();
    auto v = at::randn({1, 2, T, 8}, opts).requires_grad_();
    auto w = at::randn({1, T, 48}, opts);
    for (double slack : {1.0, 100.0}) {
      auto plan = plan_segments(blocks, T, at::kCPU, slack);
      auto fused = segment_attention(q, k, v, plan, attention_kernel::fused);
      auto eager = segment_attention(q, k, v, plan, attention_kernel::eager);
      auto want =
          dense_reference(q.to(at::kDouble), k.to(at::kDouble), v.to(at::kDouble), blocks, T);
      ASSERT_FALSE(fused.isnan().any().item<bool>());
      EXPECT_LE((fused.to(at::kDouble) - want).abs().max().item<double>(), tol);
      EXPECT_LE((fused - eager).abs().max().item<double>(), tol);
      auto grads = [&](const at::Tensor& out) {
        return torch::autograd::grad({(out * w).sum()}, {q, k, v});
      };
      auto gf = grads(fused), ge = grads(eager);
      for (size_t i = 0; i < 3; ++i)
        EXPECT_LE((gf[i] - ge[i]).abs().max().item<double>(), 10 * tol) << "input " << i;
    }
  }
}

// Whole sequences of 100, 90, 10, 9, 8 and 1 tokens with slack 1.3, longest first: {100, 90}
// pads 90 -> 100 (20000 <= 1.3 * 18100); adding 10 would cost 30000 > 1.3 * 18200, so
// {10, 9, 8} (300 <= 1.3 * 245) and {1} (adding it to the previous: 400 > 1.3 * 246).
TEST(SegmentAttention, BucketsKeepThePaddedWorkWithinTheSlack) {
  std::vector<int64_t> lens{10, 100, 1, 9, 90, 8};
  std::vector<attention_block> blocks;
  int64_t T = 0;
  for (auto L : lens) {
    blocks.push_back({T, L, 0, 0});
    T += L;
  }
  auto plan = plan_segments(blocks, T, at::kCPU, 1.3);
  ASSERT_EQ(plan.buckets.size(), 3u);
  EXPECT_EQ(plan.buckets[0].blocks, 2);
  EXPECT_EQ(plan.buckets[0].q_len, 100);
  EXPECT_EQ(plan.buckets[1].blocks, 3);
  EXPECT_EQ(plan.buckets[1].q_len, 10);
  EXPECT_EQ(plan.buckets[2].blocks, 1);
  EXPECT_EQ(plan.buckets[2].q_len, 1);
  EXPECT_EQ(plan.score_elements, 20000 + 300 + 1);
  EXPECT_EQ(plan.real_elements, 10000 + 8100 + 100 + 81 + 64 + 1);
  EXPECT_EQ(plan.tokens, T);
  EXPECT_EQ(plan.order.size(0), T);
}

// Shared prompt (Lp, Lr, K) = (64, 64, 8): the work is Lp^2 + K Lr (Lp + Lr), the block-sparse
// rho of the reference notes, not the dense (Lp + K Lr)^2.
TEST(SegmentAttention, SharedPromptWorkIsTheBlockSparseCount) {
  std::vector<attention_block> blocks{{0, 64, 0, 0}};
  for (int64_t k = 0; k < 8; ++k)
    blocks.push_back({64 + 64 * k, 64, 0, 64});
  auto plan = plan_segments(blocks, 64 + 8 * 64, at::kCPU);
  EXPECT_EQ(plan.real_elements, 64 * 64 + 8 * 64 * 128);
  // The prompt joins the responses' bucket with 64 empty prefix slots: 9 * 64 * 128 is within
  // 1.3 times the real work, and one batched bucket beats two.
  ASSERT_EQ(plan.buckets.size(), 1u);
  EXPECT_EQ(plan.score_elements, 9 * 64 * 128);
  EXPECT_LT(plan.score_elements, (64 + 8 * 64) * (64 + 8 * 64) / 4);
}

TEST(SegmentAttention, BlocksThatDoNotTileTheRowAreRefused) {
  auto message = [](const std::vector<attention_block>& b, int64_t T) {
    try {
      plan_segments(b, T, at::kCPU);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({{0, 3, 0, 0}, {2, 3, 0, 0}}, 5),
            "plan_segments: block 1 repeats query token 2");
  EXPECT_EQ(message({{0, 3, 0, 0}}, 5), "plan_segments: token 3 is in no block");
  EXPECT_EQ(message({{0, 3, 0, 0}, {3, 2, 4, 3}}, 5),
            "plan_segments: block 1 reaches outside the row of 5 tokens");
}
