// The tri-model trainer: micro-batch accumulation equals the full batch (Theorem 1,
// Proposition 2), shared-prompt packing equals unpacked, rollout and trainer log-probs agree,
// non-finite steps are skipped cleanly, the loglinear gradient and a float64 trainer match
// hand-built references, and the clip metrics count the dual clip apart.

#include <gtest/gtest.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <numeric>

#include "runtime/common/rng.hpp"
#include "runtime/generation/generator.hpp"
#include "runtime/model/model.hpp"
#include "runtime/train/packing.hpp"
#include "runtime/train/policy_trainer.hpp"
#include "tests/tiny_model.hpp"
#include "tests/trainer_samples.hpp"

using namespace asyncrl;
using test::ptrs;

namespace {

// `groups` prompts with `G` responses each; token ids, lengths and advantages from `seed`.
std::vector<scored_sample> make_samples(int groups, int G, uint64_t seed, int64_t version = 0) {
  test::sample_draw d;
  d.groups = groups, d.group_size = G, d.prompt_max = 6, d.response_min = 2, d.response_max = 9;
  d.version = version;
  return test::random_samples(d, seed);
}

policy_trainer_params settings(loss_kind loss,
                               loss_aggregation agg = loss_aggregation::token_mean) {
  policy_trainer_params st;
  st.loss = loss;
  st.prox_logp = prox_method::recompute;
  st.loss_agg = agg;
  st.kl_coef = 0.05;
  st.lr = 1e-3;
  st.grad_clip = 1.0;
  st.deterministic_accumulation = true;
  return st;
}

CausalLM fresh_policy() {
  return init_causal_lm(test::tiny_model_config(), 0.3, 11, torch::kCPU);
}

std::vector<at::Tensor> snapshot(const CausalLM& m) {
  std::vector<at::Tensor> v;
  for (auto& p : m->parameters())
    v.push_back(p.detach().to(at::kDouble).clone());
  return v;
}

double max_abs_diff(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  return worst;
}

bool bitwise_equal(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (!a[i].equal(b[i])) return false;
  return true;
}

// One optimizer step over `samples` fed in `order`, cut into micro-batches of `micro`.
// `grad` receives the normalised gradient the step applied.
std::vector<at::Tensor> one_update(const policy_trainer_params& st,
                                   const std::vector<scored_sample>& samples,
                                   std::vector<size_t> order, size_t micro,
                                   std::vector<at::Tensor>* grad = nullptr) {
  policy_trainer t(fresh_policy(), st);
  t.begin_batch();
  for (size_t i = 0; i < order.size(); i += micro) {
    std::vector<const scored_sample*> mb;
    for (size_t j = i; j < std::min(order.size(), i + micro); ++j)
      mb.push_back(&samples[order[j]]);
    t.accumulate(mb);
  }
  if (grad != nullptr) *grad = t.pending_gradient();
  auto u = t.step();
  EXPECT_FALSE(u.skipped);
  EXPECT_EQ(t.version(), 1);
  return snapshot(t.policy());
}

struct theorem_case {
  loss_kind loss;
  loss_aggregation agg;
  train_precision precision;
};
void PrintTo(const theorem_case& c, std::ostream* os) {
  *os << to_string(c.loss) << "/" << to_string(c.agg) << "/" << to_string(c.precision);
}

class TheoremOne : public ::testing::TestWithParam<theorem_case> {};

// float32: the gradient the step applies matches the full batch's within 1e-6 for every
// partition, but AdamW's first step, lr * g / (|g| + eps), turns float32 rounding of gradients
// near eps into visible update differences. float64 (trainer.precision) makes the update itself
// match within 1e-6. Either way the same micro-batches in another order give bitwise the same
// weights (float64 accumulation).
TEST_P(TheoremOne, AnyOrderAndPartitionGivesTheFullBatchUpdate) {
  auto [loss, agg, precision] = GetParam();
  auto st = settings(loss, agg);
  st.precision = precision;
  auto samples = make_samples(5, 4, 7);
  std::vector<size_t> natural(samples.size());
  std::iota(natural.begin(), natural.end(), 0);
  std::vector<at::Tensor> full_grad, grad;
  auto full = one_update(st, samples, natural, samples.size(), &full_grad);
  auto initial = snapshot(fresh_policy());
  ASSERT_GT(max_abs_diff(full, initial), 1e-4);  // the step did move the weights

  double worst = 0, worst_grad = 0, gmax = 0;
  for (auto& g : full_grad)
    gmax = std::max(gmax, g.abs().max().item<double>());
  for (size_t micro : {1, 3, 7}) {
    auto order = natural;
    std::reverse(order.begin(), order.end());
    std::rotate(order.begin(), order.begin() + static_cast<long>(micro), order.end());
    worst = std::max(worst, max_abs_diff(one_update(st, samples, order, micro, &grad), full));
    worst_grad = std::max(worst_grad, max_abs_diff(grad, full_grad));
  }
  std::cout << "[theorem1] " << to_string(loss) << "/" << to_string(agg) << "/"
            << to_string(precision) << " max |grad| " << gmax << ", max |grad diff| " << worst_grad
            << ", max |param diff| " << worst << "\n";
  EXPECT_LE(worst_grad, 1e-6);
  if (precision == train_precision::float64) {
    EXPECT_LE(worst_grad, 1e-12);
    EXPECT_LE(worst, 1e-6);
  }

  // Same micro-batches, arriving in reverse order: float64 accumulation is bitwise identical.
  policy_trainer a(fresh_policy(), st), b(fresh_policy(), st);
  a.begin_batch();
  b.begin_batch();
  std::vector<std::vector<const scored_sample*>> chunks;
  for (size_t i = 0; i < natural.size(); i += 3) {
    std::vector<const scored_sample*> c;
    for (size_t j = i; j < std::min(natural.size(), i + 3); ++j)
      c.push_back(&samples[j]);
    chunks.push_back(c);
  }
  for (auto& c : chunks)
    a.accumulate(c);
  for (auto it = chunks.rbegin(); it != chunks.rend(); ++it)
    b.accumulate(*it);
  a.step();
  b.step();
  EXPECT_TRUE(bitwise_equal(snapshot(a.policy()), snapshot(b.policy())));
}

INSTANTIATE_TEST_SUITE_P(
    Losses, TheoremOne,
    ::testing::Values(
        theorem_case{loss_kind::grpo, loss_aggregation::token_mean, train_precision::float32},
        theorem_case{loss_kind::decoupled, loss_aggregation::token_mean, train_precision::float32},
        theorem_case{loss_kind::grpo, loss_aggregation::seq_mean, train_precision::float32},
        theorem_case{loss_kind::grpo, loss_aggregation::token_mean, train_precision::float64},
        theorem_case{loss_kind::decoupled, loss_aggregation::token_mean, train_precision::float64},
        theorem_case{loss_kind::grpo, loss_aggregation::seq_mean, train_precision::float64}),
    [](const auto& info) {
      auto n = std::string(to_string(info.param.loss)) + "_" + to_string(info.param.agg) + "_" +
               to_string(info.param.precision);
      std::replace(n.begin(), n.end(), '-', '_');
      return n;
    });

// Every layout against one right-padded row per response (the plain reference): padding-free
// rows with per-block attention, with and without shared prompts, and the dense-mask shared
// prompt. Catches a wrong position restart, a token that sees another sequence, a misrouted
// gather/scatter of the per-block attention, and a shifted prediction index (src).
TEST(Packing, EveryLayoutGivesTheLogprobsAndGradientsOfUnpackedRows) {
  auto samples = make_samples(3, 5, 21);
  auto p = ptrs(samples);
  auto model = fresh_policy();
  auto grads_of = [&](bool shared, bool padding_free, at::Tensor* logp_out,
                      packed_batch* batch_out) {
    model->zero_grad();
    auto b = pack_samples(p, shared, torch::kCPU, padding_free);
    auto h = b.segments.empty() ? model->hidden(b.ids, b.pos, b.mask)
                                : model->hidden(b.ids, b.pos, b.segments);
    auto logits = model->lm_logits(h.reshape({-1, h.size(-1)}).index_select(0, b.src));
    auto logp = at::log_softmax(logits, -1).gather(1, b.targets.unsqueeze(1)).squeeze(1);
    // A fixed weighting of the tokens (a token mean), so every log-prob's gradient matters.
    auto w = at::linspace(-1, 1, logp.size(0)) / logp.size(0);
    (logp * w).sum().backward();
    // Pack order -> sample order, so layouts that order tokens differently compare.
    *logp_out = to_rows(logp.detach(), b).masked_select(response_mask(b));
    *batch_out = b;
    std::vector<at::Tensor> g;
    for (auto& q : model->parameters())
      g.push_back(q.grad().clone());
    return g;
  };
  at::Tensor lp_plain;
  packed_batch bu;
  auto gu = grads_of(false, false, &lp_plain, &bu);
  // Token counts by hand: K (Lp + Lr) per prompt unpacked, Lp + K Lr shared.
  int64_t shared_real = 0, plain_real = 0, longest = 0, longest_group = 0;
  for (int g = 0; g < 3; ++g) {
    const auto Lp = static_cast<int64_t>(samples[g * 5].prompt.size());
    int64_t group = Lp;
    for (int k = 0; k < 5; ++k) {
      const auto Lr = static_cast<int64_t>(samples[g * 5 + k].response.size());
      group += Lr;
      plain_real += Lp + Lr;
      longest = std::max(longest, Lp + Lr);
    }
    shared_real += group;
    longest_group = std::max(longest_group, group);
  }
  EXPECT_EQ(bu.tokens_real, plain_real);
  EXPECT_EQ(bu.tokens_processed, 15 * longest);
  struct layout {
    bool shared, padding_free;
    int64_t rows, real, processed;
  };
  for (auto l : {layout{false, true, 1, plain_real, plain_real},
                 layout{true, true, 1, shared_real, shared_real},
                 layout{true, false, 3, shared_real, 3 * longest_group}}) {
    SCOPED_TRACE(testing::Message() << "shared " << l.shared << " padding_free " << l.padding_free);
    at::Tensor lp;
    packed_batch b;
    auto g = grads_of(l.shared, l.padding_free, &lp, &b);
    EXPECT_TRUE(at::allclose(lp, lp_plain, 0, 1e-5)) << (lp - lp_plain).abs().max();
    EXPECT_LE(max_abs_diff(g, gu), 1e-5);
    EXPECT_EQ(b.ids.size(0), l.rows);
    EXPECT_EQ(b.tokens_real, l.real);
    EXPECT_EQ(b.tokens_processed, l.processed);
  }
}

TEST(Packing, TrainerUpdateMatchesUnpackedRowsForEveryLayout) {
  auto samples = make_samples(4, 4, 5);
  auto st = settings(loss_kind::grpo);
  std::vector<size_t> order(samples.size());
  std::iota(order.begin(), order.end(), 0);
  st.padding_free = false;
  auto plain = one_update(st, samples, order, 8);
  for (bool shared : {false, true})
    for (bool padding_free : {false, true}) {
      if (!shared && !padding_free) continue;
      st.shared_prompt_attention = shared;
      st.padding_free = padding_free;
      auto packed = one_update(st, samples, order, 8);
      EXPECT_LE(max_abs_diff(plain, packed), 1e-6) << shared << padding_free;
    }
}

TEST(TriModel, RolloutAndTrainerLogprobsAgreeForTheSameWeights) {
  auto policy = fresh_policy();
  for (double T : {1.0, 0.8}) {
    auto samples = test::generated_samples(policy.ptr(), T);
    for (bool packed : {false, true}) {
      auto st = settings(loss_kind::decoupled);
      st.temperature = T;
      st.shared_prompt_attention = packed;
      policy_trainer t(policy, st);
      auto lp = t.response_logprobs(*t.policy(), ptrs(samples));
      std::vector<float> rollout;
      for (auto& s : samples)
        rollout.insert(rollout.end(), s.logprobs.begin(), s.logprobs.end());
      auto want = at::tensor(rollout);
      // 2e-5: the generator's fused decode kernels sum attention and norms in other orders
      // than the trainer's forward (measured 1.04e-5 at most; a temperature applied twice or a
      // token off by one moves log-probs by 1e-2 or more).
      EXPECT_TRUE(at::allclose(lp, want, 0, 2e-5))
          << "T=" << T << " packed=" << packed << " max diff " << (lp - want).abs().max();
    }
  }
}

TEST(TriModel, OldStaysAtTheBatchStartAndReferenceAtTheInitialWeights) {
  auto st = settings(loss_kind::grpo);
  policy_trainer t(fresh_policy(), st);
  auto initial = snapshot(t.policy());
  auto samples = make_samples(2, 3, 3);
  t.begin_batch();
  // Two mini-batches, two optimizer steps inside one batch.
  t.accumulate(ptrs(samples));
  t.step();
  auto after_first = snapshot(t.policy());
  t.accumulate(ptrs(samples));
  t.step();
  EXPECT_EQ(t.version(), 2);
  EXPECT_TRUE(bitwise_equal(snapshot(t.old_policy()), initial));
  EXPECT_TRUE(bitwise_equal(snapshot(t.reference()), initial));
  EXPECT_GT(max_abs_diff(snapshot(t.policy()), after_first), 0.0);
  t.begin_batch();
  EXPECT_TRUE(bitwise_equal(snapshot(t.old_policy()), snapshot(t.policy())));
  EXPECT_TRUE(bitwise_equal(snapshot(t.reference()), initial));
  // Only the policy has trainable parameters.
  for (auto& p : t.old_policy()->parameters())
    EXPECT_FALSE(p.requires_grad());
  for (auto& p : t.reference()->parameters())
    EXPECT_FALSE(p.requires_grad());
}

TEST(Safety, NonFiniteStepIsSkippedLeavingWeightsAndOptimizerUntouched) {
  auto st = settings(loss_kind::grpo);
  auto samples = make_samples(2, 3, 4);
  auto bad = samples;
  bad[1].advantage = std::nan("");

  policy_trainer control(fresh_policy(), st);
  control.begin_batch();
  control.accumulate(ptrs(samples));
  control.step();

  policy_trainer t(fresh_policy(), st);
  auto before = snapshot(t.policy());
  t.begin_batch();
  t.accumulate(ptrs(bad));
  auto u = t.step();
  EXPECT_TRUE(u.skipped);
  EXPECT_EQ(t.skipped_steps(), 1);
  EXPECT_EQ(t.version(), 0);
  EXPECT_TRUE(bitwise_equal(snapshot(t.policy()), before));
  // Adam's moments and step count were not touched: the next good step equals the control's.
  t.accumulate(ptrs(samples));
  EXPECT_FALSE(t.step().skipped);
  EXPECT_TRUE(bitwise_equal(snapshot(t.policy()), snapshot(control.policy())));
}

TEST(Safety, BadInputIsAClearError) {
  policy_trainer t(fresh_policy(), settings(loss_kind::decoupled));
  auto future = make_samples(1, 2, 5, /*version=*/3);
  try {
    t.accumulate(ptrs(future));
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("newer than the policy"), std::string::npos) << e.what();
  }
  EXPECT_THROW(t.accumulate({}), std::invalid_argument);
  EXPECT_THROW(t.step(), std::invalid_argument);  // nothing accumulated
}

