// epoch_order: a permutation, a new one each epoch, reproducible, and the same orders that the
// controller and `asyncrl sft` drew before they shared it.

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "runtime/common/rng.hpp"
#include "runtime/task/epoch_order.hpp"

using namespace asyncrl;

namespace {

bool is_permutation_of_iota(std::vector<size_t> v, size_t n) {
  if (v.size() != n) return false;
  std::sort(v.begin(), v.end());
  for (size_t i = 0; i < n; ++i)
    if (v[i] != i) return false;
  return true;
}

TEST(EpochOrder, IsAPermutationThatChangesEachEpochAndIsReproducible) {
  for (auto stream : {kPromptOrder, kSftBatchOrder}) {
    for (size_t n : {0, 1, 2, 7, 100}) {
      for (int64_t e = 0; e < 3; ++e) {
        auto o = epoch_order(n, 42, e, stream);
        EXPECT_TRUE(is_permutation_of_iota(o, n)) << n << " " << e;
        EXPECT_EQ(o, epoch_order(n, 42, e, stream));  // a pure function of its arguments
      }
    }
    EXPECT_NE(epoch_order(100, 42, 0, stream), epoch_order(100, 42, 1, stream));
    EXPECT_NE(epoch_order(100, 42, 0, stream), epoch_order(100, 43, 0, stream));
  }
  EXPECT_NE(epoch_order(100, 42, 0, kPromptOrder), epoch_order(100, 42, 0, kSftBatchOrder));
}

// The two shuffles as they were written inline before (actors/controller.cpp and
// apps/asyncrl/sft_command.cpp): seeded runs must keep their example orders.
std::vector<size_t> controller_reference(size_t n, uint64_t seed, int64_t epoch) {
  rng_stream rng(seed, 0x10ade5, epoch);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  for (size_t i = order.size(); i > 1; --i)
    std::swap(order[i - 1], order[rng.bits(i) % i]);
  return order;
}

std::vector<std::vector<size_t>> sft_reference(size_t n, uint64_t seed, int epochs) {
  rng_stream rng(seed, 0x5f7, 0);
  uint64_t draws = 0;
  std::vector<std::vector<size_t>> out;
  for (int e = 0; e < epochs; ++e) {
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    for (size_t i = order.size(); i > 1; --i)
      std::swap(order[i - 1], order[rng.bits(draws++) % i]);
    out.push_back(order);
  }
  return out;
}

TEST(EpochOrder, KeepsTheOrdersOfTheControllerAndOfSft) {
  for (size_t n : {1, 2, 5, 64}) {
    auto sft = sft_reference(n, 7, 4);
    for (int64_t e = 0; e < 4; ++e) {
      EXPECT_EQ(epoch_order(n, 7, e, kPromptOrder), controller_reference(n, 7, e)) << n << " " << e;
      EXPECT_EQ(epoch_order(n, 7, e, kSftBatchOrder), sft[e]) << n << " " << e;
    }
  }
}

}  // namespace
