// Micro-batches by a token budget (runtime/train/micro_batching.hpp), against hand counts.
#include <gtest/gtest.h>

#include "runtime/train/micro_batching.hpp"

namespace asyncrl {
namespace {

scored_sample sample(uint64_t group, int prompt, int response) {
  scored_sample s;
  s.group_id = group;
  s.prompt.assign(static_cast<size_t>(prompt), 5);
  s.response.assign(static_cast<size_t>(response), 7);
  return s;
}

std::vector<const scored_sample*> ptrs(const std::vector<scored_sample>& v) {
  std::vector<const scored_sample*> out;
  for (auto& s : v)
    out.push_back(&s);
  return out;
}

// Prompt 4: responses 3, 5 of group 1 and 2 of group 2.
std::vector<scored_sample> three() {
  return {sample(1, 4, 3), sample(1, 4, 5), sample(2, 4, 2)};
}

TEST(MicroBatching, PackedTokensCountEachSharedPromptOnce) {
  auto s = three();
  EXPECT_EQ(packed_tokens(ptrs(s), /*shared_prompt=*/false), 7 + 9 + 6);
  // Group 1's prompt once (4 + 3 + 5), group 2's once (4 + 2).
  EXPECT_EQ(packed_tokens(ptrs(s), /*shared_prompt=*/true), 12 + 6);
}

TEST(MicroBatching, FullPrefixIsTheLongestThatFits) {
  auto s = three();
  auto p = ptrs(s);
  // 7, 16, 22 tokens cumulated: a budget of 16 holds exactly two, 15 one, 22 all (not full).
  EXPECT_EQ(full_micro_batch(p, 16, false), 2u);
  EXPECT_EQ(full_micro_batch(p, 15, false), 1u);
  EXPECT_EQ(full_micro_batch(p, 22, false), 0u);
  // A first sample over the budget still goes, alone.
  EXPECT_EQ(full_micro_batch(p, 3, false), 1u);
  // Shared: 7, 12, 18 cumulated.
  EXPECT_EQ(full_micro_batch(p, 12, true), 2u);
  EXPECT_EQ(full_micro_batch(p, 11, true), 1u);
}

TEST(MicroBatching, SplitKeepsOrderAndEverySampleOnce) {
  auto s = three();
  auto p = ptrs(s);
  auto parts = split_by_tokens(p, 9, false);  // 7 | 9 | 6
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0], (std::vector<const scored_sample*>{p[0]}));
  EXPECT_EQ(parts[1], (std::vector<const scored_sample*>{p[1]}));
  EXPECT_EQ(parts[2], (std::vector<const scored_sample*>{p[2]}));
  parts = split_by_tokens(p, 16, false);  // 7 + 9 | 6
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0], (std::vector<const scored_sample*>{p[0], p[1]}));
  EXPECT_EQ(parts[1], (std::vector<const scored_sample*>{p[2]}));
  parts = split_by_tokens(p, 1000, true);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0], p);
  EXPECT_TRUE(split_by_tokens({}, 10, false).empty());
  EXPECT_THROW(full_micro_batch(p, 0, false), std::invalid_argument);
}

}  // namespace
}  // namespace asyncrl