// update_stats::clip_frac (verl pg_clipfrac) and clip_frac_lower (pg_clipfrac_lower) through
// the trainer: ratios are set by hand through the behaviour log-probs (use_rollout_logprobs),
// and both fractions are over the step's kept tokens.
TEST(Metrics, ClipFractionsCountTheDualClipApart) {
  auto st = settings(loss_kind::grpo);
  st.use_rollout_logprobs = true;  // logp_old = behaviour: r = exp(logp - behav)
  st.kl_coef = 0.0;
  policy_trainer t(fresh_policy(), st);
  std::vector<scored_sample> samples(2);
  // A = +1: r = 1.5 (clipped), 1 (neither), 1 (neither).
  // A = -1: r = 5 (dual clip, c = 3), 0.5 (clipped), 1 (neither), 2 (neither: r A is larger).
  const std::vector<std::vector<double>> ratios{{1.5, 1.0, 1.0}, {5.0, 0.5, 1.0, 2.0}};
  for (size_t i = 0; i < 2; ++i) {
    auto& s = samples[i];
    s.uid = i, s.index = static_cast<uint32_t>(i);
    s.prompt = {1, 5, 7};
    s.response = i == 0 ? std::vector<int32_t>{4, 9, 12} : std::vector<int32_t>{3, 8, 15, 6};
    s.logprobs.assign(s.response.size(), 0.f);
    s.versions.assign(s.response.size(), 0);
    s.advantage = i == 0 ? 1.0 : -1.0;
  }
  auto cur = t.response_logprobs(*t.policy(), ptrs(samples)).to(at::kDouble);
  int64_t k = 0;
  for (size_t i = 0; i < 2; ++i)
    for (size_t j = 0; j < samples[i].response.size(); ++j, ++k)
      samples[i].logprobs[j] = static_cast<float>(cur[k].item<double>() - std::log(ratios[i][j]));
  t.begin_batch();
  t.accumulate({&samples[0]});
  t.accumulate({&samples[1]});
  auto u = t.step();
  EXPECT_EQ(u.tokens_trained, 7);
  EXPECT_EQ(u.masked_tokens, 0);
  EXPECT_DOUBLE_EQ(u.clip_frac, 2.0 / 7);
  EXPECT_DOUBLE_EQ(u.clip_frac_lower, 1.0 / 7);
}

