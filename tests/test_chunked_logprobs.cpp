// chunked_token_logprobs (runtime/model/chunked_logprobs.hpp) against the plain full-logits
// composition (matmul, upcast, / T, log_softmax, gather) on the CPU: values, the entropy metric
// and the gradients of h and W in float32 and float64, for chunk sizes that do not divide N,
// one token per chunk, chunk = N and chunk > N, with tied weights, and against central finite
// differences; then the trainer with trainer.logprob_chunk_tokens against the full path, and
// the trainer without the frozen copies its loss does not read.

#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "runtime/model/chunked_logprobs.hpp"
#include "runtime/model/logprobs.hpp"
#include "runtime/model/model.hpp"
#include "runtime/model/precision.hpp"
#include "runtime/train/losses.hpp"
#include "runtime/train/policy_trainer.hpp"
#include "tests/tiny_model.hpp"
#include "tests/trainer_samples.hpp"

using namespace asyncrl;
using test::ptrs;

namespace {

constexpr int64_t kN = 37, kH = 16, kV = 29;

at::Generator gen(uint64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); }

// The plain composition the trainer used before: the full (N, V) logits.
at::Tensor reference_logp(const at::Tensor& h, const at::Tensor& w, const at::Tensor& t,
                          double temperature) {
  auto z = at_least_float(at::matmul(h, as_compute(w, h).t()));
  return token_logprobs(temperature == 1.0 ? z : z / temperature, t);
}

struct case_data {
  at::Tensor h, w, t, up;  // h (N, H), w (V, H), targets (N,), upstream gradient (N,)
};

// Random inputs; logits of size ~3 so that the softmax is far from uniform. The upstream
// gradient has both signs and differs per token, so a flipped sign or a token's gradient
// landing on its neighbour's row changes the result.
case_data make_case(at::ScalarType dtype, uint64_t seed) {
  auto g = gen(seed);
  case_data c;
  c.h = at::randn({kN, kH}, g, at::kDouble).to(dtype);
  c.w = (at::randn({kV, kH}, g, at::kDouble) * 0.5).to(dtype);
  c.t = at::randint(0, kV, {kN}, g, at::kLong);
  c.up = at::randn({kN}, g, at::kDouble);
  return c;
}

struct grads {
  at::Tensor logp, dh, dw;
};

// Values and the gradients of sum(up * logp) w.r.t. h and w, by `fn(h, w)`.
template <class F>
grads run(const case_data& c, F fn) {
  auto h = c.h.clone().set_requires_grad(true);
  auto w = c.w.clone().set_requires_grad(true);
  auto logp = fn(h, w);
  (logp * c.up.to(logp.scalar_type())).sum().backward();
  return {logp.detach(), h.grad(), w.grad()};
}

