// Policy improvement through the real trainer path (begin_batch, accumulate, step): one small
// optimizer step on a fixed batch must raise the advantage-weighted log-likelihood that the
// loss is a surrogate for, and lower it when every advantage is negated. Log-probs for the
// objective come from a plain causal forward, independent of the trainer's packing.

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/common/rng.hpp"
#include "runtime/model/model.hpp"
#include "runtime/train/losses.hpp"
#include "runtime/train/policy_trainer.hpp"
#include "tests/tiny_model.hpp"
#include "tests/trainer_samples.hpp"

using namespace asyncrl;

namespace {

constexpr int kGroups = 3, kG = 4;
constexpr int64_t kVersion = 2;  // the trainer's version; tokens are 0, 1 or 2 steps stale

CausalLM improvement_policy() {
  return init_causal_lm(test::tiny_model_config(), 0.3, 11, torch::kCPU);
}

// kGroups prompts with kG responses each, token ids and lengths from `seed`. Token j of a
// response has version j % 3, so the decoupled losses see d = 2, 1 and 0 in every response.
// Log-probs and advantages are filled in by the test.
std::vector<scored_sample> make_batch(uint64_t seed) {
  test::sample_draw d;
  d.groups = kGroups, d.group_size = kG, d.prompt_max = 5, d.response_min = 3, d.response_max = 7;
  d.scored = false, d.version_cycle = 3;
  return test::random_samples(d, seed);
}

// Log-probs (Lr,) of one response under `model`, in the model's dtype, from a plain causal
// forward of [prompt, response]: the logits at position Lp - 1 + j predict response token j.
// Built without pack_samples, so an off-by-one in the trainer's packing does not cancel out.
at::Tensor reference_logprobs(CausalLMImpl& model, const scored_sample& s) {
  std::vector<int64_t> ids(s.prompt.begin(), s.prompt.end());
  ids.insert(ids.end(), s.response.begin(), s.response.end());
  const auto T = static_cast<int64_t>(ids.size());
  const auto Lp = static_cast<int64_t>(s.prompt.size());
  const auto Lr = static_cast<int64_t>(s.response.size());
  auto logits = model.forward(at::tensor(ids, at::kLong).view({1, T}),
                              at::arange(T, at::kLong).view({1, T}))[0];  // (T, V)
  auto targets = at::tensor(std::vector<int64_t>(s.response.begin(), s.response.end()), at::kLong);
  return at::log_softmax(logits.narrow(0, Lp - 1, Lr), -1)
      .gather(1, targets.unsqueeze(1))
      .squeeze(1);  // (Lr,)
}

// Per-sample log-likelihood sum_t log pi(y_it), in double.
std::vector<double> log_likelihoods(CausalLMImpl& model, const std::vector<scored_sample>& b) {
  at::NoGradGuard ng;
  std::vector<double> out;
  for (auto& s : b)
    out.push_back(reference_logprobs(model, s).to(at::kDouble).sum().item<double>());
  return out;
}

// J = sum_i A_i w_i sum_t log pi(y_it) with the TRUE advantages A_i: w_i = 1 for token-mean,
// 1 / |y_i| for seq-mean. At ratio 1 (w = 1, no clipping) the surrogate's gradient is
// -grad J / norm, so a correct step raises J to first order.
double objective(const std::vector<double>& ll, const std::vector<double>& adv,
                 const std::vector<scored_sample>& b, loss_aggregation agg) {
  double j = 0;
  for (size_t i = 0; i < b.size(); ++i)
    j += adv[i] * ll[i] / (agg == loss_aggregation::seq_mean ? double(b[i].response.size()) : 1.0);
  return j;
}

// GRPO advantages from fixed rewards: every group has responses of both signs.
std::vector<double> grpo_advantages() {
  auto rewards = at::tensor(std::vector<double>{1, 0, 0, 1, 0, 1, 0, 0, 1, 1, 0, 1}, at::kDouble)
                     .view({kGroups, kG});
  auto a = rl::group_advantages(rewards).contiguous();
  return std::vector<double>(a.data_ptr<double>(), a.data_ptr<double>() + a.numel());
}

enum class partition { whole, micro1, micro2_across_groups };

// The loss axis is "grpo" (coupled) or a prox_logp name (the decoupled loss with it).
using improvement_case =
    std::tuple<bool, partition, std::string, loss_aggregation, train_precision>;

policy_trainer_params settings_for(const improvement_case& c) {
  const auto& [shared, part, loss, agg, precision] = c;
  (void)part;
  policy_trainer_params st;
  st.loss = loss == "grpo" ? loss_kind::grpo : loss_kind::decoupled;
  st.prox_logp = loss == "grpo" ? prox_method::recompute : *parse_enum<prox_method>(loss);
  st.loss_agg = agg;
  st.kl_coef = 0.0;  // J is the pg objective alone
  st.shared_prompt_attention = shared;
  st.precision = precision;
  st.deterministic_accumulation = true;
  st.lr = 1e-4;
  st.grad_clip = 1.0;
  return st;
}

// Micro-batches as sample indices: the whole batch; one sample each; or pairs taken across
// groups (group-major interleave), so every micro-batch mixes two prompts.
std::vector<std::vector<size_t>> micro_batches(partition p, size_t n) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  size_t size = n;
  if (p == partition::micro1) size = 1;
  if (p == partition::micro2_across_groups) {
    order.clear();
    for (int k = 0; k < kG; ++k)
      for (int g = 0; g < kGroups; ++g)
        order.push_back(static_cast<size_t>(g * kG + k));
    size = 2;
  }
  std::vector<std::vector<size_t>> out;
  for (size_t i = 0; i < n; i += size)
    out.emplace_back(order.begin() + static_cast<long>(i),
                     order.begin() + static_cast<long>(std::min(n, i + size)));
  return out;
}

