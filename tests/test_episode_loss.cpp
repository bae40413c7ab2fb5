// Multi-turn episodes in the trainer: the environment's tokens are context only. They are out
// of the loss, its statistics and its token count; only the model's tokens are trained on.
// Each test states the bug it catches.

#include <gtest/gtest.h>

#include <vector>

#include "runtime/model/model.hpp"
#include "runtime/train/packing.hpp"
#include "runtime/train/policy_trainer.hpp"
#include "runtime/train/sample_codec.hpp"
#include "tests/tiny_model.hpp"
#include "tests/trainer_samples.hpp"

using namespace asyncrl;
using test::ptrs;

namespace {

// 2 prompts x 3 responses of 6..9 tokens; tokens 2 and 3 of each response are the
// environment's (loss_mask 0), the rest the model's.
std::vector<scored_sample> episodes() {
  test::sample_draw d;
  d.groups = 2, d.group_size = 3, d.prompt_max = 5, d.response_min = 6, d.response_max = 9;
  auto v = test::random_samples(d, 21);
  for (auto& s : v) {
    s.loss_mask.assign(s.response.size(), 1);
    s.loss_mask[2] = s.loss_mask[3] = 0;
    s.turns = 2;
  }
  return v;
}

int64_t model_tokens(const std::vector<scored_sample>& v) {
  int64_t n = 0;
  for (auto& s : v)
    for (size_t j = 0; j < s.response.size(); ++j)
      n += model_token(s, j);
  return n;
}

policy_trainer_params settings(loss_kind loss) {
  policy_trainer_params st;
  st.loss = loss;
  st.prox_logp = prox_method::recompute;
  st.use_rollout_logprobs = true;  // the behaviour log-probs enter the ratio directly
  st.loss_agg = loss_aggregation::token_mean;
  st.lr = 1e-3;
  st.deterministic_accumulation = true;
  return st;
}

struct one_step {
  std::vector<at::Tensor> grad;
  update_stats stats;
};

one_step train(const policy_trainer_params& st, const std::vector<scored_sample>& v) {
  policy_trainer t(init_causal_lm(test::tiny_model_config(), 0.3, 11, torch::kCPU), st);
  t.begin_batch();
  t.accumulate(ptrs(v));
  one_step out;
  out.grad = t.pending_gradient();
  out.stats = t.step();
  return out;
}

bool same(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (!a[i].equal(b[i])) return false;
  return true;
}

}  // namespace

// Catches: the mask ignored or flipped (the environment's log-probs would enter the ratio),
// and the token count taken over every response token (token-mean would divide by too many).
TEST(EpisodeLoss, EnvironmentTokensAreOutOfTheLossAndItsTokenCount) {
  for (auto loss : {loss_kind::grpo, loss_kind::decoupled}) {
    SCOPED_TRACE(to_string(loss));
    const auto st = settings(loss);
    auto base = episodes();
    auto a = train(st, base);
    int64_t response_tokens = 0;
    for (auto& s : base)
      response_tokens += static_cast<int64_t>(s.response.size());
    EXPECT_EQ(a.stats.tokens_trained, model_tokens(base));
    EXPECT_EQ(a.stats.tokens_trained, response_tokens - 2 * static_cast<int64_t>(base.size()));

    // The environment's tokens have no behaviour log-prob: any value there changes nothing.
    auto env_changed = base;
    for (auto& s : env_changed)
      s.logprobs[2] = s.logprobs[3] = -7.5f;
    EXPECT_TRUE(same(train(st, env_changed).grad, a.grad));

    // Control: the same change on a model token does change the gradient (the check above
    // would pass if the behaviour log-probs were never used at all).
    auto model_changed = base;
    for (auto& s : model_changed)
      s.logprobs[1] = -7.5f;
    EXPECT_FALSE(same(train(st, model_changed).grad, a.grad));

    // A flipped mask trains on the other tokens: another gradient and another count.
    auto flipped = base;
    for (auto& s : flipped)
      for (auto& m : s.loss_mask)
        m = static_cast<uint8_t>(1 - m);
    auto f = train(st, flipped);
    EXPECT_FALSE(same(f.grad, a.grad));
    EXPECT_EQ(f.stats.tokens_trained, 2 * static_cast<int64_t>(base.size()));
  }
}

// Catches: loss_mask rows scattered to the wrong sample or offset (the mask is per token, the
// packing reorders samples by group).
TEST(EpisodeLoss, PackedLossMaskFollowsEachSamplesTokens) {
  auto v = episodes();
  v[4].loss_mask.clear();  // a single-turn response among episodes: every token trained
  for (bool shared : {false, true}) {
    auto b = pack_samples(ptrs(v), shared, torch::kCPU);
    auto rows = loss_mask(b);  // (M, L)
    ASSERT_EQ(rows.size(0), static_cast<int64_t>(v.size()));
    for (size_t m = 0; m < v.size(); ++m)
      for (size_t j = 0; j < v[m].response.size(); ++j)
        EXPECT_EQ(rows[m][j].item<bool>(), model_token(v[m], j))
            << "sample " << m << " token " << j;
    EXPECT_EQ(b.loss_tokens, model_tokens(v));
  }
  auto bad = v;
  bad[0].loss_mask.pop_back();
  EXPECT_THROW(pack_samples(ptrs(bad), false, torch::kCPU), std::invalid_argument);
}

// Catches: a data-parallel rank training the environment's tokens because the mask was lost on
// the way (the sample codec carries micro-batches to the other ranks).
TEST(EpisodeLoss, SampleCodecCarriesTheLossMask) {
  auto v = episodes();
  v[1].loss_mask.clear();
  auto back = decode_samples(encode_samples(ptrs(v)));
  ASSERT_EQ(back.size(), v.size());
  for (size_t i = 0; i < v.size(); ++i)
    EXPECT_EQ(back[i].loss_mask, v[i].loss_mask) << i;
}
