// Rollout correction (docs/algorithms.md §18) against values derived by hand from verl's
// formulas: TIS at the token and sequence level, MIS (rejection) at the token, sequence and
// geometric level with inclusive bounds, the veto, the log-space clamp, and how the weight enters
// the coupled and decoupled losses. Tolerances are stated per check.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "runtime/train/losses.hpp"
#include "runtime/train/rollout_correction.hpp"

using namespace asyncrl;
using namespace asyncrl::rl;

namespace {

at::Tensor rows(std::vector<std::vector<double>> v) {
  std::vector<at::Tensor> r;
  for (auto& x : v)
    r.push_back(at::tensor(x, at::kDouble));
  return at::stack(r);
}

at::Tensor flags(std::vector<std::vector<int>> v) {
  std::vector<at::Tensor> r;
  for (auto& x : v)
    r.push_back(at::tensor(x, at::kInt));
  return at::stack(r).to(at::kBool);
}

bool same(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.equal(b);
}

rollout_correction_params tis(rc_is_level level, double u) {
  rollout_correction_params p;
  p.is = level;
  p.is_threshold = u;
  return p;
}

rollout_correction_params mis(rc_rs_level level, double upper, double lower = 0) {
  rollout_correction_params p;
  p.rs = level;
  p.rs_threshold = upper;
  p.rs_threshold_lower = lower;
  return p;
}

}  // namespace

// TIS per token: w_t = min(exp(l_t), u). Catches a truncation from below, a missing clamp.
TEST(RolloutCorrection, TokenTisTruncatesFromAbove) {
  auto l = rows({{std::log(0.5), 0.0, std::log(3.0), std::log(1.5)}});
  auto m = flags({{1, 1, 1, 1}});
  auto c = rollout_correction(l, m, tis(rc_is_level::token, 2.0));
  const double want[] = {0.5, 1.0, 2.0, 1.5};
  for (int t = 0; t < 4; ++t)
    EXPECT_NEAR(c.weight[0][t].item<double>(), want[t], 1e-12) << t;  // exp: 1 ulp
  EXPECT_NEAR(c.raw[0][2].item<double>(), 3.0, 1e-12);
  EXPECT_TRUE(same(c.truncated, flags({{0, 0, 1, 0}})));
  EXPECT_TRUE(same(c.keep, m));  // TIS rejects nothing
}

// TIS per sequence: w = min(exp(sum of the row's masked l_t), u), the same on every token.
// Catches a padding token in the sum (row 0 would give exp(5.7)) and a per-token weight.
TEST(RolloutCorrection, SequenceTisIsTheProductOfTheRowsRatios) {
  auto l = rows({{0.3, 0.4, 5.0}, {-0.2, 0.1, 0.05}});
  auto m = flags({{1, 1, 0}, {1, 1, 1}});
  auto c = rollout_correction(l, m, tis(rc_is_level::sequence, 2.0));
  // Row 0: exp(0.7) = 2.0138 > 2 -> 2 on both tokens; row 1: exp(-0.05) = 0.95123.
  EXPECT_NEAR(c.raw[0][0].item<double>(), std::exp(0.7), 1e-12);
  EXPECT_NEAR(c.weight[0][0].item<double>(), 2.0, 0);
  EXPECT_NEAR(c.weight[0][1].item<double>(), 2.0, 0);
  for (int t = 0; t < 3; ++t)
    EXPECT_NEAR(c.weight[1][t].item<double>(), std::exp(-0.05), 1e-12) << t;
  EXPECT_TRUE(same(c.truncated, flags({{1, 1, 0}, {0, 0, 0}})));
}

// The log-ratio is clamped to [-20, 20] per token and the sequence sum again before exp.
TEST(RolloutCorrection, LogSpaceClampKeepsWeightsFinite) {
  auto l = rows({{50.0, -50.0}, {15.0, 15.0}});
  auto m = flags({{1, 1}, {1, 1}});
  auto tok = rollout_correction(l, m, rollout_correction_params{});
  EXPECT_EQ(tok.log_ratio[0][0].item<double>(), 20.0);
  EXPECT_EQ(tok.log_ratio[0][1].item<double>(), -20.0);
  EXPECT_NEAR(tok.weight[0][0].item<double>(), std::exp(20.0), 1e-3);  // none: untruncated
  auto seq = rollout_correction(l, m, tis(rc_is_level::sequence, 1e30));
  EXPECT_NEAR(seq.raw[1][0].item<double>(), std::exp(20.0), 1e-3);  // sum 30 -> 20
  EXPECT_NEAR(seq.raw[0][0].item<double>(), 1.0, 1e-12);            // 20 - 20 = 0
  EXPECT_TRUE(at::isfinite(seq.weight).all().item<bool>());
}

