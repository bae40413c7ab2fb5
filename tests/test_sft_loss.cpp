// sft_loss: the batched, padded loss against each example's own forward pass.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "runtime/model/model.hpp"
#include "runtime/train/sft_loss.hpp"
#include "tests/tiny_model.hpp"

using namespace asyncrl;

namespace {

TEST(SftLoss, IsTheTokenMeanOfResponseCrossEntropyOverThePaddedBatch) {
  auto model = init_causal_lm(test::tiny_model_config(), 0.3, 5, torch::kCPU);
  torch::NoGradGuard ng;
  // Different lengths, so the shorter one is padded; prompts of 3 and 2 tokens.
  sft_example a{{1, 5, 6, 7, 8, 2}, 3}, b{{1, 9, 10, 2}, 2};
  auto [loss, count] = sft_loss(*model, {&a, &b}, torch::kCPU);
  EXPECT_EQ(count, 3 + 2);  // targets at or after the prompt: a: 7 8 2, b: 10 2

  // Reference: each example alone, -log p of every response token, summed, over the count.
  double sum = 0;
  for (const auto* e : {&a, &b}) {
    const auto n = static_cast<int64_t>(e->seq.size());
    std::vector<int64_t> seq(e->seq.begin(), e->seq.end());
    auto ids = torch::tensor(seq, torch::kLong).unsqueeze(0);
    auto logp = torch::log_softmax(model->forward(ids, torch::arange(n).unsqueeze(0)), -1)[0];
    for (int64_t t = e->prompt_len - 1; t + 1 < n; ++t)
      sum -= logp[t][seq[t + 1]].item<double>();
  }
  // float32 forward passes of different batch shapes: agree to 1e-5 relative.
  EXPECT_NEAR(loss.item<double>(), sum / 5, 1e-5 * sum / 5);
}

}  // namespace