// Log-probs (Lr,) of one response under `model`, in its dtype and with gradient, from a plain
// causal forward of [prompt, response]: the logits at position Lp - 1 + j predict token j.
at::Tensor plain_logprobs(CausalLMImpl& model, const scored_sample& s) {
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
      .squeeze(1);
}

// (M, L) per-token grids of a batch, zero-padded, in `dtype`: the policy's log-probs (with
// gradient, from plain forwards), behaviour log-probs, advantages and the response mask.
struct token_grids {
  at::Tensor logp, behav, adv, mask;
};
token_grids grids_of(CausalLMImpl& model, const std::vector<scored_sample>& b, at::ScalarType dt) {
  int64_t L = 0;
  for (auto& s : b)
    L = std::max<int64_t>(L, static_cast<int64_t>(s.response.size()));
  const auto M = static_cast<int64_t>(b.size());
  std::vector<at::Tensor> rows;
  auto behav = at::zeros({M, L}, at::kDouble), adv = at::zeros({M, L}, at::kDouble);
  auto mask = at::zeros({M, L}, at::kBool);
  for (int64_t m = 0; m < M; ++m) {
    const auto& s = b[m];
    const auto n = static_cast<int64_t>(s.response.size());
    rows.push_back(at::constant_pad_nd(plain_logprobs(model, s), {0, L - n}));
    for (int64_t j = 0; j < n; ++j) {
      behav[m][j] = static_cast<double>(s.logprobs[j]);
      adv[m][j] = s.advantage;  // the double advantage, not a float copy
      mask[m][j] = true;
    }
  }
  return {at::stack(rows), behav.to(dt), adv.to(dt), mask};
}

