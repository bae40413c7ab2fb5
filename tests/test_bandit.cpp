// End-to-end learning through the actors, on a bandit whose optimum is known: a response earns 1
// exactly when it starts with '#'. A fresh model starts near 1/vocab; RL through rollouter ->
// reward -> queue -> trainer -> synchronizer must push the sampled reward above 0.9. If any hop
// paired a reward or an advantage with the wrong response, the reward would no longer follow the
// action and nothing would be learned.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/actor_harness.hpp"

using namespace asyncrl;

namespace {

struct bandit_case {
  const char* name;
  std::vector<std::string> overrides;
};

void PrintTo(const bandit_case& c, std::ostream* os) {
  *os << c.name;
}

class Bandit : public ::testing::TestWithParam<bandit_case> {};

TEST_P(Bandit, RlFromAFreshModelFindsTheRewardedFirstToken) {
  std::vector<std::string> o{"reward.function=prefix",
                             "reward.prefix=#",
                             "rollout.n=8",
                             "data.train_batch_size=8",
                             "rollout.max_new_tokens=2",
                             "rollout.max_batch=64",
                             "rollout.chunk_tokens=1",
                             "trainer.micro_batch_size=8",
                             "trainer.lr=0.02",
                             "trainer.total_steps=40"};
  o.insert(o.end(), GetParam().overrides.begin(), GetParam().overrides.end());
  auto lc = test::tiny_run_config(o);
  auto out = test::run_coordinated(lc->cfg);
  ASSERT_TRUE(out.finished) << "the run hung";
  ASSERT_TRUE(out.result.ok) << out.result.error;
  std::vector<double> reward;
  for (auto& l : out.metrics)
    reward.push_back(nlohmann::json::parse(l)["reward_mean"].get<double>());
  ASSERT_EQ(reward.size(), 40u);
  EXPECT_LT(reward.front(), 0.3) << "the fresh model already knew the answer: nothing to learn";
  double tail = 0;
  for (size_t i = reward.size() - 5; i < reward.size(); ++i)
    tail += reward[i] / 5;
  EXPECT_GT(tail, 0.9) << "mean sampled reward of the last 5 of 40 steps";
  size_t first = 0;  // the first step above 0.9, for the log
  while (first < reward.size() && reward[first] <= 0.9)
    ++first;
  std::cout << "[bandit] " << GetParam().name << ": reward " << reward.front() << " -> " << tail
            << ", first step above 0.9: " << first + 1 << "\n";
}

INSTANTIATE_TEST_SUITE_P(
    Modes, Bandit,
    ::testing::Values(
        bandit_case{"sync", {"async_training.mode=sync"}},
        bandit_case{"periodic", {"async_training.mode=periodic", "rollout.num_workers=2"}},
        bandit_case{"fully_async_partial",
                    {"async_training.mode=fully_async", "async_training.staleness_threshold=1",
                     "async_training.partial_rollout=true", "trainer.ppo_mini_batch_size=4",
                     "algorithm.loss=decoupled", "algorithm.prox_logp=loglinear"}}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