// MIS per token keeps log(lower) <= l_t <= log(upper): a ratio exactly at either bound stays,
// one ulp outside goes. Catches < for <= (or the reverse) and a lower bound other than 1/upper.
TEST(RolloutCorrection, TokenRejectionBoundsAreInclusive) {
  const double up = std::log(2.0), lo = std::log(0.5);
  auto l = rows({{up, std::nextafter(up, 10.0), lo, std::nextafter(lo, -10.0), 0.0}});
  auto m = flags({{1, 1, 1, 1, 1}});
  auto c = rollout_correction(l, m, mis(rc_rs_level::token, 2.0));  // lower = 1/2
  EXPECT_TRUE(same(c.keep, flags({{1, 0, 1, 0, 1}})));
  // An explicit lower bound replaces 1/upper: 0.8 drops the 0.5 token too.
  auto c2 = rollout_correction(l, m, mis(rc_rs_level::token, 2.0, 0.8));
  EXPECT_TRUE(same(c2.keep, flags({{1, 0, 0, 0, 1}})));
  // Rejection alone leaves the weight untruncated (is = none).
  EXPECT_NEAR(c.weight[0][0].item<double>(), 2.0, 1e-12);
}

// Sequence and geometric rejection judge a whole response: the product of its ratios, or their
// geometric mean. The same rows give different verdicts, which catches one level used for the
// other; the padding token (l = 9) must not count, nor lengthen the mean.
TEST(RolloutCorrection, SequenceAndGeometricRejectWholeResponses) {
  auto l = rows({{0.3, 0.4, 9.0}, {1.0, 0.5, 0.0}, {-0.2, 0.1, 0.05}});
  auto m = flags({{1, 1, 0}, {1, 1, 1}, {1, 1, 1}});
  // Sequence: exp(0.7) = 2.01 > 2 out; exp(1.5) out; exp(-0.05) in.
  auto s = rollout_correction(l, m, mis(rc_rs_level::sequence, 2.0));
  EXPECT_TRUE(same(s.keep, flags({{0, 0, 0}, {0, 0, 0}, {1, 1, 1}})));
  // Geometric: exp(0.35) = 1.42 in; exp(0.5) = 1.65 in (mean over 3 tokens, not 2); in.
  auto g = rollout_correction(l, m, mis(rc_rs_level::geometric, 2.0));
  EXPECT_TRUE(same(g.keep, flags({{1, 1, 0}, {1, 1, 1}, {1, 1, 1}})));
  // Geometric with upper 1.6: exp(0.5) = 1.649 > 1.6 drops row 1 only.
  auto g2 = rollout_correction(l, m, mis(rc_rs_level::geometric, 1.6));
  EXPECT_TRUE(same(g2.keep, flags({{1, 1, 0}, {0, 0, 0}, {1, 1, 1}})));
}

// The veto drops a whole response for one token far less likely under the trainer.
TEST(RolloutCorrection, VetoDropsTheWholeResponse) {
  auto l =
      rows({{0.0, std::log(1e-5), 0.0}, {0.0, std::log(2e-4), 0.0}, {std::log(1e-9), 0.0, 0.0}});
  auto m = flags({{1, 1, 1}, {1, 1, 1}, {0, 1, 1}});
  rollout_correction_params p;
  p.veto_threshold = 1e-4;
  auto c = rollout_correction(l, m, p);
  // Row 2's catastrophic token is padding: it does not count.
  EXPECT_TRUE(same(c.keep, flags({{0, 0, 0}, {1, 1, 1}, {0, 1, 1}})));
}