struct step_result {
  std::vector<double> before, after;  // per-sample log-likelihoods
};

// One optimizer step of a fresh trainer on `batch` with advantages `adv`; behaviour log-probs
// are the policy's own (response_logprobs), so every ratio and importance weight starts at 1.
step_result one_step(const improvement_case& c, std::vector<scored_sample> batch,
                     const std::vector<double>& adv) {
  const auto part = std::get<1>(c);
  const bool f64 = std::get<4>(c) == train_precision::float64;
  policy_trainer t(improvement_policy(), settings_for(c));
  t.set_version(kVersion);
  std::vector<const scored_sample*> all;
  for (auto& s : batch)
    all.push_back(&s);
  auto behav = t.response_logprobs(*t.policy(), all).to(at::kDouble).contiguous();
  step_result r;
  r.before = log_likelihoods(*t.policy(), batch);
  int64_t k = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    double sum = 0;
    for (auto& lp : batch[i].logprobs) {
      lp = static_cast<float>(behav[k++].item<double>());
      sum += lp;
    }
    batch[i].advantage = adv[i];
    // The trainer's packed log-probs agree with the plain forward: no off-by-one in packing.
    EXPECT_NEAR(sum, r.before[i], f64 ? 1e-5 : 1e-4) << "sample " << i;
  }
  t.begin_batch();
  for (auto& mb : micro_batches(part, batch.size())) {
    std::vector<const scored_sample*> p;
    for (auto i : mb)
      p.push_back(&batch[i]);
    t.accumulate(p);
  }
  auto u = t.step();
  EXPECT_FALSE(u.skipped);
  EXPECT_EQ(u.samples_trained, static_cast<int64_t>(batch.size()));
  EXPECT_EQ(t.version(), kVersion + 1);
  r.after = log_likelihoods(*t.policy(), batch);
  return r;
}

class PolicyImprovement : public ::testing::TestWithParam<improvement_case> {};

// Catches: a flipped sign in the loss (J falls), a trainer that ignores the advantages or
// trains toward likelihood regardless of them (J rises under negated advantages too),
// advantages paired with the wrong sample (J is built from the true per-sample A_i, and the
// single-positive case below pins each sample's own direction), and an off-by-one in the
// position that predicts a token (J uses a plain forward, not the trainer's packing).
TEST_P(PolicyImprovement, OneStepRaisesTheAdvantageWeightedLikelihood) {
  const auto& c = GetParam();
  const auto& agg = std::get<3>(c);
  const bool f64 = std::get<4>(c) == train_precision::float64;
  const auto batch = make_batch(17);
  const auto adv = grpo_advantages();

  // Evaluation noise of J: float32 log-probs carry ~1e-7 relative error per token.
  double scale = 0;
  {
    auto probe = improvement_policy();
    auto ll = log_likelihoods(*probe, batch);
    for (size_t i = 0; i < batch.size(); ++i)
      scale += std::abs(adv[i] * ll[i]);
  }
  const double noise = (f64 ? 1e-12 : 1e-5) * scale;

  auto up = one_step(c, batch, adv);
  const double j0 = objective(up.before, adv, batch, agg);
  const double dj = objective(up.after, adv, batch, agg) - j0;
  EXPECT_GT(dj, noise) << "J " << j0 << " -> " << j0 + dj;

  // Negated advantages: the same step in the opposite direction lowers the true J.
  std::vector<double> neg(adv.size());
  std::transform(adv.begin(), adv.end(), neg.begin(), [](double a) { return -a; });
  auto down = one_step(c, batch, neg);
  const double dj_neg = objective(down.after, adv, batch, agg) - j0;
  EXPECT_LT(dj_neg, -noise) << "J " << j0 << " -> " << j0 + dj_neg;

  // Pairing: only sample 5 (group 1) has A > 0, every other sample A < 0. Its own
  // log-likelihood must rise and every other one fall; a trainer that gives sample 5's
  // advantage to a neighbour moves the wrong samples.
  const size_t star = 5;
  std::vector<double> one(adv.size(), -0.2);
  one[star] = 1.0;
  auto pair = one_step(c, batch, one);
  for (size_t i = 0; i < batch.size(); ++i) {
    const double d = pair.after[i] - pair.before[i];
    if (i == star)
      EXPECT_GT(d, 0.0) << "sample " << i << " (A > 0)";
    else
      EXPECT_LT(d, 0.0) << "sample " << i << " (A < 0)";
  }
}

std::string case_name(const ::testing::TestParamInfo<improvement_case>& info) {
  const auto& [shared, part, loss, agg, precision] = info.param;
  const char* parts[] = {"whole", "micro1", "micro2x"};
  auto n = std::string(shared ? "shared_" : "plain_") + parts[static_cast<int>(part)] + "_" + loss +
           "_" + to_string(agg) + "_" + to_string(precision);
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
}

INSTANTIATE_TEST_SUITE_P(
    Trainer, PolicyImprovement,
    ::testing::Combine(::testing::Bool(),
                       ::testing::Values(partition::whole, partition::micro1,
                                         partition::micro2_across_groups),
                       ::testing::Values("grpo", "recompute", "loglinear"),
                       ::testing::Values(loss_aggregation::token_mean, loss_aggregation::seq_mean),
                       ::testing::Values(train_precision::float32, train_precision::float64)),
    case_name);

}  // namespace