std::vector<at::Tensor> grads_of(CausalLMImpl& model) {
  std::vector<at::Tensor> g;
  for (auto& p : model.parameters())
    g.push_back(p.grad().defined() ? p.grad().to(at::kDouble).clone()
                                   : at::zeros_like(p, at::kDouble));
  return g;
}

// Max over parameters of |a - b| - rtol |b|: <= atol means allclose(a, b, rtol, atol).
double excess(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b, double rtol) {
  double worst = -1;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, ((a[i] - b[i]).abs() - rtol * b[i].abs()).max().item<double>());
  return worst;
}

class LoglinearPrecision : public ::testing::TestWithParam<train_precision> {};

// The trainer's gradient with prox_logp = loglinear against one built by hand: a plain
// forward, alpha_t = 0 (d_t = 0) or 1 / d_t per TOKEN of a partial rollout, the decoupled
// surrogate of losses.hpp, token-mean, backward. Behaviour log-probs sit 0.6 nats off the
// policy's, so r = exp(alpha (logp - behav)) lands inside or outside the clip range depending
// on alpha: a per-sample d (every token gets the sample's max d) gives a very different
// gradient, which the last assertion checks so this test cannot pass with per-sample d.
TEST_P(LoglinearPrecision, TrainerUsesPerTokenVersionsOfPartialRollouts) {
  const bool f64 = GetParam() == train_precision::float64;
  auto st = settings(loss_kind::decoupled);
  st.prox_logp = prox_method::loglinear;
  st.kl_coef = 0.0;
  st.precision = GetParam();
  policy_trainer t(fresh_policy(), st);
  t.set_version(2);
  // Partial rollouts: the first third of each response from version 0, the next from 1, the
  // rest from 2, so d = 2, 1, 0 along the response (per-sample max d = 2).
  auto samples = make_samples(2, 3, 6, 0);
  auto cur = t.response_logprobs(*t.policy(), ptrs(samples)).to(at::kDouble);
  int64_t k = 0;
  for (auto& s : samples) {
    const size_t n = s.response.size();
    for (size_t j = 0; j < n; ++j, ++k) {
      s.versions[j] = j < n / 3 ? 0 : j < 2 * n / 3 ? 1 : 2;
      s.logprobs[j] = static_cast<float>(cur[k].item<double>() + ((j + s.index) % 2 ? 0.6 : -0.6));
    }
  }
  t.begin_batch();
  t.accumulate(ptrs(samples));
  auto got = t.pending_gradient();

  const auto dt = f64 ? at::kDouble : at::kFloat;
  auto reference = [&](bool per_token) {
    auto model = fresh_policy();
    model->to(dt);
    auto g = grids_of(*model, samples, dt);
    auto alpha = at::zeros(g.logp.sizes(), at::kDouble);
    double tokens = 0;
    for (size_t m = 0; m < samples.size(); ++m) {
      const auto& s = samples[m];
      int64_t dmax = 0;
      for (auto v : s.versions)
        dmax = std::max(dmax, t.version() - v);
      for (size_t j = 0; j < s.response.size(); ++j, ++tokens) {
        const int64_t d = per_token ? t.version() - s.versions[j] : dmax;
        alpha[m][j] = d == 0 ? 0.0 : 1.0 / d;
      }
    }
    alpha = alpha.to(dt);
    auto prox = alpha * g.behav + (1.0 - alpha) * g.logp.detach();
    auto terms = rl::decoupled_surrogate(g.logp, prox, g.behav, g.adv,
                                         rl::clip_config{0.2, 0.2, 3.0}, /*cap=*/0.0);
    ((terms.loss * g.mask).sum() / tokens).backward();
    return grads_of(*model);
  };
  auto want = reference(/*per_token=*/true);
  auto per_sample = reference(/*per_token=*/false);
  // float32: the packed and the plain forward round differently, ~1e-6 absolute on entries up
  // to ~0.5 after backward; float64: only double rounding is left (~1e-15).
  const double rtol = f64 ? 1e-10 : 1e-5, atol = f64 ? 1e-13 : 1e-5;
  EXPECT_LE(excess(got, want, rtol), atol);
  const double gap = max_abs_diff(per_sample, want);
  std::cout << "[loglinear] " << to_string(GetParam())
            << " per-token vs per-sample max |grad diff| " << gap << ", trainer vs per-token "
            << max_abs_diff(got, want) << "\n";
  double gmax = 0;
  for (auto& w : want)
    gmax = std::max(gmax, w.abs().max().item<double>());
  EXPECT_GT(gap, 100 * (atol + rtol * gmax)) << "max |grad| " << gmax;

  auto u = t.step();
  EXPECT_EQ(u.staleness_max, 2);
  EXPECT_FALSE(u.skipped);
}

