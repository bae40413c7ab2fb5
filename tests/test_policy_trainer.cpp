// The tri-model trainer: micro-batch accumulation equals the full batch (Theorem 1,
// Proposition 2), shared-prompt packing equals unpacked, rollout and trainer log-probs agree,
// non-finite steps are skipped cleanly.

#include <gtest/gtest.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <iostream>
#include <numeric>

#include "runtime/generator.hpp"
#include "runtime/model.hpp"
#include "runtime/packing.hpp"
#include "runtime/policy_trainer.hpp"
#include "runtime/rng.hpp"
#include "tests/tiny_model.hpp"

using namespace asyncrl;

namespace {

// `groups` prompts with `G` responses each; token ids, lengths and advantages from `seed`.
std::vector<scored_sample> make_samples(int groups, int G, uint64_t seed, int32_t version = 0) {
  rng_stream rng(seed, 1, 1);
  uint64_t c = 0;
  auto draw = [&](int lo, int hi) { return lo + static_cast<int>(rng.bits(c++) % (hi - lo + 1)); };
  std::vector<scored_sample> out;
  for (int g = 0; g < groups; ++g) {
    std::vector<int32_t> prompt{1};
    for (int i = draw(2, 6); i > 0; --i)
      prompt.push_back(draw(3, 22));
    for (int k = 0; k < G; ++k) {
      scored_sample s;
      s.group_id = static_cast<uint64_t>(g);
      s.index = static_cast<uint32_t>(k);
      s.uid = static_cast<uint64_t>(g * G + k);
      s.prompt = prompt;
      for (int i = draw(2, 9); i > 0; --i) {
        s.response.push_back(draw(3, 22));
        s.logprobs.push_back(-static_cast<float>(rng.uniform(c++) * 3));
        s.versions.push_back(version);
      }
      s.advantage = rng.uniform(c++) * 2 - 1;
      out.push_back(std::move(s));
    }
  }
  return out;
}

std::vector<const scored_sample*> ptrs(const std::vector<scored_sample>& v) {
  std::vector<const scored_sample*> p;
  for (auto& s : v)
    p.push_back(&s);
  return p;
}

trainer_settings settings(const std::string& loss, const std::string& agg = "token-mean") {
  trainer_settings st;
  st.algorithm.loss = loss;
  st.algorithm.prox_logp = "recompute";
  st.algorithm.loss_agg = agg;
  st.algorithm.kl_coef = 0.05;
  st.trainer.lr = 1e-3;
  st.trainer.grad_clip = 1.0;
  st.trainer.deterministic_accumulation = true;
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
std::vector<at::Tensor> one_update(const trainer_settings& st,
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
  std::string loss, agg, precision;
};
void PrintTo(const theorem_case& c, std::ostream* os) {
  *os << c.loss << "/" << c.agg << "/" << c.precision;
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
  st.trainer.precision = precision;
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
  std::cout << "[theorem1] " << loss << "/" << agg << "/" << precision << " max |grad| " << gmax
            << ", max |grad diff| " << worst_grad << ", max |param diff| " << worst << "\n";
  EXPECT_LE(worst_grad, 1e-6);
  if (precision == "float64") {
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

INSTANTIATE_TEST_SUITE_P(Losses, TheoremOne,
                         ::testing::Values(theorem_case{"grpo", "token-mean", "float32"},
                                           theorem_case{"decoupled", "token-mean", "float32"},
                                           theorem_case{"grpo", "seq-mean", "float32"},
                                           theorem_case{"grpo", "token-mean", "float64"},
                                           theorem_case{"decoupled", "token-mean", "float64"},
                                           theorem_case{"grpo", "seq-mean", "float64"}),
                         [](const auto& info) {
                           auto n =
                               info.param.loss + "_" + info.param.agg + "_" + info.param.precision;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(SharedPrompt, PackedLogprobsAndGradientsEqualUnpacked) {
  auto samples = make_samples(3, 5, 21);
  auto p = ptrs(samples);
  auto model = fresh_policy();
  auto grads_of = [&](bool packed, at::Tensor* logp_out, packed_batch* batch_out) {
    model->zero_grad();
    auto b = pack_samples(p, packed, torch::kCPU);
    auto h = model->hidden(b.ids, b.pos, b.mask);
    auto logits = model->lm_logits(h.reshape({-1, h.size(-1)}).index_select(0, b.src));
    auto logp = at::log_softmax(logits, -1).gather(1, b.targets.unsqueeze(1)).squeeze(1);
    // A fixed weighting of the tokens (a token mean), so every log-prob's gradient matters.
    auto w = at::linspace(-1, 1, logp.size(0)) / logp.size(0);
    (logp * w).sum().backward();
    *logp_out = logp.detach();
    *batch_out = b;
    std::vector<at::Tensor> g;
    for (auto& q : model->parameters())
      g.push_back(q.grad().clone());
    return g;
  };
  at::Tensor lp_packed, lp_plain;
  packed_batch bp, bu;
  auto gp = grads_of(true, &lp_packed, &bp);
  auto gu = grads_of(false, &lp_plain, &bu);
  EXPECT_TRUE(at::allclose(lp_packed, lp_plain, 0, 1e-5));
  EXPECT_LE(max_abs_diff(gp, gu), 1e-5);
  // Tokens actually processed: Lp + K Lr per prompt instead of K (Lp + Lr).
  int64_t packed = 0, plain = 0;
  for (int g = 0; g < 3; ++g) {
    packed += static_cast<int64_t>(samples[g * 5].prompt.size());
    for (int k = 0; k < 5; ++k) {
      packed += static_cast<int64_t>(samples[g * 5 + k].response.size());
      plain += static_cast<int64_t>(samples[g * 5 + k].prompt.size() +
                                    samples[g * 5 + k].response.size());
    }
  }
  EXPECT_EQ(bp.tokens_processed, packed);
  EXPECT_EQ(bu.tokens_processed, plain);
  EXPECT_EQ(bp.ids.size(0), 3);
  EXPECT_EQ(bu.ids.size(0), 15);
}

TEST(SharedPrompt, TrainerUpdateMatchesUnpacked) {
  auto samples = make_samples(4, 4, 5);
  auto st = settings("grpo");
  std::vector<size_t> order(samples.size());
  std::iota(order.begin(), order.end(), 0);
  auto plain = one_update(st, samples, order, 8);
  st.trainer.shared_prompt_attention = true;
  auto packed = one_update(st, samples, order, 8);
  EXPECT_LE(max_abs_diff(plain, packed), 1e-6);
}

TEST(TriModel, RolloutAndTrainerLogprobsAgreeForTheSameWeights) {
  auto policy = fresh_policy();
  for (double T : {1.0, 0.8}) {
    generator_options go;
    go.max_slots = 6;
    go.max_seq_len = 40;
    go.seed = 9;
    go.eos_id = 2;
    generator gen(policy.ptr(), go);
    std::vector<scored_sample> samples;
    for (uint32_t g = 0; g < 3; ++g)
      for (uint32_t k = 0; k < 4; ++k) {
        gen_request r;
        r.id = g * 4 + k;
        r.prompt_id = g;
        r.sample_index = k;
        r.prompt = {1, static_cast<int32_t>(5 + g), 7, 9};
        r.max_new_tokens = 12;
        r.sampling.temperature = T;
        gen.submit(r);
      }
    for (auto& res : gen.run_all()) {
      scored_sample s;
      s.uid = res.request.id;
      s.group_id = res.request.prompt_id;
      s.prompt = res.request.prompt;
      s.response = res.request.tokens;
      s.logprobs = res.request.logprobs;
      s.versions = res.request.versions;
      samples.push_back(s);
    }
    for (bool packed : {false, true}) {
      auto st = settings("decoupled");
      st.temperature = T;
      st.trainer.shared_prompt_attention = packed;
      policy_trainer t(policy, st);
      auto lp = t.response_logprobs(*t.policy(), ptrs(samples));
      std::vector<float> rollout;
      for (auto& s : samples)
        rollout.insert(rollout.end(), s.logprobs.begin(), s.logprobs.end());
      auto want = at::tensor(rollout);
      EXPECT_TRUE(at::allclose(lp, want, 0, 1e-5))
          << "T=" << T << " packed=" << packed << " max diff " << (lp - want).abs().max();
    }
  }
}

TEST(TriModel, OldStaysAtTheBatchStartAndReferenceAtTheInitialWeights) {
  auto st = settings("grpo");
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
  auto st = settings("grpo");
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
  policy_trainer t(fresh_policy(), settings("decoupled"));
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

TEST(Loglinear, TrainerUsesPerTokenVersionsOfPartialRollouts) {
  // A partial rollout: tokens from versions 0 and 2 under a version-2 trainer: d = 2 then 0.
  auto st = settings("decoupled");
  st.algorithm.prox_logp = "loglinear";
  policy_trainer t(fresh_policy(), st);
  t.set_version(2);
  auto samples = make_samples(1, 2, 6, 0);
  for (auto& s : samples)
    for (size_t j = s.versions.size() / 2; j < s.versions.size(); ++j)
      s.versions[j] = 2;
  t.begin_batch();
  t.accumulate(ptrs(samples));
  auto u = t.step();
  EXPECT_EQ(u.staleness_max, 2);
  EXPECT_FALSE(u.skipped);
  EXPECT_GE(u.prox_time_ms, 0.0);
}

}  // namespace
