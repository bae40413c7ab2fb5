// The controller's data loader (runtime/task/prompt_loader): its order per epoch, its retry
// list and its checkpointed state.

#include <gtest/gtest.h>

#include <set>

#include "runtime/task/prompt_loader.hpp"

namespace asyncrl {
namespace {

// n prompts: prompt i is {i}, its ground truth "t<i>".
prompt_loader loader_of(size_t n, uint64_t seed) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::string> truths;
  for (size_t i = 0; i < n; ++i) {
    prompts.push_back({static_cast<int32_t>(i)});
    truths.push_back("t" + std::to_string(i));
  }
  return prompt_loader(prompts, truths, seed);
}

std::vector<uint64_t> indices(prompt_loader& l, size_t k) {
  std::vector<uint64_t> out;
  for (size_t i = 0; i < k; ++i)
    out.push_back(l.next().prompt_index);
  return out;
}

// Each epoch hands out every prompt exactly once (an off-by-one at the wrap would repeat or
// skip one), with consecutive schedule positions and group ids, and the prompt and truth of
// its index; the next epoch is a different shuffle.
TEST(PromptLoader, EveryEpochIsAPermutationAndTheNextOneIsReshuffled) {
  const size_t n = 16;
  auto l = loader_of(n, 7);
  std::vector<uint64_t> first, second;
  for (uint64_t k = 0; k < 2 * n; ++k) {
    auto t = l.next();
    EXPECT_EQ(t.seq, k);
    EXPECT_EQ(t.group_id, k);
    ASSERT_EQ(t.prompt, (std::vector<int32_t>{static_cast<int32_t>(t.prompt_index)}));
    EXPECT_EQ(t.ground_truth, "t" + std::to_string(t.prompt_index));
    (k < n ? first : second).push_back(t.prompt_index);
  }
  EXPECT_EQ(std::set<uint64_t>(first.begin(), first.end()).size(), n);
  EXPECT_EQ(std::set<uint64_t>(second.begin(), second.end()).size(), n);
  EXPECT_NE(first, second);
  EXPECT_EQ(l.dispatched(), 2 * n);
}

TEST(PromptLoader, TheOrderIsAFunctionOfTheSeed) {
  auto a = loader_of(32, 1), b = loader_of(32, 1), c = loader_of(32, 2);
  const auto ia = indices(a, 40);
  EXPECT_EQ(ia, indices(b, 40));
  EXPECT_NE(ia, indices(c, 40));
}

// Lost prompts go first, in their order and with their group ids (the same random numbers);
// dropped ones go after them with fresh group ids; then new prompts continue the schedule.
TEST(PromptLoader, RetriesComeFirstLostBeforeDroppedWithFreshIdsForDropped) {
  auto l = loader_of(8, 3);
  auto t0 = l.next(), t1 = l.next(), t2 = l.next();
  l.regenerate(t0);  // dropped by the queue: group id 3, the next one
  l.retry_first({t1, t2});
  auto r1 = l.next(), r2 = l.next(), r0 = l.next(), fresh = l.next();
  EXPECT_EQ(r1.group_id, t1.group_id);
  EXPECT_EQ(r1.seq, t1.seq);
  EXPECT_EQ(r2.group_id, t2.group_id);
  EXPECT_EQ(r0.seq, t0.seq);
  EXPECT_EQ(r0.group_id, 3u);
  EXPECT_EQ(fresh.seq, 3u);
  EXPECT_EQ(fresh.group_id, 4u);
}

// A loader restored from a save continues exactly as the saved one would: the in-flight
// prompts first, then the waiting ones, then the same schedule, across an epoch boundary
// (a restore that forgot the epoch or the cursor would hand out other prompts).
TEST(PromptLoader, ARestoredLoaderContinuesTheSavedSchedule) {
  const size_t n = 6;
  auto a = loader_of(n, 11);
  std::vector<prompt_task> in_flight;
  for (int i = 0; i < 9; ++i)  // into the second epoch
    in_flight.push_back(a.next());
  a.regenerate(in_flight[0]);
  const std::vector<prompt_task> unsaved{in_flight[7], in_flight[8]};
  const auto saved = a.save(unsaved);
  ASSERT_EQ(saved.retry.size(), 3u);
  EXPECT_EQ(saved.epoch, 1);
  EXPECT_EQ(saved.pos, 3u);
  EXPECT_EQ(saved.next_seq, 9u);
  EXPECT_EQ(saved.next_group, 10u);

  auto b = loader_of(n, 11);
  b.restore(saved);
  auto expect = a;  // a continues with the in-flight prompts put back first
  expect.retry_first(unsaved);
  for (int i = 0; i < 12; ++i) {
    auto x = expect.next(), y = b.next();
    EXPECT_EQ(x.seq, y.seq) << i;
    EXPECT_EQ(x.group_id, y.group_id) << i;
    EXPECT_EQ(x.prompt_index, y.prompt_index) << i;
  }
}

TEST(PromptLoader, MismatchedTruthsAreRefused) {
  EXPECT_THROW(prompt_loader({{1}, {2}}, {"a"}, 1), std::invalid_argument);
}

}  // namespace
}  // namespace asyncrl
