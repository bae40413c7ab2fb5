// policy_trainer::save_state / load_state: a trainer restored from a save continues bitwise as
// the original does (weights of all three models, AdamW moments, lr-schedule position, version,
// skip count), and a state that does not fit the trainer is refused by name, changing nothing.

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "runtime/checkpoint/checkpoint_file.hpp"
#include "runtime/common/rng.hpp"
#include "runtime/model/model.hpp"
#include "runtime/train/policy_trainer.hpp"
#include "tests/test_util.hpp"
#include "tests/tiny_model.hpp"
#include "tests/trainer_samples.hpp"

using namespace asyncrl;
using test::ptrs;

namespace {

// `n` prompts with 3 responses each, tokens, behaviour log-probs and advantages from `seed`.
std::vector<scored_sample> make_samples(int n, uint64_t seed) {
  test::sample_draw d;
  d.groups = n, d.group_size = 3, d.prompt_max = 5, d.response_min = 2, d.response_max = 7;
  return test::random_samples(d, seed);
}

// GRPO against the old policy with a KL term: old and reference both enter the loss, so a
// resume that loses either changes the gradient. The lr changes every step (warmup, then
// cosine), so a resume that loses the schedule position changes the update.
policy_trainer_params settings(train_precision precision) {
  policy_trainer_params st;
  st.loss = loss_kind::grpo;
  st.kl_coef = 0.05;
  st.lr = 1e-2;
  st.lr_schedule = lr_schedule_kind::cosine;
  st.warmup_steps = 2;
  st.total_steps = 8;
  st.min_lr_ratio = 0.1;
  st.grad_clip = 1.0;
  st.precision = precision;
  return st;
}

CausalLM policy_from(uint64_t seed, const model_config& cfg = test::tiny_model_config()) {
  return init_causal_lm(cfg, 0.3, seed, torch::kCPU);
}

bool same_weights(const CausalLM& a, const CausalLM& b, std::string* first_diff) {
  auto pa = a->ordered_parameters(), pb = b->ordered_parameters();
  if (pa.size() != pb.size()) return false;
  for (size_t i = 0; i < pa.size(); ++i)
    if (pa[i].second.scalar_type() != pb[i].second.scalar_type() ||
        !pa[i].second.equal(pb[i].second)) {
      *first_diff = pa[i].first;
      return false;
    }
  return true;
}

void expect_same_trainers(const policy_trainer& a, const policy_trainer& b, const char* when) {
  std::string diff;
  EXPECT_TRUE(same_weights(a.policy(), b.policy(), &diff)) << when << ": policy " << diff;
  EXPECT_TRUE(same_weights(a.old_policy(), b.old_policy(), &diff)) << when << ": old " << diff;
  EXPECT_TRUE(same_weights(a.reference(), b.reference(), &diff)) << when << ": reference " << diff;
  EXPECT_EQ(a.version(), b.version()) << when;
  EXPECT_EQ(a.skipped_steps(), b.skipped_steps()) << when;
}

// The run after the save: a step inside the current batch (old stays at the batch start, so
// old != policy), then a new batch and a step.
std::vector<update_stats> continue_training(policy_trainer& t, const std::vector<scored_sample>& s3,
                                            const std::vector<scored_sample>& s4) {
  std::vector<update_stats> out;
  t.accumulate(ptrs(s3));
  out.push_back(t.step());
  t.begin_batch();
  t.accumulate(ptrs(s4));
  out.push_back(t.step());
  return out;
}

class TrainerStatePrecision : public ::testing::TestWithParam<train_precision> {};

// Trainer A: a step, a skipped (non-finite) step, a step; save; two more steps. Trainer B: built
// from other initial weights, with a gradient pending, loads the save (through a checkpoint
// file) and takes the same two steps. Everything must be bitwise equal. Catches a lost or
// re-initialised AdamW state (policy differs), a lost schedule position (lr differs), a lost
// old or reference model (loss and gradient differ), version or skip count not restored or
// mixed up (the skipped step makes them differ), float64 saved through float32, and a pending
// gradient of B's that survives the load.
TEST_P(TrainerStatePrecision, ResumeContinuesBitwise) {
  const auto st = settings(GetParam());
  const auto s1 = make_samples(2, 1), s2 = make_samples(2, 2), s3 = make_samples(2, 3),
             s4 = make_samples(3, 4);
  auto bad = s1;
  bad[0].advantage = std::nan("");

  policy_trainer a(policy_from(11), st);
  a.begin_batch();
  a.accumulate(ptrs(s1));
  ASSERT_FALSE(a.step().skipped);
  a.accumulate(ptrs(bad));
  ASSERT_TRUE(a.step().skipped);
  a.accumulate(ptrs(s2));
  ASSERT_FALSE(a.step().skipped);
  ASSERT_EQ(a.version(), 2);
  ASSERT_EQ(a.skipped_steps(), 1);
  const std::string saved = a.save_state();

  // Through a checkpoint file, as a resume does: the archive is binary with zero bytes.
  test::temp_dir d("trainer-state");
  checkpoint_file c;
  c.step = 3;
  c.sections["trainer"] = saved;
  write_checkpoint(d.path().string(), c, 1);
  const auto back = read_checkpoint(checkpoint_path(d.path().string(), 3));

  policy_trainer b(policy_from(99), st);
  std::string diff;
  ASSERT_FALSE(same_weights(a.policy(), b.policy(), &diff));  // else the test proves nothing
  b.begin_batch();
  b.accumulate(ptrs(s4));  // pending, to be dropped by the load
  b.load_state(back.sections.at("trainer"));
  expect_same_trainers(a, b, "after load");

  auto ua = continue_training(a, s3, s4);
  auto ub = continue_training(b, s3, s4);
  expect_same_trainers(a, b, "after two more steps");
  for (size_t i = 0; i < ua.size(); ++i) {
    EXPECT_EQ(ua[i].lr, ub[i].lr) << "step " << i;
    EXPECT_EQ(ua[i].loss, ub[i].loss) << "step " << i;
    EXPECT_EQ(ua[i].kl, ub[i].kl) << "step " << i;
    EXPECT_EQ(ua[i].grad_norm, ub[i].grad_norm) << "step " << i;
  }
  // The schedule really moves: steps 3 and 4 (0-based) have their own lr, not step 0's.
  const lr_schedule sched{st.lr_schedule, st.lr, st.warmup_steps, st.total_steps, st.min_lr_ratio};
  EXPECT_EQ(ua[0].lr, sched.at(3));
  EXPECT_EQ(ua[1].lr, sched.at(4));
  EXPECT_NE(sched.at(3), sched.at(0));
  EXPECT_NE(sched.at(4), sched.at(3));
  // And old is not the policy after the in-batch step: losing it would have mattered.
  EXPECT_FALSE(same_weights(a.old_policy(), a.policy(), &diff));
}

INSTANTIATE_TEST_SUITE_P(Precision, TrainerStatePrecision,
                         ::testing::Values(train_precision::float32, train_precision::float64,
                                           train_precision::bf16),
                         [](const auto& info) { return std::string(to_string(info.param)); });

std::string load_error(policy_trainer& t, const std::string& bytes) {
  try {
    t.load_state(bytes);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  ADD_FAILURE() << "load_state accepted the state";
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A state for another model size or dtype, or bytes that are no state at all: a
// std::runtime_error that names the tensor (or says unreadable), and the trainer unchanged.
// Catches a load that copies mismatched tensors (a crash or silent broadcast), one that
// converts dtypes, one that half-loads before failing, and torch's own exception types
// leaking out.
TEST(TrainerState, LoadIntoADifferentModelNamesTheTensor) {
  const auto st = settings(train_precision::float32);
  const auto samples = make_samples(2, 5);
  policy_trainer a(policy_from(11), st);
  a.begin_batch();
  a.accumulate(ptrs(samples));
  a.step();
  const auto saved = a.save_state();

  auto wider = test::tiny_model_config();
  wider.intermediate_size = 48;
  policy_trainer b(policy_from(7, wider), st);
  policy_trainer untouched(policy_from(7, wider), st);
  auto msg = load_error(b, saved);
  EXPECT_TRUE(contains(msg, "model.layers.0.mlp.gate_proj.weight")) << msg;
  EXPECT_TRUE(contains(msg, "[64, 32]") && contains(msg, "[48, 32]")) << msg;
  std::string diff;
  EXPECT_TRUE(same_weights(b.policy(), untouched.policy(), &diff)) << diff;
  EXPECT_EQ(b.version(), 0);

  auto deeper = test::tiny_model_config();
  deeper.num_hidden_layers = 3;
  policy_trainer c(policy_from(7, deeper), st);
  msg = load_error(c, saved);
  EXPECT_TRUE(contains(msg, "model.layers.2.")) << msg;
  EXPECT_TRUE(contains(msg, "not in the state")) << msg;

  policy_trainer f64(policy_from(7), settings(train_precision::float64));
  msg = load_error(f64, saved);
  EXPECT_TRUE(contains(msg, "dtype")) << msg;
  EXPECT_TRUE(contains(msg, "Float") && contains(msg, "Double")) << msg;

  policy_trainer same(policy_from(7), st);
  msg = load_error(same, "not a torch archive");
  EXPECT_TRUE(contains(msg, "unreadable")) << msg;
  msg = load_error(same, saved.substr(0, saved.size() / 2));
  EXPECT_TRUE(contains(msg, "unreadable")) << msg;
  EXPECT_TRUE(same_weights(same.policy(), policy_from(7), &diff)) << diff;
}

// Saving with a gradient pending would drop it silently. Catches a save_state without the check.
TEST(TrainerState, SaveWithAPendingGradientIsRefused) {
  policy_trainer t(policy_from(11), settings(train_precision::float32));
  const auto samples = make_samples(1, 6);
  t.begin_batch();
  t.accumulate(ptrs(samples));
  EXPECT_THROW(t.save_state(), std::logic_error);
  t.step();
  EXPECT_NO_THROW(t.save_state());
}

}  // namespace