void expect_close(const at::Tensor& a, const at::Tensor& b, double rtol, double atol,
                  const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  ASSERT_EQ(a.scalar_type(), b.scalar_type()) << what;
  const double err = (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
  const double scale = b.to(at::kDouble).abs().max().item<double>();
  EXPECT_LE(err, atol + rtol * scale) << what << ": max abs diff " << err << " at scale " << scale;
}

struct dtype_case {
  at::ScalarType dtype;
  double rtol;
};

class ChunkedLogprobs : public ::testing::TestWithParam<dtype_case> {};

// Catches a wrong softmax sign or scale in the backward, a missing 1/T, chunk boundaries that
// skip or repeat a row (chunk sizes 1, 5, 8 leave remainders), W's gradient taken from the
// last chunk only, and entropy computed from the wrong rows.
TEST_P(ChunkedLogprobs, MatchFullLogitsValuesEntropyAndGradients) {
  const auto [dtype, rtol] = GetParam();
  const auto c = make_case(dtype, 7);
  for (double T : {1.0, 0.7}) {
    const auto want = run(c, [&](auto& h, auto& w) { return reference_logp(h, w, c.t, T); });
    const auto want_ent = rl::entropy_from_logits(
        at::matmul(c.h, c.w.t()) / T);  // (N,) the trainer's metric on full logits
    for (int64_t chunk : {int64_t{1}, int64_t{5}, int64_t{8}, kN, kN + 100}) {
      const std::string what = "T " + std::to_string(T) + " chunk " + std::to_string(chunk);
      at::Tensor ent;
      const auto got = run(c, [&](auto& h, auto& w) {
        auto out = chunked_token_logprobs(h, w, c.t, T, chunk, /*with_entropy=*/true);
        ent = out.entropy;
        EXPECT_FALSE(ent.requires_grad());
        return out.logp;
      });
      expect_close(got.logp, want.logp, rtol, rtol, what + " logp");
      expect_close(ent, want_ent, rtol, rtol, what + " entropy");
      expect_close(got.dh, want.dh, rtol, rtol * 1e-2, what + " d/dh");
      expect_close(got.dw, want.dw, rtol, rtol * 1e-2, what + " d/dW");
      if (chunk >= kN)  // one chunk: the same operations, so the same bits
        EXPECT_TRUE(at::equal(got.logp, want.logp)) << what;
    }
  }
}

// Tied weights: W is also the embedding that makes h, so its gradient has two paths (the
// embedding's scatter and the LM head's) that autograd must sum with the chunked one.
TEST_P(ChunkedLogprobs, TiedWeightsSumBothUses) {
  const auto [dtype, rtol] = GetParam();
  const auto c = make_case(dtype, 11);
  auto ids = at::randint(0, kV, {kN}, gen(3), at::kLong);
  auto hidden = [&](const at::Tensor& w) { return at::tanh(w.index_select(0, ids) * 2.0); };
  const auto want = run(c, [&](auto&, auto& w) { return reference_logp(hidden(w), w, c.t, 0.9); });
  const auto got = run(c, [&](auto&, auto& w) {
    return chunked_token_logprobs(hidden(w), w, c.t, 0.9, 6).logp;
  });
  expect_close(got.logp, want.logp, rtol, rtol, "logp");
  expect_close(got.dw, want.dw, rtol, rtol * 1e-2, "tied d/dW");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ChunkedLogprobs,
                         ::testing::Values(dtype_case{at::kFloat, 1e-5},
                                           dtype_case{at::kDouble, 1e-12}),
                         [](const auto& info) {
                           return info.param.dtype == at::kFloat ? "float32" : "float64";
                         });

// The backward against central finite differences of the forward, in float64: independent of
// autograd's own log_softmax formula, so a sign error shared with the reference composition
// would still show. h[i][k] and W[v][k] for a few entries across chunk boundaries (chunk 4).
TEST(ChunkedLogprobsCheck, BackwardMatchesFiniteDifferences) {
  const auto c = make_case(at::kDouble, 5);
  const double T = 0.8;
  const auto got = run(c, [&](auto& h, auto& w) {
    return chunked_token_logprobs(h, w, c.t, T, 4).logp;
  });
  auto objective = [&](const at::Tensor& h, const at::Tensor& w) {
    return (chunked_token_logprobs(h, w, c.t, T, 4).logp * c.up).sum().item<double>();
  };
  const double eps = 1e-6;
  for (auto [i, k] : {std::pair<int64_t, int64_t>{0, 0}, {3, 5}, {4, 5}, {kN - 1, kH - 1}}) {
    auto hp = c.h.clone(), hm = c.h.clone();
    hp[i][k] += eps;
    hm[i][k] -= eps;
    const double fd = (objective(hp, c.w) - objective(hm, c.w)) / (2 * eps);
    EXPECT_NEAR(got.dh[i][k].item<double>(), fd, 1e-7 * (1 + std::abs(fd))) << i << "," << k;
  }
  for (int64_t v = 0; v < kV; v += 7) {
    auto wp = c.w.clone(), wm = c.w.clone();
    wp[v][2] += eps;
    wm[v][2] -= eps;
    const double fd = (objective(c.h, wp) - objective(c.h, wm)) / (2 * eps);
    EXPECT_NEAR(got.dw[v][2].item<double>(), fd, 1e-7 * (1 + std::abs(fd))) << v;
  }
}

// Hand values: W = [e0; 0; ...] and h_i = x_i e0 give logits (x_i, 0, ..., 0), so
// log p(0) = x - log(e^x + V - 1), log p(j) = -log(e^x + V - 1) for j > 0; one chunk per
// token and a chunk that ends mid-batch each must give every row its own value.
TEST(ChunkedLogprobsCheck, HandValuesPerRow) {
  const int64_t N = 7, V = 5;
  auto w = at::zeros({V, 3}, at::kDouble);
  w[0][0] = 1.0;
  auto x = at::arange(N, at::kDouble) - 3;  // -3 .. 3: each row differs
  auto h = at::zeros({N, 3}, at::kDouble);
  h.select(1, 0).copy_(x);
  auto t = at::tensor({0, 1, 0, 4, 0, 2, 3}, at::kLong);
  for (int64_t chunk : {1, 3, 7}) {
    auto lp = chunked_token_logprobs(h, w, t, 1.0, chunk).logp;
    for (int64_t i = 0; i < N; ++i) {
      const double xi = x[i].item<double>();
      const double lse = std::log(std::exp(xi) + double(V - 1));
      const double want = (t[i].item<int64_t>() == 0 ? xi : 0.0) - lse;
      EXPECT_NEAR(lp[i].item<double>(), want, 1e-14) << "chunk " << chunk << " row " << i;
    }
  }
}

// bf16 compute with float32 master weights: W's gradient comes back float32 (summed over
// chunks in float32), close to the reference's bf16 gradient cast up.
TEST(ChunkedLogprobsCheck, Bf16ComputeGivesFloat32MasterGradient) {
  const auto c = make_case(at::kFloat, 9);
  auto to_bf16 = [](const at::Tensor& h) { return h.to(at::kBFloat16); };
  const auto want =
      run(c, [&](auto& h, auto& w) { return reference_logp(to_bf16(h), w, c.t, 1.0); });
  const auto got = run(c, [&](auto& h, auto& w) {
    return chunked_token_logprobs(to_bf16(h), w, c.t, 1.0, 8).logp;
  });
  EXPECT_EQ(got.logp.scalar_type(), at::kFloat);
  EXPECT_EQ(got.dw.scalar_type(), at::kFloat);
  expect_close(got.logp, want.logp, 2e-2, 2e-2, "bf16 logp");
  expect_close(got.dw, want.dw, 2e-2, 2e-2, "bf16 d/dW");
  expect_close(got.dh, want.dh, 2e-2, 2e-2, "bf16 d/dh");
}

// --- the trainer -----------------------------------------------------------------------------

policy_trainer_params trainer_params(int64_t chunk, train_precision precision) {
  policy_trainer_params p;
  p.loss = loss_kind::grpo;
  p.kl_coef = 0.05;
  p.lr = 1e-3;
  p.precision = precision;
  p.temperature = 0.9;
  p.logprob_chunk_tokens = chunk;
  return p;
}

std::vector<scored_sample> samples(uint64_t seed) {
  test::sample_draw d;
  d.groups = 2, d.group_size = 3, d.prompt_max = 6, d.response_min = 2, d.response_max = 9;
  return test::random_samples(d, seed);
}

CausalLM fresh(bool tied) {
  auto cfg = test::tiny_model_config();
  cfg.tie_word_embeddings = tied;
  return init_causal_lm(cfg, 0.3, 11, torch::kCPU);
}

// trainer.logprob_chunk_tokens = 3 (many chunks per micro-batch) against 0 (the full logits):
// the same gradient, loss and entropy metric, untied and tied, float32 and float64. Catches the
// trainer feeding the chunked path the wrong weight (the embedding of an untied model), the
// wrong temperature, or an entropy summed over the wrong tokens.
TEST(ChunkedLogprobsTrainer, ChunkedPathMatchesFullLogits) {
  const auto s = samples(21);
  for (bool tied : {false, true})
    for (auto [precision, tol] : {std::pair{train_precision::float32, 1e-5},
                                  std::pair{train_precision::float64, 1e-12}}) {
      const std::string what = std::string(tied ? "tied " : "untied ") +
                               (precision == train_precision::float64 ? "float64" : "float32");
      policy_trainer full(fresh(tied), trainer_params(0, precision));
      policy_trainer chunked(fresh(tied), trainer_params(3, precision));
      for (auto* t : {&full, &chunked}) {
        t->begin_batch();
        t->accumulate(ptrs(s));
      }
      const auto ga = full.pending_gradient(), gb = chunked.pending_gradient();
      ASSERT_EQ(ga.size(), gb.size());
      for (size_t i = 0; i < ga.size(); ++i)
        expect_close(gb[i], ga[i], tol, tol * 1e-2, what + " gradient " + std::to_string(i));
      const auto ua = full.step(), ub = chunked.step();
      EXPECT_NEAR(ub.loss, ua.loss, tol * (1 + std::abs(ua.loss))) << what;
      EXPECT_NEAR(ub.entropy, ua.entropy, tol * ua.entropy) << what;
      EXPECT_NEAR(ub.kl, ua.kl, tol) << what;
    }
}

// A loss that reads neither frozen copy (the decoupled loss with the loglinear proximal policy,
// kl_coef 0, no kl metric) builds neither, takes the same update as a trainer that holds both,
// and saves and restores its state without them. A trainer that needs them refuses that state.
TEST(ChunkedLogprobsTrainer, FrozenCopiesOnlyWhenRead) {
  auto lean = trainer_params(2048, train_precision::float32);
  lean.loss = loss_kind::decoupled;
  lean.prox_logp = prox_method::loglinear;
  lean.kl_coef = 0;
  lean.compute_ref = false;
  auto with_ref = lean;
  with_ref.compute_ref = true;  // the kl metric reads the reference; the loss reads no old model
  policy_trainer a(fresh(false), lean), b(fresh(false), with_ref);
  EXPECT_FALSE(a.old_policy());
  EXPECT_FALSE(a.reference());
  EXPECT_FALSE(b.old_policy());
  EXPECT_TRUE(b.reference());
  auto grpo_rollout = lean;
  grpo_rollout.loss = loss_kind::grpo;
  grpo_rollout.use_rollout_logprobs = true;
  EXPECT_FALSE(policy_trainer(fresh(false), grpo_rollout).old_policy());
  auto grpo = grpo_rollout;
  grpo.use_rollout_logprobs = false;
  EXPECT_TRUE(policy_trainer(fresh(false), grpo).old_policy());

  const auto s = samples(5);
  for (auto* t : {&a, &b}) {
    t->begin_batch();
    t->accumulate(ptrs(s));
  }
  const auto ga = a.pending_gradient(), gb = b.pending_gradient();
  for (size_t i = 0; i < ga.size(); ++i)
    EXPECT_TRUE(at::equal(ga[i], gb[i])) << "gradient " << i;
  a.step();
  b.step();
  const auto state = a.save_state();
  policy_trainer c(fresh(false), lean);
  c.load_state(state);
  EXPECT_EQ(c.version(), a.version());
  for (size_t i = 0; i < a.policy()->parameters().size(); ++i)
    EXPECT_TRUE(at::equal(c.policy()->parameters()[i], a.policy()->parameters()[i]));
  policy_trainer d(fresh(false), with_ref);
  EXPECT_THROW(d.load_state(state), std::runtime_error);
}

}  // namespace