INSTANTIATE_TEST_SUITE_P(Loglinear, LoglinearPrecision,
                         ::testing::Values(train_precision::float32, train_precision::float64));

// A float64 trainer stays float64 end to end: the pending gradient and two AdamW updates match
// a float64 reference (plain forward, coupled loss at ratio 1, AdamW written out by hand) to
// ~1e-12. Catches advantages rounded to float32 on the way into the loss, gradients cast to
// float32 before the step, and a gradient of one step leaking into the next.
TEST(Float64, GradientAndUpdatesMatchAFloat64Reference) {
  auto st = settings(loss_kind::grpo);
  st.kl_coef = 0.0;
  st.precision = train_precision::float64;
  st.lr = 1e-2;
  st.grad_clip = 1.0;
  auto samples = make_samples(2, 3, 8);  // advantages are doubles with no float32 copy
  policy_trainer t(fresh_policy(), st);
  auto ref = fresh_policy();
  ref->to(at::kDouble);
  const auto& tr = st;
  std::vector<at::Tensor> m1, m2;  // AdamW moments of the reference
  for (auto& p : ref->parameters()) {
    m1.push_back(at::zeros_like(p));
    m2.push_back(at::zeros_like(p));
  }
  for (int step = 1; step <= 2; ++step) {
    t.begin_batch();
    t.accumulate({&samples[0], &samples[1]});
    t.accumulate({&samples[2], &samples[3], &samples[4], &samples[5]});
    auto got = t.pending_gradient();

    ref->zero_grad();
    auto g = grids_of(*ref, samples, at::kDouble);
    auto s = rl::clipped_surrogate(g.logp - g.logp.detach(), g.adv, rl::clip_config{});
    ((s.loss * g.mask).sum() / g.mask.sum().item<double>()).backward();
    auto want = grads_of(*ref);
    EXPECT_LE(max_abs_diff(got, want), 1e-13) << "step " << step;

    auto u = t.step();
    ASSERT_FALSE(u.skipped);
    // policy_optimizer: global-norm clip, then AdamW (libtorch 1.13's formula, no decay).
    double sq = 0;
    for (auto& w : want)
      sq += w.pow(2).sum().item<double>();
    const double norm = std::sqrt(sq);
    const double scale = norm > tr.grad_clip ? tr.grad_clip / (norm + 1e-6) : 1.0;
    EXPECT_NEAR(u.grad_norm, norm, 1e-12 * norm);
    at::NoGradGuard ng;
    auto params = ref->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      auto gi = want[i] * scale;
      m1[i].mul_(tr.beta1).add_(gi, 1 - tr.beta1);
      m2[i].mul_(tr.beta2).addcmul_(gi, gi, 1 - tr.beta2);
      auto denom = m2[i].sqrt() / std::sqrt(1 - std::pow(tr.beta2, step)) + 1e-8;
      params[i].addcdiv_(m1[i], denom, -tr.lr / (1 - std::pow(tr.beta1, step)));
    }
    EXPECT_LE(max_abs_diff(snapshot(t.policy()), snapshot(ref)), 1e-12) << "step " << step;
  }
}