// No masked-in token, or an empty response: no NaN, nothing kept, weight 1.
TEST(RolloutCorrection, EmptyResponsesAndAllMaskedRows) {
  auto l = rows({{0.0, 0.0}, {0.2, -0.1}});
  auto m = flags({{0, 0}, {1, 1}});
  for (auto level : {rc_rs_level::token, rc_rs_level::sequence, rc_rs_level::geometric}) {
    auto p = mis(level, 2.0);
    p.is = rc_is_level::sequence;
    auto c = rollout_correction(l, m, p);
    EXPECT_TRUE(at::isfinite(c.weight).all().item<bool>());
    EXPECT_EQ(c.weight[0][0].item<double>(), 1.0);
    EXPECT_TRUE(same(c.keep, flags({{0, 0}, {1, 1}})));
  }
  auto none = rollout_correction(rows({{0.0}}), flags({{0}}), mis(rc_rs_level::geometric, 2.0));
  EXPECT_FALSE(none.keep.any().item<bool>());
}

TEST(RolloutCorrection, BadArgumentsAreClearErrors) {
  auto l = rows({{0.0, 0.0}});
  auto m = flags({{1, 1}});
  EXPECT_THROW(rollout_correction(l, flags({{1, 1, 1}}), {}), std::invalid_argument);
  EXPECT_THROW(rollout_correction(l, m, tis(rc_is_level::token, 0.0)), std::invalid_argument);
  EXPECT_THROW(rollout_correction(l, m, mis(rc_rs_level::token, 2.0, 3.0)), std::invalid_argument);
}

// --- in the loss ------------------------------------------------------------------------------

namespace {

// Two tokens of one response with A = +1: logp - logp_train = 0.1 on both (ratio e^0.1 inside
// the clip), logp_train - logp_behav = log 3 and log 0.5.
loss_inputs two_tokens(loss_kind kind) {
  loss_inputs in;
  auto train = rows({{-1.0, -2.0}});
  in.logp = train + 0.1;
  (kind == loss_kind::grpo ? in.logp_old : in.logp_prox) = train;
  in.logp_behav = train - rows({{std::log(3.0), std::log(0.5)}});
  in.advantages = rows({{1.0, 1.0}});
  in.mask = flags({{1, 1}});
  in.norm = 2;
  return in;
}

double per_token(const loss_outputs& o, int t) {
  return o.pg_per_token[0][t].item<double>();
}

}  // namespace

// Coupled: L_t = -A r_t w_t with w from logp_old - logp_behav. Using logp - logp_behav instead
// (the wrong pair) would give min(3 e^0.1, 2) and 0.5 e^0.1 for the weights.
TEST(RolloutCorrectionLoss, CoupledTokenTisWeighsThePpoTerm) {
  const double r = std::exp(0.1);
  loss_config cfg;
  cfg.rc = tis(rc_is_level::token, 2.0);
  auto o = policy_loss(two_tokens(loss_kind::grpo), cfg);
  EXPECT_NEAR(per_token(o, 0), -2.0 * r, 1e-12);
  EXPECT_NEAR(per_token(o, 1), -0.5 * r, 1e-12);
  EXPECT_NEAR(o.loss.item<double>(), -(2.0 + 0.5) * r / 2, 1e-12);
  EXPECT_EQ(o.stats.rc_truncated, 1.0);
  EXPECT_NEAR(o.stats.rc_weight_sum, 2.5, 1e-12);
  EXPECT_NEAR(o.stats.rc_weight_max, 2.0, 1e-12);
  // k3 of KL(rollout || train) summed: (3 - 1 - log 3) + (0.5 - 1 - log 0.5).
  EXPECT_NEAR(o.stats.rc_kl_sum, (2.0 - std::log(3.0)) + (-0.5 + std::log(2.0)), 1e-12);
  // Without a correction the coupled loss has no weight, and says so (applied weight 1).
  auto plain = policy_loss(two_tokens(loss_kind::grpo), loss_config{});
  EXPECT_NEAR(per_token(plain, 0), -r, 1e-12);
  EXPECT_NEAR(plain.stats.rc_weight_sum, 2.0, 1e-12);
  EXPECT_NEAR(plain.stats.weight_max, 3.0, 1e-12);  // the raw ratio is still measured
}

