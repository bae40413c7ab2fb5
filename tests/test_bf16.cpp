// bf16 end to end on the CPU: a float32 model computing in bf16 (the trainer's mixed precision)
// is the same function as its bf16 cast (the rollouters' weights); bf16 stays within rounding of
// float32 and its gradients reach the float32 masters; bf16 generation matches the bf16 trainer
// within rounding; the rollout/trainer mismatch metrics match hand-derived values; a bf16
// trainer keeps float32 masters (its bitwise resume is in test_trainer_state.cpp); bf16
// snapshots are the one cast of the masters.

#include <gtest/gtest.h>
#include <torch/nn/module.h>

#include <cmath>

#include "runtime/common/rng.hpp"
#include "runtime/generation/generator.hpp"
#include "runtime/model/model.hpp"
#include "runtime/model/weight_sync.hpp"
#include "runtime/train/packing.hpp"
#include "runtime/train/policy_trainer.hpp"
#include "tests/tiny_model.hpp"
#include "tests/trainer_samples.hpp"

using namespace asyncrl;
using test::ptrs;

namespace {

CausalLM fresh(uint64_t seed = 11) {
  return init_causal_lm(test::tiny_model_config(), 0.3, seed, torch::kCPU);
}

// A copy of `m` whose parameters are bf16 (what a bf16 rollouter holds).
CausalLM bf16_copy(const CausalLM& m) {
  CausalLM c(m->config());
  load_snapshot(*c, snapshot_weights(*m, 0), /*alias=*/false);
  cast_parameters(*c, torch::kBFloat16);
  return c;
}

// (1, 12) ids and positions.
std::pair<at::Tensor, at::Tensor> some_ids() {
  auto ids = at::tensor(std::vector<int64_t>{1, 5, 7, 9, 3, 4, 11, 20, 6, 8, 2, 13}).view({1, 12});
  auto pos = at::arange(12, at::kLong).view({1, 12});
  return {ids, pos};
}

// |a - b| relative to |b|: (mean over elements, max over elements), each divided by the same
// statistic of |b|.
std::pair<double, double> rel_error(const at::Tensor& a, const at::Tensor& b) {
  auto x = a.to(at::kDouble), y = b.to(at::kDouble);
  auto d = (x - y).abs();
  return {(d.mean() / y.abs().mean()).item<double>(), (d.max() / y.abs().max()).item<double>()};
}

// Catches a weight left uncast in the mixed-precision forward (that layer would compute in
// float32 and the two would differ), and activations that drift back to float32.
TEST(Bf16, MixedPrecisionMastersComputeExactlyLikeTheirBf16Cast) {
  auto master = fresh();
  auto cast = bf16_copy(master);
  master->set_compute_dtype(at::kBFloat16);
  EXPECT_EQ(master->compute_dtype(), at::kBFloat16);
  EXPECT_EQ(cast->compute_dtype(), at::kBFloat16);
  torch::NoGradGuard ng;
  auto [ids, pos] = some_ids();
  auto h_master = master->hidden(ids, pos);
  auto h_cast = cast->hidden(ids, pos);
  EXPECT_EQ(h_master.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(at::equal(h_master, h_cast));
  EXPECT_TRUE(at::equal(master->lm_logits(h_master), cast->lm_logits(h_cast)));
  // The padding-free path (per-block attention) too: two sequences of 5 and 7 tokens.
  auto plan = plan_segments({{0, 5, 0, 0}, {5, 7, 0, 0}}, 12, at::kCPU);
  auto seg_pos = at::tensor(std::vector<int64_t>{0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 5, 6}).view({1, 12});
  EXPECT_TRUE(at::equal(master->hidden(ids, seg_pos, plan), cast->hidden(ids, seg_pos, plan)));
}

// Catches bf16 logits far from float32 (a wrong cast, a bf16 softmax over masked -inf), and a
// backward that does not reach the float32 parameters or reaches them in bf16.
TEST(Bf16, StaysWithinRoundingOfFloat32AndItsGradientsReachFloat32Masters) {
  auto ref = fresh();
  auto mixed = fresh();
  mixed->set_compute_dtype(at::kBFloat16);
  auto [ids, pos] = some_ids();
  auto loss_of = [&](CausalLM& m) {
    auto logits = at_least_float(m->forward(ids, pos));  // (1, 12, V)
    EXPECT_EQ(logits.scalar_type(), at::kFloat);
    return std::make_pair(logits.detach(), at::log_softmax(logits, -1).select(-1, 4).sum());
  };
  auto [l_ref, loss_ref] = loss_of(ref);
  auto [l_mix, loss_mix] = loss_of(mixed);
  // bf16 keeps 8 bits of mantissa (2^-8 relative per rounding). This random model (std 0.3)
  // amplifies: rounding only the weights to bf16 and computing in float32 moves its logits by
  // about 0.9% of their mean magnitude, computing in bf16 as well by about 1.7% (at most 5% of
  // the largest logit); the line printed below gives both. A float32 layer or a wrong cast gives
  // 0 or far more.
  auto rounded = bf16_copy(ref);
  cast_parameters(*rounded, torch::kFloat);  // bf16-rounded weights, float32 arithmetic
  auto l_rounded = at_least_float(rounded->forward(ids, pos)).detach();
  auto [mean_rel, max_rel] = rel_error(l_mix, l_ref);
  std::cout << "[bf16-logits] mean relative error: weights rounded to bf16 "
            << rel_error(l_rounded, l_ref).first << ", bf16 compute " << mean_rel << " (max "
            << max_rel << ")\n";
  EXPECT_LT(mean_rel, 0.03);
  EXPECT_LT(max_rel, 0.1);
  EXPECT_GT(mean_rel, 1e-4);  // it did compute in bf16
  loss_ref.backward();
  loss_mix.backward();
  auto pr = ref->parameters(), pm = mixed->parameters();
  ASSERT_EQ(pr.size(), pm.size());
  for (size_t i = 0; i < pr.size(); ++i) {
    ASSERT_TRUE(pm[i].grad().defined()) << i;
    EXPECT_EQ(pm[i].scalar_type(), at::kFloat) << i;
    EXPECT_EQ(pm[i].grad().scalar_type(), at::kFloat) << i;
    auto a = pm[i].grad().flatten().to(at::kDouble), b = pr[i].grad().flatten().to(at::kDouble);
    const double cos = (a.dot(b) / (a.norm() * b.norm() + 1e-30)).item<double>();
    EXPECT_GT(cos, 0.99) << "parameter " << i;
  }
}

std::vector<scored_sample> generate(const CausalLM& model) {
  return test::generated_samples(model.ptr());
}

policy_trainer_params settings(train_precision precision) {
  policy_trainer_params st;
  st.loss = loss_kind::grpo;
  st.lr = 1e-3;
  st.precision = precision;
  return st;
}

int64_t tokens_of(const std::vector<scored_sample>& v) {
  int64_t n = 0;
  for (auto& s : v)
    n += static_cast<int64_t>(s.response.size());
  return n;
}

// A bf16 generator (bf16 weights and KV cache: a float32 cache would fail its index_put) against
// trainers over the float32 masters. Against a float32 trainer the gap is bf16's rounding of the
// weights and activations: visible, and small. Against the bf16 trainer it is the same function
// computed by other kernels (batched decode with a cache vs one packed forward): at most that
// (libtorch 2.11's CPU kernels even agree exactly; 1.13's differ in the last bits). float32
// against float32 agrees to float32 rounding. The step's mismatch metrics measure exactly this.
TEST(Bf16, Bf16RolloutsMatchTheBf16TrainerWithinRoundingAndTheMetricsSayHowClose) {
  auto master = fresh();
  auto run = [&](bool bf16_rollout, train_precision trainer) {
    auto samples = generate(bf16_rollout ? bf16_copy(master) : master);
    policy_trainer t(fresh(), settings(trainer));
    t.begin_batch();
    t.accumulate(ptrs(samples));
    auto u = t.step();
    EXPECT_EQ(u.mismatch_tokens, tokens_of(samples));
    return u;
  };
  auto f32 = run(false, train_precision::float32);
  EXPECT_LT(f32.mismatch_abs_max, 1e-5);
  EXPECT_LT(f32.mismatch_kl_k3, 1e-9);
  auto gap = run(true, train_precision::float32);
  EXPECT_GT(gap.mismatch_abs_mean, 1e-4);
  EXPECT_LT(gap.mismatch_abs_mean, 0.05);
  EXPECT_LT(gap.mismatch_kl_k3, 1e-2);
  auto b16 = run(true, train_precision::bf16);
  EXPECT_LT(b16.mismatch_abs_mean, 0.02);
  EXPECT_LE(b16.mismatch_abs_mean, gap.mismatch_abs_mean);
  EXPECT_LT(b16.mismatch_abs_max, 0.2);
  std::cout << "[bf16-mismatch] mean |dlogp|: float32/float32 " << f32.mismatch_abs_mean
            << ", bf16 rollout/float32 trainer " << gap.mismatch_abs_mean << ", bf16/bf16 "
            << b16.mismatch_abs_mean << "\n";
}

// The mismatch metrics against hand-derived values: rollout log-probs 0.1 above the trainer's on
// the tokens whose weights the trainer holds, and 5 above on tokens of an older version, which
// must be left out. x = log pi_train - log pi_rollout = -0.1, k3 = e^x - 1 - x = 0.0048374.
// Catches a flipped sign in k3 (0.0051709), stale tokens counted, and a mean over the wrong
// count; for both proximal methods (the recomputed old model's log-probs, or the policy's).
class MismatchMetrics : public ::testing::TestWithParam<prox_method> {};

TEST_P(MismatchMetrics, MatchHandDerivedValuesOverTokensOfTheTrainersWeights) {
  auto master = fresh();
  auto samples = generate(master);  // exact float32 log-probs, version 0
  auto st = settings(train_precision::float32);
  st.loss = loss_kind::decoupled;
  st.prox_logp = GetParam();
  policy_trainer t(fresh(), st);
  t.set_version(1);  // weights version 1 = the same weights; tokens of version 0 are stale
  t.begin_batch();
  int64_t fresh_tokens = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    auto& s = samples[i];
    const bool current = i % 2 == 0;
    for (size_t j = 0; j < s.response.size(); ++j) {
      s.versions[j] = current ? 1 : 0;
      s.logprobs[j] += current ? 0.1f : 5.0f;
    }
    if (current) fresh_tokens += static_cast<int64_t>(s.response.size());
  }
  t.accumulate(ptrs(samples));
  auto u = t.step();
  EXPECT_EQ(u.mismatch_tokens, fresh_tokens);
  EXPECT_NEAR(u.mismatch_abs_mean, 0.1, 2e-5);
  EXPECT_NEAR(u.mismatch_abs_max, 0.1, 2e-5);
  EXPECT_NEAR(u.mismatch_kl_k3, std::exp(-0.1) - 1 + 0.1, 5e-6);
}

INSTANTIATE_TEST_SUITE_P(Prox, MismatchMetrics,
                         ::testing::Values(prox_method::recompute, prox_method::loglinear));

// Catches the bf16 trainer converting its masters (or their AdamW moments) to bf16, which would
// lose updates smaller than bf16's resolution, and frozen copies that compute in float32. (That a
// bf16 trainer resumes bitwise is TrainerStatePrecision/bf16 in test_trainer_state.cpp.)
TEST(Bf16, TrainerKeepsFloat32MastersAndComputesInBf16Everywhere) {
  auto samples = generate(fresh());
  policy_trainer t(fresh(), settings(train_precision::bf16));
  auto before = snapshot_weights(*t.policy(), 0);
  t.begin_batch();
  t.accumulate(ptrs(samples));
  t.step();
  for (auto& p : t.policy()->parameters())
    EXPECT_EQ(p.scalar_type(), at::kFloat);
  for (const auto& m : {t.policy(), t.old_policy(), t.reference()})
    EXPECT_EQ(m->compute_dtype(), at::kBFloat16);
  // lr 1e-3: Adam moves each weight by about 1e-3, below bf16's spacing (2^-7 relative) for most
  // of them; float32 masters keep every one of those moves.
  auto after = snapshot_weights(*t.policy(), 1);
  const float *a = before.blob->floats(), *b = after.blob->floats();
  int64_t moved = 0, moved_in_bf16 = 0;
  for (int64_t i = 0; i < after.blob->numel(); ++i) {
    moved += a[i] != b[i];
    moved_in_bf16 += at::BFloat16(a[i]).x != at::BFloat16(b[i]).x;
  }
  EXPECT_GT(moved, after.blob->numel() / 2);
  EXPECT_LT(moved_in_bf16, moved);
}

// Catches a bf16 snapshot that is not the cast of the masters (or rounds differently from
// convert_snapshot, which casts the controller's starting weights), a bf16 load that copies
// instead of sharing the buffer, and convert_snapshot copying a snapshot already in its dtype.
TEST(Bf16, SnapshotsAreTheCastOfTheMastersAndBf16RolloutersShareThem) {
  auto master = fresh();
  auto f32 = snapshot_weights(*master, 3);
  auto b16 = snapshot_weights(*master, 3, weight_dtype::bf16);
  EXPECT_EQ(b16.blob->dtype, weight_dtype::bf16);
  EXPECT_EQ(b16.blob->bytes() * 2, f32.blob->bytes());
  auto converted = convert_snapshot(f32, weight_dtype::bf16);
  EXPECT_EQ(converted.version, 3);
  EXPECT_EQ(converted.blob->data, b16.blob->data);
  EXPECT_EQ(convert_snapshot(b16, weight_dtype::bf16).blob.get(), b16.blob.get());
  // Back to float32: every bf16 value is exact in float32.
  auto back = convert_snapshot(b16, weight_dtype::float32);
  CausalLM r(master->config());
  cast_parameters(*r, torch::kBFloat16);
  load_snapshot(*r, b16, /*alias=*/true);
  auto cast = bf16_copy(master);
  auto pr = r->parameters(), pc = cast->parameters();
  const auto* base = b16.blob->data.data();
  for (size_t i = 0; i < pr.size(); ++i) {
    EXPECT_TRUE(at::equal(pr[i], pc[i])) << i;
    auto* p = static_cast<const unsigned char*>(pr[i].data_ptr());
    EXPECT_TRUE(p >= base && p < base + b16.blob->bytes()) << "parameter " << i << " was copied";
  }
  CausalLM f(master->config());
  load_snapshot(*f, back, /*alias=*/false);
  auto pf = f->parameters();
  for (size_t i = 0; i < pf.size(); ++i)
    EXPECT_TRUE(at::equal(pf[i], pc[i].to(at::kFloat))) << i;
}

// The device snapshot (what a GPU trainer publishes) run on the CPU, where it computes the same
// thing as on the GPU: one flat tensor. Catches a tensor written at the wrong offset or in the
// wrong order (its host copy and its packed bytes would differ from the host snapshot's), a
// device snapshot that packs or converts wrongly (nodes and checkpoints read those), a load
// that reads the host bytes of a device snapshot (there are none), and floats() handing out
// the empty host buffer.
TEST(Bf16, DeviceSnapshotsHoldTheHostSnapshotsValues) {
  auto master = fresh(5);
  for (auto dtype : {weight_dtype::float32, weight_dtype::bf16}) {
    auto host = snapshot_weights(*master, 7, dtype);
    auto dev = snapshot_weights(*master, 7, dtype, snapshot_place::device);
    ASSERT_TRUE(dev.blob->on_device());
    EXPECT_TRUE(dev.blob->data.empty());
    EXPECT_EQ(dev.blob->bytes(), host.blob->bytes());
    EXPECT_EQ(dev.blob->names, host.blob->names);
    EXPECT_EQ(dev.blob->shapes, host.blob->shapes);
    auto back = host_snapshot(dev);
    EXPECT_FALSE(back.blob->on_device());
    EXPECT_EQ(back.version, 7);
    EXPECT_EQ(back.blob->data, host.blob->data) << to_string(dtype);
    EXPECT_EQ(host_snapshot(host).blob.get(), host.blob.get());
    // Packing needs host bytes: the callers (the synchronizer, CAF's inspect) copy first.
    EXPECT_THROW(pack_weights(dev), std::invalid_argument);
    EXPECT_EQ(pack_weights(host_snapshot(dev)), pack_weights(host)) << to_string(dtype);
    // Loaded into a model of the snapshot's dtype: the same parameters as from the host one.
    CausalLM a(master->config()), b(master->config());
    if (dtype == weight_dtype::bf16) {
      cast_parameters(*a, torch::kBFloat16);
      cast_parameters(*b, torch::kBFloat16);
    }
    load_snapshot(*a, dev, /*alias=*/false);
    load_snapshot(*b, host, /*alias=*/false);
    auto pa = a->parameters(), pb = b->parameters();
    for (size_t i = 0; i < pa.size(); ++i)
      EXPECT_TRUE(at::equal(pa[i], pb[i])) << to_string(dtype) << " parameter " << i;
  }
  // float32 -> bf16 on the device rounds as the host cast does.
  auto f32 = snapshot_weights(*master, 2, weight_dtype::float32, snapshot_place::device);
  auto cast = convert_snapshot(f32, weight_dtype::bf16);
  EXPECT_TRUE(cast.blob->on_device());
  EXPECT_EQ(cast.version, 2);
  EXPECT_EQ(host_snapshot(cast).blob->data,
            snapshot_weights(*master, 2, weight_dtype::bf16).blob->data);
  EXPECT_THROW(f32.blob->floats(), std::logic_error);
}

}  // namespace