// Each step's gradient is this mini-batch's alone: the gradient pending after a first step
// equals that of a fresh trainer started from the first step's weights. Catches a gradient
// left in the parameters' .grad by step() and added into the next mini-batch.
TEST(Accumulation, EachStepStartsFromZeroGradients) {
  for (bool deterministic : {true, false}) {
    auto st = settings(loss_kind::grpo);
    st.kl_coef = 0.0;  // the fresh trainer's reference is other weights
    st.deterministic_accumulation = deterministic;
    auto a_batch = make_samples(2, 3, 12), b_batch = make_samples(2, 3, 13);
    policy_trainer t(fresh_policy(), st);
    t.begin_batch();
    t.accumulate(ptrs(a_batch));
    t.step();
    t.begin_batch();
    t.accumulate(ptrs(b_batch));
    auto got = t.pending_gradient();

    auto model = fresh_policy();
    {
      at::NoGradGuard ng;
      auto from = t.policy()->parameters();
      auto to = model->parameters();
      for (size_t i = 0; i < to.size(); ++i)
        to[i].copy_(from[i]);
    }
    policy_trainer fresh(model, st);
    fresh.begin_batch();
    fresh.accumulate(ptrs(b_batch));
    EXPECT_LE(max_abs_diff(got, fresh.pending_gradient()), 1e-12)
        << "deterministic_accumulation " << deterministic;
  }
}

}  // namespace

