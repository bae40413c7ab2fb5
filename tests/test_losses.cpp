// Each formula of the RL objective against hand-derived values (tolerances stated per check).

#include <gtest/gtest.h>
#include <torch/nn/module.h>

#include <cmath>
#include <random>

#include "runtime/train/advantages.hpp"
#include "runtime/train/losses.hpp"

using namespace asyncrl;
using namespace asyncrl::rl;

namespace {

at::Tensor t1(std::vector<double> v) {
  return at::tensor(v, at::kDouble);
}

at::Tensor flags(std::vector<int> v) {
  return at::tensor(v, at::kInt).to(at::kBool);
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Advantages, GrpoUsesTheUnbiasedStd) {
  // rewards 1,0,0,1: mean 1/2, unbiased std sqrt(1/3).
  auto a = group_advantages(t1({1, 0, 0, 1}).unsqueeze(0));
  const double want = 0.5 / (std::sqrt(1.0 / 3.0) + 1e-6);
  EXPECT_NEAR(a[0][0].item<double>(), want, 1e-12);
  EXPECT_NEAR(a[0][1].item<double>(), -want, 1e-12);
  // Two groups are normalised separately: 2,4 -> mean 3, std sqrt(2).
  auto b = group_advantages(t1({2, 4, 0, 0}).view({2, 2}));
  EXPECT_NEAR(b[0][1].item<double>(), 1.0 / (std::sqrt(2.0) + 1e-6), 1e-12);
  EXPECT_EQ(b[1][0].item<double>(), 0.0);
}

TEST(Advantages, DrGrpoSkipsTheStd) {
  auto a = group_advantages(t1({1, 0, 0, 0}).unsqueeze(0), /*divide_by_std=*/false);
  EXPECT_DOUBLE_EQ(a[0][0].item<double>(), 0.75);
  EXPECT_DOUBLE_EQ(a[0][3].item<double>(), -0.25);
}

TEST(Advantages, ZeroVarianceGroupGetsZeroAndIsFlagged) {
  auto r = t1({1, 1, 1, 0.3, 0.7, 0.3}).view({2, 3});
  auto a = group_advantages(r);
  EXPECT_TRUE(a[0].eq(0).all().item<bool>());
  auto z = zero_variance_groups(r);
  EXPECT_TRUE(z[0].item<bool>());
  EXPECT_FALSE(z[1].item<bool>());

  scored_group g;
  g.samples.resize(3);
  for (auto& s : g.samples)
    s.reward = 1.0;
  EXPECT_FALSE(assign_advantages(g, advantage_estimator::grpo, /*filter=*/true));
  EXPECT_TRUE(assign_advantages(g, advantage_estimator::grpo, /*filter=*/false));
  for (auto& s : g.samples)
    EXPECT_EQ(s.advantage, 0.0);
}

TEST(Advantages, GroupOfOneKeepsItsReward) {
  // verl: a group of one has mean 0 and std 1.
  auto a = group_advantages(t1({0.7}).view({1, 1}));
  EXPECT_NEAR(a[0][0].item<double>(), 0.7 / (1 + 1e-6), 1e-12);
}

TEST(Advantages, AssignAdvantagesEqualsTheTensorFormula) {
  // The reward actor's plain-loop advantages against rl::group_advantages (the torch
  // reference) on 400 random groups: sizes 1..9, binary, continuous and constant rewards, both
  // estimators. Catches a biased std (N instead of N - 1), a missing eps, a mean over the wrong
  // count, or a zero-variance flag that differs from zero_variance_groups.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-3, 3);
  int flagged = 0;
  for (int t = 0; t < 400; ++t) {
    const int n = 1 + t % 9;
    std::vector<double> r(n);
    for (auto& x : r)
      x = t % 4 == 0 ? double(rng() % 2) : t % 4 == 1 ? 0.25 : u(rng);
    for (auto est : {advantage_estimator::grpo, advantage_estimator::drgrpo}) {
      scored_group g;
      g.samples.resize(n);
      for (int i = 0; i < n; ++i)
        g.samples[i].reward = r[i];
      const bool kept = assign_advantages(g, est, /*filter=*/true);
      auto want = group_advantages(t1(r).unsqueeze(0), est == advantage_estimator::grpo);
      for (int i = 0; i < n; ++i)
        ASSERT_NEAR(g.samples[i].advantage, want[0][i].item<double>(),
                    1e-12 * (1 + std::abs(g.samples[i].advantage)))
            << "group " << t << " sample " << i;
      const bool zero = n > 1 && zero_variance_groups(t1(r).unsqueeze(0))[0].item<bool>();
      EXPECT_EQ(kept, !zero) << "group " << t;
      flagged += zero;
    }
  }
  EXPECT_GT(flagged, 0);  // the constant groups were really flagged
}

TEST(Surrogate, ClipsAsymmetricallyAndDualClips) {
  clip_config c{0.2, 0.28, 3.0};
  // log-ratio 0.5 (ratio e^0.5 = 1.6487): A = +1 clips at 1.28; A = -1 takes -A r = 1.6487.
  // log-ratio log 5 with A = -1: 5 > c = 3, so the dual clip gives 3.
  // log-ratio -0.5 (0.6065) with A = +1: unclipped would be -0.6065, clip at 0.8 -> max is -0.6065.
  auto lr = t1({0.5, 0.5, std::log(5.0), -0.5});
  auto adv = t1({1, -1, -1, 1});
  auto s = clipped_surrogate(lr, adv, c);
  EXPECT_NEAR(s.loss[0].item<double>(), -1.28, 1e-12);
  EXPECT_NEAR(s.loss[1].item<double>(), std::exp(0.5), 1e-12);
  EXPECT_NEAR(s.loss[2].item<double>(), 3.0, 1e-12);
  EXPECT_NEAR(s.loss[3].item<double>(), -std::exp(-0.5), 1e-12);
  EXPECT_TRUE(s.clipped[0].item<bool>());
  EXPECT_FALSE(s.clipped[1].item<bool>());
  EXPECT_FALSE(s.clipped[2].item<bool>());  // dual-clipped, counted apart (verl)
  EXPECT_FALSE(s.clipped[3].item<bool>());
  EXPECT_TRUE(s.dual_clipped.equal(flags({0, 0, 1, 0})));
  // Without the dual clip the third token pays the full 5.
  auto s2 = clipped_surrogate(lr, adv, clip_config{0.2, 0.28, 0.0});
  EXPECT_NEAR(s2.loss[2].item<double>(), 5.0, 1e-12);
  // The log-ratio is clamped to [-20, 20] before exp.
  auto s3 = clipped_surrogate(t1({100.0}), t1({-1.0}), clip_config{0.2, 0.2, 0.0});
  EXPECT_NEAR(s3.ratio[0].item<double>(), std::exp(20.0), 1e-3);
}

// verl's pg_clipfrac and pg_clipfrac_lower: the clipped PPO term active (-clip(r) A > -r A)
// and, apart from it, the dual clip -c A applied to an A < 0 token. Both over kept tokens.
TEST(Surrogate, ClipFractionsCountTheDualClipApart) {
  // ratio, advantage -> clipped PPO loss max(-rA, -clip(r)A), then min with -cA (c = 3) for A < 0
  //  1.5, +1 -> max(-1.5, -1.2) = -1.2: clipped term active        -> clip_frac
  //  5.0, -1 -> max(5, 1.2) = 5 > 3: dual clip gives 3              -> clip_frac_lower
  //  0.5, -1 -> max(0.5, 0.8) = 0.8 < 3: clipped term active        -> clip_frac
  //  1.0, +1 -> -1: neither;  1.0, -1 -> 1: neither
  //  2.0, -1 -> max(2, 1.2) = 2 < 3: unclipped (r A is the larger) -> neither
  //  1.5, +1 but masked out: counted nowhere
  auto ratio = t1({1.5, 5.0, 0.5, 1.0, 1.0, 2.0, 1.5});
  auto adv = t1({1, -1, -1, 1, -1, -1, 1});
  auto mask = flags({1, 1, 1, 1, 1, 1, 0});
  const clip_config c{0.2, 0.2, 3.0};
  auto s = clipped_surrogate(at::log(ratio), adv, c);
  EXPECT_TRUE(s.clipped.equal(flags({1, 0, 1, 0, 0, 0, 1})));
  EXPECT_TRUE(s.dual_clipped.equal(flags({0, 1, 0, 0, 0, 0, 0})));

  loss_inputs in;
  in.logp = at::log(ratio) - 1.0, in.logp_old = at::full({7}, -1.0, at::kDouble);
  in.advantages = adv, in.mask = mask, in.norm = 6;
  loss_config cfg;
  cfg.clip = c;
  auto st = policy_loss(in, cfg).stats;
  EXPECT_EQ(st.tokens, 6.0);
  EXPECT_EQ(st.kept_tokens, 6.0);
  EXPECT_EQ(st.clipped, 2.0);  // tokens 0 and 2: the dual-clipped token 1 is not among them
  EXPECT_EQ(st.dual_clipped, 1.0);

  // Decoupled: the same flags from r = exp(logp - prox); the weight cap removes token 0
  // (w = e^2 > 5) from both counts and from the kept-token denominator.
  in.logp_prox = in.logp_old;
  in.logp_behav = t1({-3, -1, -1, -1, -1, -1, -1});
  cfg.loss = loss_kind::decoupled;
  cfg.imp_weight_cap = 5.0;
  auto sd = policy_loss(in, cfg).stats;
  EXPECT_EQ(sd.kept_tokens, 5.0);
  EXPECT_EQ(sd.clipped, 1.0);
  EXPECT_EQ(sd.dual_clipped, 1.0);
}

TEST(KlK3, MatchesTheFormulaAndIsNonNegative) {
  // x = logp_ref - logp = 1: e - 2.
  EXPECT_NEAR(kl_k3(t1({-2.0}), t1({-1.0}))[0].item<double>(), std::exp(1.0) - 2.0, 1e-12);
  // x = -0.5: e^-0.5 + 0.5 - 1.
  EXPECT_NEAR(kl_k3(t1({-1.0}), t1({-1.5}))[0].item<double>(), std::exp(-0.5) - 0.5, 1e-12);
  EXPECT_EQ(kl_k3(t1({-1.0}), t1({-1.0}))[0].item<double>(), 0.0);
  // The value is clamped to 10: x = 5 gives e^5 - 6 = 142.4 -> 10.
  EXPECT_EQ(kl_k3(t1({-6.0}), t1({-1.0}))[0].item<double>(), 10.0);
  at::manual_seed(0);
  auto a = at::randn({1000}, at::kDouble), b = at::randn({1000}, at::kDouble);
  EXPECT_TRUE((kl_k3(a, b) >= 0).all().item<bool>());
}

TEST(Loglinear, AlphaIsOneOverStaleness) {
  auto a = loglinear_alpha(at::tensor({0, 1, 2, 4}, at::kInt));
  EXPECT_EQ(a[0].item<float>(), 0.0f);
  EXPECT_EQ(a[1].item<float>(), 1.0f);
  EXPECT_EQ(a[2].item<float>(), 0.5f);
  EXPECT_EQ(a[3].item<float>(), 0.25f);
  EXPECT_NE(error_of([] { loglinear_alpha(at::tensor({-1}, at::kInt)); }).find("staleness"),
            std::string::npos);
}

// alpha = 1/d in the dtype of logp: float32's 1/3 is 1e-8 off, which a float64 trainer sees.
TEST(Loglinear, Float64AlphaIsExactInDouble) {
  auto d = at::tensor({3, 1, 2, 5, 7, 0}, at::kInt);
  auto behav = t1({-1.0, -1.0, -1.0, -0.7, -0.3, -1.0});
  auto logp = t1({-2.5, -2.5, -2.5, -1.9, -4.1, -2.5});
  auto prox = loglinear_prox(behav, logp, d);
  ASSERT_EQ(prox.scalar_type(), at::kDouble);
  const double want[] = {(1.0 / 3) * -1.0 + (1 - 1.0 / 3) * -2.5,  // -2.0
                         -1.0,
                         0.5 * -1.0 + 0.5 * -2.5,
                         (1.0 / 5) * -0.7 + (1 - 1.0 / 5) * -1.9,
                         (1.0 / 7) * -0.3 + (1 - 1.0 / 7) * -4.1,
                         -2.5};
  for (int i = 0; i < 6; ++i)
    EXPECT_NEAR(prox[i].item<double>(), want[i], 1e-15) << "d = " << d[i].item<int>();
  EXPECT_EQ(loglinear_alpha(d, at::kDouble)[0].item<double>(), 1.0 / 3.0);
  EXPECT_EQ(loglinear_alpha(d, at::kDouble).scalar_type(), at::kDouble);
  // float32 logp keeps a float32 prox.
  EXPECT_EQ(loglinear_prox(behav.to(at::kFloat), logp.to(at::kFloat), d).scalar_type(), at::kFloat);
}

TEST(Loglinear, ProxIsSandwichedAndTheRatioIsAPower) {
  at::manual_seed(1);
  auto behav = -at::rand({4000}, at::kDouble) * 5;
  auto theta = -at::rand({4000}, at::kDouble) * 5;
  auto d = at::randint(0, 6, {4000}, at::kInt);
  auto prox = loglinear_prox(behav, theta, d);
  auto lo = at::minimum(behav, theta), hi = at::maximum(behav, theta);
  // Sandwich: pi_prox lies between pi_behav and pi_theta (exactly, in log space).
  EXPECT_TRUE((prox >= lo - 1e-12).logical_and(prox <= hi + 1e-12).all().item<bool>());
  // r = exp(logp_theta - logp_prox) = (pi_theta / pi_behav)^alpha.
  auto alpha = loglinear_alpha(d, at::kDouble);
  auto r = at::exp(theta - prox);
  auto want = at::pow(at::exp(theta) / at::exp(behav), alpha);
  EXPECT_TRUE(at::allclose(r, want, 1e-10, 1e-12));
  // d = 0 gives the current policy; d = 1 the behaviour policy.
  auto zero = d == 0, one = d == 1;
  EXPECT_TRUE(prox.masked_select(zero).equal(theta.masked_select(zero)));
  EXPECT_TRUE(prox.masked_select(one).equal(behav.masked_select(one)));
}

// With d = 0 everywhere the decoupled loss with loglinear prox equals the coupled loss, in value
// and gradient: prox = logp (detached), so r = 1 and w = the coupled ratio.
TEST(Decoupled, OnPolicyLoglinearEqualsCoupled) {
  at::manual_seed(2);
  for (double drift : {0.0, 1e-3}) {
    auto base = -at::rand({3, 7}, at::kDouble) * 3;
    auto behav = base + drift * at::randn({3, 7}, at::kDouble);
    auto adv = at::randn({3, 7}, at::kDouble);
    auto mask = at::rand({3, 7}) > 0.2;
    auto d = at::zeros({3, 7}, at::kInt);
    auto lp1 = base.clone().set_requires_grad(true);
    auto lp2 = base.clone().set_requires_grad(true);
    loss_config cc, dc;
    dc.loss = loss_kind::decoupled;
    loss_inputs a;
    a.logp = lp1, a.logp_old = behav, a.advantages = adv, a.mask = mask, a.norm = 11;
    loss_inputs b;
    b.logp = lp2, b.logp_behav = behav, b.advantages = adv, b.mask = mask, b.norm = 11;
    b.logp_prox = loglinear_prox(behav, lp2, d);
    auto la = policy_loss(a, cc).loss;
    auto lb = policy_loss(b, dc).loss;
    la.backward();
    lb.backward();
    if (drift == 0.0) {
      EXPECT_EQ(la.item<double>(), lb.item<double>());
      EXPECT_TRUE(lp1.grad().equal(lp2.grad()));
    } else {  // ratios within 1e-2 of 1: inside the clip range, so equal up to rounding
      EXPECT_NEAR(la.item<double>(), lb.item<double>(), 1e-14);
      EXPECT_TRUE(at::allclose(lp1.grad(), lp2.grad(), 0, 1e-14));
    }
  }
}

TEST(Decoupled, WeightCapMasksAndCounts) {
  // w = exp(prox - behav): 1, e^2 = 7.39, e^0.5 = 1.65; cap 5 masks the second token.
  auto logp = t1({-1, -1, -1}).set_requires_grad(true);
  auto prox = t1({-1, -1, -1});
  auto behav = t1({-1, -3, -1.5});
  auto adv = t1({1, 1, 1});
  auto t = decoupled_surrogate(logp, prox, behav, adv, clip_config{}, 5.0);
  EXPECT_FALSE(t.kept[1].item<bool>());
  EXPECT_EQ(t.loss[1].item<double>(), 0.0);
  // Unmasked tokens: r = 1, L = -w A.
  EXPECT_NEAR(t.loss[2].item<double>(), -std::exp(0.5), 1e-12);
  loss_inputs in;
  in.logp = logp, in.logp_prox = prox, in.logp_behav = behav, in.advantages = adv;
  in.mask = at::ones({3}, at::kBool), in.norm = 3;
  loss_config c;
  c.loss = loss_kind::decoupled;
  c.imp_weight_cap = 5.0;
  auto out = policy_loss(in, c);
  EXPECT_EQ(out.stats.tokens, 3);
  EXPECT_EQ(out.stats.kept_tokens, 2);
  EXPECT_NEAR(out.stats.weight_max, std::exp(2.0), 1e-12);
  EXPECT_NEAR(out.loss.item<double>(), (-1.0 - std::exp(0.5)) / 3.0, 1e-12);
}

TEST(Aggregate, TokenMeanAndSeqMeanWithAFullyMaskedRow) {
  auto x = t1({1, 2, 3, 4, 5, 6, 7, 8, 9}).view({3, 3});
  auto mask = at::tensor({1, 1, 0, 0, 0, 0, 1, 1, 1}, at::kInt).to(at::kBool).view({3, 3});
  // token-mean: (1 + 2 + 7 + 8 + 9) / norm; seq-mean: (1.5 + 0 + 8) / norm. No NaN from row 2.
  EXPECT_DOUBLE_EQ(aggregate(x, mask, loss_aggregation::token_mean, 5).item<double>(), 27.0 / 5);
  EXPECT_DOUBLE_EQ(aggregate(x, mask, loss_aggregation::seq_mean, 3).item<double>(), 9.5 / 3);
  // Micro-batches scaled by the batch total add up to the full batch.
  auto full = aggregate(x, mask, loss_aggregation::token_mean, 5);
  auto parts = aggregate(x.narrow(0, 0, 1), mask.narrow(0, 0, 1), loss_aggregation::token_mean, 5) +
               aggregate(x.narrow(0, 1, 2), mask.narrow(0, 1, 2), loss_aggregation::token_mean, 5);
  EXPECT_DOUBLE_EQ(full.item<double>(), parts.item<double>());
  // A fully masked micro-batch contributes exactly zero.
  EXPECT_EQ(aggregate(x.narrow(0, 1, 1), mask.narrow(0, 1, 1), loss_aggregation::seq_mean, 3)
                .item<double>(),
            0.0);
}

TEST(PolicyLoss, WrongShapesAndEmptyBatchesAreClearErrors) {
  loss_inputs in;
  in.logp = at::zeros({2, 3}, at::kDouble);
  in.logp_old = at::zeros({2, 4}, at::kDouble);
  in.advantages = at::zeros({2, 3}, at::kDouble);
  in.mask = at::ones({2, 3}, at::kBool);
  in.norm = 6;
  auto msg = error_of([&] { policy_loss(in, loss_config{}); });
  EXPECT_NE(msg.find("logp_old has shape (2, 4) but logp has (2, 3)"), std::string::npos) << msg;
  in.logp = at::zeros({0, 3}, at::kDouble);
  msg = error_of([&] { policy_loss(in, loss_config{}); });
  EXPECT_NE(msg.find("empty batch"), std::string::npos) << msg;
  msg = error_of([] { group_advantages(at::zeros({4}, at::kDouble)); });
  EXPECT_NE(msg.find("rewards must be (num_groups, G), got (4)"), std::string::npos) << msg;
  in.logp = at::zeros({2, 3}, at::kDouble);
  in.logp_old = at::zeros({2, 3}, at::kDouble);
  in.norm = 0;
  msg = error_of([&] { policy_loss(in, loss_config{}); });
  EXPECT_NE(msg.find("norm"), std::string::npos) << msg;
}

// Autograd against central finite differences, float64, inputs away from the clip kinks.
TEST(PolicyLoss, GradientMatchesFiniteDifferences) {
  at::manual_seed(3);
  const int n = 12;
  auto base = -0.5 - at::rand({2, n / 2}, at::kDouble);
  auto old = base + 0.05 * at::randn({2, n / 2}, at::kDouble);  // ratios well inside the clip
  auto ref = base + 0.3 * at::randn({2, n / 2}, at::kDouble);
  auto adv = at::randn({2, n / 2}, at::kDouble);
  auto mask = at::ones({2, n / 2}, at::kBool);
  mask[1][5] = false;
  for (auto loss : {loss_kind::grpo, loss_kind::decoupled})
    for (auto agg : {loss_aggregation::token_mean, loss_aggregation::seq_mean}) {
      loss_config c;
      c.loss = loss;
      c.kl_coef = 0.3;
      c.agg = agg;
      auto f = [&](const at::Tensor& lp) {
        loss_inputs in;
        in.logp = lp, in.logp_old = old, in.logp_behav = old, in.advantages = adv;
        in.logp_prox = old + 0.01, in.logp_ref = ref, in.mask = mask;
        in.norm = agg == loss_aggregation::token_mean ? 11 : 2;
        return policy_loss(in, c).loss;
      };
      auto lp = base.clone().set_requires_grad(true);
      f(lp).backward();
      auto g = lp.grad();
      const double h = 1e-6;
      for (int64_t i = 0; i < base.numel(); ++i) {
        auto plus = base.clone(), minus = base.clone();
        plus.view(-1)[i] += h;
        minus.view(-1)[i] -= h;
        double fd = (f(plus).item<double>() - f(minus).item<double>()) / (2 * h);
        EXPECT_NEAR(g.view(-1)[i].item<double>(), fd, 1e-8)
            << to_string(loss) << " " << to_string(agg) << " " << i;
      }
    }
}

}  // namespace