// Decoupled: the behaviour weight exp(prox - behav) is the correction's weight: untruncated by
// default (AReaL), truncated per token or replaced by the sequence weight (1.5) on request.
TEST(RolloutCorrectionLoss, DecoupledBehaviourWeightIsTheCorrectionsWeight) {
  const double r = std::exp(0.1);
  loss_config cfg;
  cfg.loss = loss_kind::decoupled;
  auto none = policy_loss(two_tokens(loss_kind::decoupled), cfg);
  EXPECT_NEAR(per_token(none, 0), -3.0 * r, 1e-12);
  EXPECT_NEAR(per_token(none, 1), -0.5 * r, 1e-12);
  cfg.rc = tis(rc_is_level::token, 2.0);
  auto tok = policy_loss(two_tokens(loss_kind::decoupled), cfg);
  EXPECT_NEAR(per_token(tok, 0), -2.0 * r, 1e-12);
  EXPECT_NEAR(per_token(tok, 1), -0.5 * r, 1e-12);
  cfg.rc = tis(rc_is_level::sequence, 2.0);
  auto seq = policy_loss(two_tokens(loss_kind::decoupled), cfg);
  EXPECT_NEAR(per_token(seq, 0), -1.5 * r, 1e-12);
  EXPECT_NEAR(per_token(seq, 1), -1.5 * r, 1e-12);
  // The gradient w.r.t. logp carries the weight and nothing else: d/dlogp (-A w r) = -A w r.
  auto in = two_tokens(loss_kind::decoupled);
  in.logp = in.logp.clone().requires_grad_(true);
  policy_loss(in, cfg).loss.backward();
  EXPECT_NEAR(in.logp.grad()[0][0].item<double>(), -1.5 * r / 2, 1e-12);
}

// A rejected token leaves the loss and the kept count, but not the normalising token count.
TEST(RolloutCorrectionLoss, RejectedTokensLeaveTheLossAndAreCounted) {
  const double r = std::exp(0.1);
  for (auto kind : {loss_kind::grpo, loss_kind::decoupled}) {
    loss_config cfg;
    cfg.loss = kind;
    cfg.rc = mis(rc_rs_level::token, 2.0, 0.4);  // ratio 3 is out, 0.5 in
    auto o = policy_loss(two_tokens(kind), cfg);
    EXPECT_EQ(per_token(o, 0), 0.0);
    const double w1 = kind == loss_kind::grpo ? 1.0 : 0.5;  // grpo: MIS without IS weighs 1
    EXPECT_NEAR(per_token(o, 1), -w1 * r, 1e-12);
    EXPECT_NEAR(o.loss.item<double>(), -w1 * r / 2, 1e-12);
    EXPECT_EQ(o.stats.tokens, 2.0);
    EXPECT_EQ(o.stats.kept_tokens, 1.0);
    EXPECT_EQ(o.stats.rc_rejected, 1.0);
  }
}

// The decoupled weight cap and the rollout correction compose: both masks apply.
TEST(RolloutCorrectionLoss, CapAndRejectionCompose) {
  loss_config cfg;
  cfg.loss = loss_kind::decoupled;
  cfg.imp_weight_cap = 2.5;     // drops token 0 (w = 3)
  cfg.rc.veto_threshold = 0.6;  // token 1's ratio 0.5 < 0.6 vetoes the response
  auto o = policy_loss(two_tokens(loss_kind::decoupled), cfg);
  EXPECT_EQ(o.stats.kept_tokens, 0.0);
  EXPECT_EQ(o.loss.item<double>(), 0.0);
  EXPECT_EQ(o.stats.rc_weight_sum, 0.0);  // nothing kept: no weight to report
}

// Micro-batch statistics combine: sums add, the maxima take the max.
TEST(RolloutCorrectionLoss, StatisticsCombineAcrossMicroBatches) {
  loss_config cfg;
  cfg.rc = tis(rc_is_level::token, 2.5);
  auto a = policy_loss(two_tokens(loss_kind::grpo), cfg);
  auto in = two_tokens(loss_kind::grpo);
  in.logp_behav = in.logp_old - rows({{std::log(1.2), std::log(0.8)}});
  auto b = policy_loss(in, cfg);
  auto st = read_stats(combine_stats(a.stat_sums, b.stat_sums));
  EXPECT_NEAR(st.rc_weight_sum, 2.5 + 0.5 + 1.2 + 0.8, 1e-12);
  EXPECT_NEAR(st.rc_weight_max, 2.5, 1e-12);
  EXPECT_EQ(st.rc_truncated, 1.0);
  EXPECT_EQ(st.tokens, 4.0);
}