// trainer.activation_checkpointing recomputes each layer in the backward: the gradient must be
// the one-pass gradient, for every packing layout (the segment plan and the dense mask reach
// the recomputation). Catches a recomputed layer that reads other attention inputs than the
// forward's, a lost input gradient (layers below the top get none), and a gradient counted
// twice.
TEST(Checkpointing, RecomputedLayersGiveTheOnePassGradient) {
  auto samples = make_samples(3, 3, 9);
  for (bool shared : {false, true})
    for (bool padding_free : {false, true}) {
      SCOPED_TRACE(testing::Message() << "shared " << shared << " padding_free " << padding_free);
      auto st = settings(loss_kind::grpo);
      st.shared_prompt_attention = shared;
      st.padding_free = padding_free;
      policy_trainer plain(fresh_policy(), st);
      st.activation_checkpointing = true;
      policy_trainer ckpt(fresh_policy(), st);
      for (auto* t : {&plain, &ckpt}) {
        t->begin_batch();
        t->accumulate(ptrs(samples));
      }
      auto a = plain.pending_gradient(), b = ckpt.pending_gradient();
      double biggest = 0;
      for (auto& g : a)
        biggest = std::max(biggest, g.abs().max().item<double>());
      ASSERT_GT(biggest, 1e-4) << "no gradient: nothing was tested";
      // Every parameter, the embedding at the bottom included, gets its gradient.
      EXPECT_LE(max_abs_diff(a, b), 1e-6 * biggest);
    }
}
