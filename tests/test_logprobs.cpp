// token_logprobs against hand-computed log-softmax values.

#include <gtest/gtest.h>

#include <cmath>

#include "runtime/generation/sampler.hpp"
#include "runtime/model/logprobs.hpp"

using namespace asyncrl;

namespace {

// Logits log(p) + c have log-softmax log(p) whatever the shift c, so each row's answer is
// known by hand: rows are (1/2, 1/4, 1/4), (1/3, 1/3, 1/3), (1/8, 1/8, 3/4), (0.1, 0.2, 0.7).
at::Tensor hand_logits(at::ScalarType dtype) {
  std::vector<double> p = {0.5,   0.25,  0.25, 1. / 3, 1. / 3, 1. / 3,
                           0.125, 0.125, 0.75, 0.1,    0.2,    0.7};
  std::vector<double> shift = {0.0, 5.0, -3.0, 100.0};  // a large shift tests stability
  std::vector<double> l;
  for (size_t i = 0; i < p.size(); ++i)
    l.push_back(std::log(p[i]) + shift[i / 3]);
  return at::tensor(l, at::kDouble).view({2, 2, 3}).to(dtype);  // (B=2, T=2, V=3)
}

TEST(TokenLogprobs, MatchesHandComputedLogSoftmaxOnBTV) {
  auto tokens = at::tensor({0, 2, 2, 1}, at::kLong).view({2, 2});  // (B, T)
  const double want[4] = {std::log(0.5), std::log(1. / 3), std::log(0.75), std::log(0.2)};
  // float64: to 1e-12 (the inputs carry rounding of ~1e-16 relative, shifts of up to 100).
  auto lp64 = token_logprobs(hand_logits(at::kDouble), tokens);
  ASSERT_EQ(lp64.sizes(), (at::IntArrayRef{2, 2}));
  EXPECT_EQ(lp64.scalar_type(), at::kDouble);
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(lp64.view(-1)[i].item<double>(), want[i], 1e-12) << i;
  // float32: no upcast, so float32 out, to 1e-5 (float32 logits near 100 round to ~4e-6).
  auto lp32 = token_logprobs(hand_logits(at::kFloat), tokens);
  EXPECT_EQ(lp32.scalar_type(), at::kFloat);
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(lp32.view(-1)[i].item<double>(), want[i], 1e-5) << i;
}

TEST(TokenLogprobs, RowsOfNVMatchTheSamplersTemperatureOne) {
  auto logits = hand_logits(at::kFloat).view({4, 3});  // (N, V)
  auto tokens = at::tensor({1, 0, 2, 2}, at::kLong);   // (N,)
  auto lp = token_logprobs(logits, tokens);
  ASSERT_EQ(lp.sizes(), (at::IntArrayRef{4}));
  EXPECT_TRUE(lp.equal(token_logprobs(logits, tokens, /*temperature=*/1.0)));  // bitwise
  EXPECT_NEAR(lp[0].item<double>(), std::log(0.25), 1e-5);
}

}  // namespace
